"""Robustness: a run's watermarked texts attacked, then detected again, so what a watermark buys is measured beside what
it costs.

An attack set is keyed by the run, the attack, its full parameters and the seed (and the model, for an attack that
runs one). It stores each sample's attacked text with what the attack did to it: the share of the words changed, and,
measured after detection, the ROUGE-L and encoder similarity to the clean text and, of the clean text's disease
concepts, how many are still there and which new ones appeared. The generations are never touched. Attacking is
resumable and idempotent: samples already stored are skipped, and each sample's edit is drawn from (seed, sample
index), so a resumed attack stores what an uninterrupted one would.

Detection then scores the attacked texts with the run's method and tokenizer (`redetect` with the attack set). The
negatives are the run's own unwatermarked (or reference) texts, scored in the clean detection set of the same method,
parameters and tokenizer, so AUROC and TPR at a fixed FPR compare with the clean run's.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import threading
from collections import Counter
from typing import Callable

import numpy as np
import pandas as pd

from fwsapp import percent
from fwsapp.detection import roc
from fwsapp.watermark import methods
from fwsapp.robustness.attacks import ATTACKS, AttackPlugIn
from fwsapp.robustness.attacks.base import AttackInput, Span
from fwsapp.entities.recognizers import KINDS, default_recognizer
from fwsapp.entities.recognizers.base import Entity, disease_concept
from fwsapp.sample_size import enough, not_enough
from fwsapp.store import TEXT_COLUMNS, Store

WRITE_EVERY = 50  # samples per transaction: a killed attack keeps what it stored


# The longest watermarked text an attack takes: words_changed, ROUGE-L and the page's diff align word sequences, which
# costs the square of their length (0.1 s at 1,000 words, 2.4 s at 4,000); model answers are far shorter.
MAX_ATTACKED_CHARACTERS = 20_000


def attack_set_id(run_id: str, attack: str, params: dict, seed: int, model: str | None = None) -> str:
    identity = {"run": run_id, "attack": attack, "params": params, "seed": seed, "model": model}
    return "atk-" + hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:10]


def check_attack_params(attack: str, params: dict) -> tuple[AttackPlugIn, dict]:
    """The attack's entry and checked parameters, whichever run it attacks (its recognizer installed)."""
    from fwsapp.entities.recognizers import check_recognizer

    entry = ATTACKS.check(attack)
    checked = entry.checked_params(params)
    check_recognizer(entry.recognizer(checked))
    return entry, checked


def check_attack(store: Store, run_id: str, attack: str, params: dict) -> tuple[AttackPlugIn, dict]:
    """The attack's entry and checked parameters, once the run is known to have what it needs; a clear error
    otherwise, before any work."""
    entry, checked = check_attack_params(attack, params)
    run = store.run(run_id)
    if methods.info(run["method"]).post_hoc:
        raise ValueError(f"{run_id}: {run['method']} is a post-hoc detector; its run has no watermarked texts to attack.")
    generations = store.generations(run_id)
    if generations.empty or generations.watermarked_text.isna().all():
        raise ValueError(f"{run_id} has no watermarked texts to attack: generate or import them first.")
    longest = int(generations.watermarked_text.dropna().str.len().max())
    if longest > MAX_ATTACKED_CHARACTERS:
        raise ValueError(f"{run_id} has a watermarked text of {longest:,} characters, more than the "
                         f"{MAX_ATTACKED_CHARACTERS:,} an attack measures (the word alignment of what it changed grows "
                         "with the square of a text's length): split such texts, or attack another run.")
    if entry.forges:
        forgery_problem(run, generations, entry, checked)
    host = entry.host_text(checked)
    if host and generations[TEXT_COLUMNS[host]].isna().all():
        others = [kind for kind in entry.params[entry.host_text_param][1].choices if kind != host]
        raise ValueError(f"{run_id} has no {host} texts to paste into: choose {entry.host_text_param}="
                         f"{' or '.join(others)}.")
    return entry, checked


def forgery_problem(run: dict, generations: pd.DataFrame, entry: AttackPlugIn, checked: dict) -> None:
    """A forgery needs a method whose green list the tokens before each position seed, and more answers than it
    observes (one prompt at least is left to forge an answer to)."""
    declared = methods.info(run["method"])
    if declared.seeding_context is None:
        seeded = [name for name in methods.watermark_names() if methods.info(name).seeding_context is not None]
        raise ValueError(f"{run['run_id']}: {run['method']} has no green list seeded by the tokens before each "
                         f"position, which {entry.name} learns; it forges {', '.join(seeded)}.")
    observed, answers = checked[entry.observes], len(observable(generations))
    if answers <= observed:
        raise ValueError(f"{run['run_id']} has {answers} watermarked answers with their unwatermarked ones; {entry.name} "
                         f"with {entry.observes}={observed} needs more, one prompt at least left to forge an answer to: "
                         f"lower {entry.observes} or attack a larger run.")


def forged(frame: pd.DataFrame) -> pd.Series:
    """Which summary rows are forgeries (an attack that writes answers) rather than removals or the clean texts."""
    return frame.attack.map(lambda name: isinstance(name, str) and name in ATTACKS and ATTACKS[name].forges)


def observable(generations: pd.DataFrame) -> pd.DataFrame:
    """The samples a forger may observe: a watermarked answer and the unwatermarked one to the same prompt."""
    return generations[generations.watermarked_text.notna() & generations.unwatermarked_text.notna()]


def forgery_split(generations: pd.DataFrame, observed: int, forgeries: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the samples the forger observes, those it forges answers to): the observable samples in an order drawn from
    `seed`, the first `observed` observed, the next `forgeries` forged; the same whatever is already stored."""
    candidates = observable(generations).sort_values("sample_idx")
    order = candidates.iloc[np.random.default_rng([seed]).permutation(len(candidates))]
    return order.iloc[:observed], order.iloc[observed:observed + forgeries].sort_values("sample_idx")


def words_changed(clean: str, attacked: str) -> float:
    """The share of the clean text's words that an alignment of the two word sequences does not keep."""
    before, after = clean.split(), attacked.split()
    if not before:
        return 0.0
    kept = sum(block.size for block in difflib.SequenceMatcher(None, before, after, autojunk=False).get_matching_blocks())
    return 1 - kept / len(before)


def mention_survival(clean: list[Entity], attacked: list[Entity], concept=None) -> tuple[int, list[str]]:
    """(how many of the clean text's mentions the attacked text still names, as many times as each occurs, the names of
    the attacked text's mentions that the clean text does not name). Both compare concepts (`concept`, the mentions'
    kind's normaliser; a disease's MeSH heading by default), so a synonym the attack wrote ('type 2 diabetes mellitus'
    for 'type 2 diabetes', 'paracetamol' for 'Tylenol') keeps the mention and introduces nothing."""
    concept = concept or disease_concept
    before = Counter(concept(entity.text) for entity in clean)
    after = Counter(concept(entity.text) for entity in attacked)
    kept = sum((before & after).values())
    return kept, sorted(entity.normalized for entity in attacked if concept(entity.text) not in before)


def rewriting_backend(checked: dict, model_loader=None):
    """The judge backend an LLM attack rewrites with, checked to answer before any work (a server that is not there
    is one line, and nothing is stored)."""
    from fwsapp.judge.backends import make_backend
    from fwsapp.judge.registry import JUDGE_BACKENDS, REQUEST_TIMEOUT_SECONDS
    from fwsapp.models import EMBEDDED_MODEL

    entry = JUDGE_BACKENDS[checked["backend"]]
    model = checked["model"] or entry.default_model or None
    if entry.in_process and model_loader is None:
        raise ValueError(f"The {entry.name} backend rewrites with a model loaded here: give a model loader.")
    loaded = model_loader(model or EMBEDDED_MODEL) if entry.in_process else None
    backend = make_backend(entry.name, model, checked["base_url"] or None, REQUEST_TIMEOUT_SECONDS, loaded=loaded)
    if not entry.in_process:
        try:
            backend.check()
        except RuntimeError as error:
            raise RuntimeError(f"The {entry.name} backend at {checked['base_url'] or 'its default URL'} does not "
                               f"answer ({error}): start it or fix the URL; nothing was attacked.") from None
    return backend


def attack_size(store: Store, run_id: str, attack: str, params: dict | None = None) -> int:
    """How many texts attacking the run writes: the forgeries asked for, or one per generated sample."""
    entry, checked = check_attack(store, run_id, attack, params or {})
    return entry.load().answers(checked) if entry.forges else store.count("generations", run_id)


def attack_run(store: Store, run_id: str, attack: str, params: dict | None = None, seed: int = 0,
               progress: Callable[[int, int], None] | None = None, cancel: threading.Event | None = None,
               model_loader=None) -> str:
    """Attack a run's watermarked texts; returns the attack set's id. Samples already attacked are kept. An LLM
    attack's texts the backend could not rewrite are left out, and an error says how many: a rerun tries them."""
    from fwsapp.robustness.attacks.llm import RewriteFailed
    from fwsapp.judge.registry import CONCURRENT_REQUESTS
    from fwsapp.entities.recognizers import load_recognizer

    entry, checked = check_attack(store, run_id, attack, params or {})
    resources, model = {}, None
    if "backend" in entry.needs:
        resources = {"backend": rewriting_backend(checked, model_loader), "concurrency": CONCURRENT_REQUESTS}
        model = resources["backend"].model
    generations = store.generations(run_id)
    targets = generations[generations.watermarked_text.notna()]
    if entry.forges:
        forger = entry.load()
        observed, targets = forgery_split(generations, checked[entry.observes], forger.answers(checked), seed)
        resources, model = forger.prepare(store.run(run_id), checked, observed, model_loader)
    set_id = attack_set_id(run_id, entry.name, checked, seed, model)
    done = set(store.attacked_texts([set_id]).sample_idx)
    todo = targets[~targets.sample_idx.isin(done)]
    total = len(done) + len(todo)
    if progress:
        progress(len(done), total)
    if todo.empty:
        return set_id
    attacker = entry.load()(checked, seed, resources)
    failures: list[str] = []
    recognizer = load_recognizer(entry.recognizer(checked)) if entry.uses_mentions else None
    # A forgery writes each answer with a model (seconds to minutes apiece): one at a time, so that progress moves
    # and a cancel is honoured between answers.
    write_every = 1 if entry.forges else WRITE_EVERY
    for start in range(0, len(todo), write_every):
        if cancel is not None and cancel.is_set():
            break
        chunk = todo.iloc[start:start + write_every]
        clean = [" ".join(text.split()) for text in chunk.watermarked_text]
        found = recognizer.find_many(clean) if recognizer else [[] for _ in clean]
        inputs = [AttackInput(
            int(row.sample_idx), text, row.unwatermarked_text if isinstance(row.unwatermarked_text, str) else None,
            row.reference if isinstance(row.reference, str) else None,
            protected=tuple(Span(entity.start, entity.end) for entity in mentions) if checked.get("keep_entities")
            else (), mentions=tuple(Span(entity.start, entity.end) for entity in mentions), prompt=row.prompt)
            for row, text, mentions in zip(chunk.itertuples(), clean, found)]
        attacked = attacker.attack_many(inputs)
        failures += [str(result) for result in attacked if isinstance(result, RewriteFailed)]
        rewritten = [(item, result) for item, result in zip(inputs, attacked) if not isinstance(result, RewriteFailed)]
        rows = [{"sample_idx": item.sample_idx, "text": result.text, "note": result.note,
                 "spans": [[span.start, span.end] for span in result.spans],
                 "words_changed": words_changed(item.text, result.text)} for item, result in rewritten]
        if rows:
            store.write_attacked_texts(set_id, run_id, rows, entry.name, checked, seed, model)
        if progress:
            progress(len(done) + start + len(chunk), total)
    if failures:
        raise RuntimeError(f"{run_id}: {len(failures)} of {len(todo)} texts were not rewritten ({failures[0]}); the "
                           f"others are stored. Run the same command again to retry them.")
    return set_id




def fact_survival(clean: list, attacked: list) -> dict[str, list[int]]:
    """Per kind of fact: [the clean text's facts, how many of them the attacked text still states with the same
    assertion]. A fact is its concept and assertion, so a flipped negation is a fact lost."""
    kinds = {fact.kind for fact in clean}
    before = Counter((fact.kind, fact.value, fact.assertion) for fact in clean)
    after = Counter((fact.kind, fact.value, fact.assertion) for fact in attacked)
    kept = before & after
    return {kind: [sum(n for key, n in before.items() if key[0] == kind), sum(n for key, n in kept.items() if key[0] == kind)]
            for kind in sorted(kinds)}


def measure_changes(store: Store, attack_set: str, encoder=None) -> int:
    """What the attack changed in each attacked text that lacks the measurements, against its clean text: ROUGE-L,
    the encoder similarity (cosine, as SimCSE's; the default encoder, loaded only when a text lacks them), and the
    disease mentions kept and introduced (`mention_survival`, with the attack's recognizer). Returns how many were
    measured. Measured after detection, apart from the attack."""
    from fwsapp.quality.rouge import rouge_l

    from fwsapp.quality.simcse import similarity
    from fwsapp.entities.recognizers import load_recognizer

    from fwsapp.entities.facts import FactFinder

    texts = store.attacked_texts([attack_set])
    todo = texts[texts.similarity.isna() | texts.mentions_kept.isna() | texts.fact_survival.isna()]
    if todo.empty:
        return 0
    if encoder is None:
        from fwsapp.models.encoder import load_encoder

        encoder = load_encoder()
    generations = store.generations(todo.run_id.iloc[0]).set_index("sample_idx").watermarked_text
    clean = [" ".join(generations[index].split()) for index in todo.sample_idx]
    attacked = list(todo.text)
    attack = store.attack_sets().set_index("attack_set_id").loc[attack_set]
    recognizer = load_recognizer(ATTACKS[attack.attack].recognizer(json.loads(attack.params)))
    before, after = recognizer.find_many(clean), recognizer.find_many(attacked)
    # The recognizers that load no model: an attack set may hold thousands of texts.
    facts = FactFinder({kind: default_recognizer(kind, model_free=True) for kind in KINDS}).find_many(clean + attacked)
    rows = []
    for index, (sample_idx, old, new, cosine, mentions, now) in enumerate(zip(
            todo.sample_idx, clean, attacked, similarity(encoder, clean, attacked), before, after)):
        kept, introduced = mention_survival(mentions, now, recognizer.concept)
        rows.append({"sample_idx": int(sample_idx), "rouge_l": rouge_l(new, old),
                     "similarity": cosine, "mentions_clean": len(mentions), "mentions_kept": kept,
                     "mentions_introduced": introduced,
                     "fact_survival": json.dumps(fact_survival(facts[index], facts[len(clean) + index]))})
    store.write_changes(attack_set, rows)
    return len(rows)


CLEAN = "clean (no attack)"  # the column of the texts as generated, detected again from text as the attacked ones are


def summaries(store: Store, run_ids: list[str] | None = None) -> list[dict]:
    """Per run × attack set × detection set: the attack, its detection against the clean negatives (AUROC with its
    interval, TPR at FPR 0/1/5 %), the mean change of the watermarked texts' scores, the share still called
    watermarked, and what the attack did to the texts (words changed, ROUGE-L, disease mentions kept of those there
    were, and introduced). Each clean detection set that attacked sets compare with gives a row of its own first
    (`CLEAN`): the watermarked texts detected from text the same way, the baseline every attack is read against."""
    attacked_sets = store.detection_sets(run_ids, attacked=True)
    if attacked_sets.empty:
        return []
    clean_sets = store.detection_sets(run_ids)
    attacks = store.attack_sets(run_ids).set_index("attack_set_id")
    texts = store.attacked_texts(list(attacks.index))
    scores = store.redetections(list(attacked_sets.set_id) + list(clean_sets.set_id))
    runs = store.runs().set_index("run_id")
    found, baselines, notes = [], {}, {}
    for entry in attacked_sets.itertuples():
        attack = attacks.loc[entry.attack_set_id]
        params = json.loads(attack.params)
        same = clean_sets[clean_sets.set_id == clean_set_id(entry)]
        clean = scores[scores.set_id.isin(same.set_id)]
        own = scores[scores.set_id == entry.set_id]
        negative = roc.negative_kind(set(clean.text_kind), entry.method)
        negatives = clean.loc[clean.text_kind == negative, "score"].dropna()
        paired = own.merge(clean[clean.text_kind == "watermarked"], on="sample_idx", suffixes=("", "_clean"))
        edited = texts[texts.attack_set_id == entry.attack_set_id]
        if clean_set_id(entry) not in notes:
            notes[clean_set_id(entry)] = baseline_note(store, entry, runs.loc[entry.run_id], clean)
        common = {"run_id": entry.run_id, "method": entry.method, "task": runs.loc[entry.run_id, "task"],
                  "model": runs.loc[entry.run_id, "model"], "tokenizer": entry.tokenizer, "normalize": entry.normalize,
                  "negatives": negative, "negative_texts": int(negatives.size),
                  "detector_params": json.loads(entry.params), "baseline_note": notes[clean_set_id(entry)]}
        detection = _detection(own.score.dropna(), negatives, entry, json.loads(entry.params))
        mentions = int(edited.mentions_clean.sum())
        found.append({
            **common, "attack": attack.attack,
            "attack_label": ATTACKS[attack.attack].label(params) if attack.attack in ATTACKS else attack.attack,
            "params": params, "seed": int(attack.seed), "attack_set_id": entry.attack_set_id, "set_id": entry.set_id,
            **detection,
            "mean_score_change": float((paired.score - paired.score_clean).mean()) if len(paired) else None,
            "words_changed": float(edited.words_changed.mean()) if len(edited) else None,
            "rouge_l": float(edited.rouge_l.mean()) if edited.rouge_l.notna().any() else None,
            "similarity": float(edited.similarity.mean()) if edited.similarity.notna().any() else None,
            "mentions": mentions, "mentions_kept": int(edited.mentions_kept.sum()),
            "entity_survival": float(edited.mentions_kept.sum() / mentions) if mentions else None,
            "mentions_introduced": int(sum(len(names) for names in edited.mentions_introduced.dropna())),
            **survival_by_kind(edited.fact_survival),
        })
        if len(same) and same.set_id.iloc[0] not in baselines:
            positives = clean.loc[clean.text_kind == "watermarked", "score"].dropna()
            baselines[same.set_id.iloc[0]] = {
                **common, "attack": None, "attack_label": CLEAN, "params": {}, "seed": None, "attack_set_id": None,
                "set_id": same.set_id.iloc[0], **_detection(positives, negatives, entry, json.loads(entry.params)),
                "mean_score_change": 0.0, "words_changed": 0.0, "rouge_l": 1.0, "similarity": 1.0, "mentions": None,
                "mentions_kept": None, "entity_survival": None, "mentions_introduced": 0,
                **{survival_column(kind): None for kind in KINDS}}
    return list(baselines.values()) + found


def clean_set_id(entry) -> str:
    """The detection set that scored the run's own texts exactly as `entry` (an attacked set) scored its attacked ones:
    its identity (`redetect.detection_set_id`) less the attack. A windowed (WinMax) or deduplicated set of the same
    detector scores other statistics; matched by method, parameters, tokenizer and normaliser alone, its negatives
    were pooled with the whole texts' (12 negatives of 4 texts)."""
    from fwsapp.detection.redetect import detection_set_id

    return detection_set_id(entry.run_id, entry.method, json.loads(entry.params), entry.tokenizer,
                            normalize=entry.normalize if isinstance(entry.normalize, str) else None,
                            window=None if pd.isna(entry.window_tokens) else int(entry.window_tokens),
                            deduplicate=bool(entry.deduplicate))


def survival_column(kind: str) -> str:
    return f"{kind}_fact_survival"


def survival_labels() -> dict[str, str]:
    """Each kind's survival column -> its label, the kind named as its caption names it ("Fact survival (drugs)")."""
    return {survival_column(name): f"Fact survival ({kind.plural})" for name, kind in KINDS.items()}


def survival_by_kind(stored: pd.Series) -> dict[str, float | None]:
    """Each kind's share of the clean texts' facts the attacked texts keep, pooled over the texts (None: no fact)."""
    totals = {kind: [0, 0] for kind in KINDS}
    for found in stored.dropna():
        for kind, (clean, kept) in (json.loads(found) if isinstance(found, str) else found).items():
            totals[kind][0] += clean
            totals[kind][1] += kept
    return {survival_column(kind): kept / clean if clean else None for kind, (clean, kept) in totals.items()}


def baseline_note(store: Store, entry, run, clean: pd.DataFrame) -> str | None:
    """What sets the clean baseline (`clean`, the run's texts detected again as `entry` detects the attacked ones) apart
    from the run's own scores on the Detect page: a served run's texts read again from text get other ids
    (`retokenised`); an imported run's stored scores that this detection does not reproduce were made under other
    settings, so every attack on it is read against other green lists. None where nothing does."""
    from fwsapp.detection.redetect import agreement, reproduction

    if isinstance(run.get("server"), str):
        return retokenised(store, entry.run_id, entry.tokenizer, run)
    if not bool(run.get("imported")):
        return None
    stored = store.detections([entry.run_id])
    found = agreement(clean, stored[stored.detector == entry.method])
    return (f"{reproduction(found)} (the log's settings differ: import it again with its --param)"
            if found and found["differing"] else None)


def retokenised(store: Store, run_id: str, tokenizer: str, run) -> str | None:
    """For a run generated through a serving engine, whose own detection read the engine's ids: how many of its
    watermarked texts, read again from text as every attacked text is, get other ids than the engine's (the clean
    baseline then differs from the Detect page's)."""
    from fwsapp.models.tokenizers import load_tokenizer

    encode = load_tokenizer(tokenizer).encode
    rows = store.generations(run_id).dropna(subset=["watermarked_text"])
    changed = sum(encode(row.watermarked_text) != [int(token) for token in row.watermarked_ids]
                  for row in rows.itertuples() if hasattr(row.watermarked_ids, "__len__"))
    return (f"read again from text with {tokenizer}: {changed} of {len(rows)} texts get other ids than the engine "
            "sent (the Detect page reads the engine's)")


def _detection(positives: pd.Series, negatives: pd.Series, entry, params: dict) -> dict:
    """Detection of `positives` against the clean negatives, and the share past the method's own threshold."""
    block = roc.summary(positives, negatives, entry.score_direction) if len(positives) and len(negatives) else None
    info = methods.info(entry.method)
    return {"texts": int(positives.size), "auroc": block["auroc"] if block else None,
            "auroc_ci": block.get("auroc_ci") if block else None, "tpr_at_fpr": block["tpr_at_fpr"] if block else None,
            "still_detected": float(np.mean([info.is_watermarked(score, params) for score in positives]))
            if len(positives) else None}


def summary_frame(store: Store, run_ids: list[str] | None = None) -> pd.DataFrame:
    """`summaries` as a table, one row per run × attack set × detection set (`flattened`)."""
    return flattened(summaries(store, run_ids))


def flattened(rows: list[dict]) -> pd.DataFrame:
    """Rows of `summaries` as a table: TPR at each FPR level a column, AUROC's interval written as a range."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    for level in roc.FPR_LEVELS:
        key = roc.level_key(level)
        frame[tpr_column(level)] = [block[key] if block else None for block in frame.tpr_at_fpr]
    frame["AUROC 95% CI"] = [f"{bounds[0]:.3f}–{bounds[1]:.3f}" if bounds else None for bounds in frame.auroc_ci]
    return frame.drop(columns=["tpr_at_fpr"])


def tpr_column(level: float) -> str:
    return f"TPR at {percent(level)} FPR"


# The summary's columns as every table heads them, in the order they are read: the attack, its detection, then what
# it did to the texts. The Robustness page's table of every set and the report's robustness table read them.
HEADINGS = {"attack_label": "Attack", "seed": "Seed", "tokenizer": "Tokenizer", "texts": "Texts",
            "negative_texts": "Negatives", "auroc": "AUROC", "AUROC 95% CI": "AUROC 95% CI",
            **{tpr_column(level): tpr_column(level) for level in roc.FPR_LEVELS},
            "still_detected": "Still detected (share)", "mean_score_change": "Mean score change",
            "words_changed": "Words changed", "rouge_l": "ROUGE-L to the clean text",
            "similarity": "Similarity to the clean text", "mentions": "Mentions", "mentions_kept": "Mentions kept",
            "entity_survival": "Entity survival", "mentions_introduced": "Mentions introduced", **survival_labels()}
# Counts among them: whole numbers, a clean row's none included (not 101.000 mentions).
COUNTS = ["seed", "texts", "negative_texts", "mentions", "mentions_kept", "mentions_introduced"]


def headed(frame: pd.DataFrame, columns=tuple(HEADINGS)) -> pd.DataFrame:
    """`frame`'s summary columns among `columns`, in their order and under their headings, counts whole."""
    present = [column for column in columns if column in frame.columns]
    return frame[present].astype({column: "Int64" for column in COUNTS if column in present}).rename(columns=HEADINGS)


# What the Robustness page's table and curves can show: heading -> summary column.
MEASURES = {HEADINGS[column]: column for column in (
    tpr_column(0.01), tpr_column(0.05), "auroc", "still_detected", "entity_survival", *survival_labels(),
    "words_changed", "similarity")}


def method_by_attack(frame: pd.DataFrame, measure: str) -> pd.DataFrame:
    """One row per run (and normaliser), one column per attack with its parameters, the clean texts first: the chosen
    measure (NaN where it is not measured: no disease mention, or too few negatives for the FPR)."""
    values = frame.assign(value=pd.to_numeric(frame[MEASURES[measure]], errors="coerce")
                          .where([not too_few(row, measure) for _, row in frame.iterrows()]))
    table = values.pivot_table(index="run", columns="attack_label", values="value", aggfunc="mean", dropna=False)
    table.columns.name = None
    return table[sorted(table.columns, key=lambda column: column != CLEAN)]


def thresholds(frame: pd.DataFrame) -> str:
    """The verdict rules of the runs shown, as 'z > 4 for KGW; p ≤ 0.01 for vLLM-Gumbel'."""
    rules = dict.fromkeys(f"{methods.info(method).verdict_rule(params)} for {method}"
                          for method, params in zip(frame.method, frame.detector_params)
                          if isinstance(params, dict) and method in methods.METHODS)
    return "; ".join(rules) or "each method's own"


def too_few(row, measure: str) -> bool:
    """Whether a cell's texts are fewer than the small-sample rule allows for its measure, a rate, so that every view
    of it, the table and the heatmap alike, shows no number (`fwsapp.sample_size`). An AUROC is shown at any size, as
    the Detect page, the report and `attack` show it; its interval alone needs the minimum (`roc.interval_label`)."""
    return measure.startswith(("TPR", "Still")) and pd.notna(row.get("texts")) and not enough("rate", int(row["texts"]))


def rate_missing(row, measure: str) -> str | None:
    """Why a rate of `row` is not shown, or None: a TPR at an FPR by `roc.tpr_missing`, as the Detect page and Table 1
    say it; a share (or a TPR of a row that names no negatives) from fewer texts than the small-sample rule allows."""
    level = next((level for level in roc.FPR_LEVELS if tpr_column(level) == MEASURES.get(measure)), None)
    negatives = row.get("negative_texts")
    if level is not None and pd.notna(negatives) and pd.notna(row.get("texts")):
        return roc.tpr_missing(level, int(row["texts"]), int(negatives))
    return not_enough(int(row["texts"])) if too_few(row, measure) else None


def rates_ruled(frame: pd.DataFrame) -> pd.DataFrame:
    """`flattened` rows with each rate the page does not show (`rate_missing`) replaced by why, as the page's table
    shows it: the report's table printed "Still detected 0.125" of 8 texts where the Robustness page said "not enough
    data (n = 8)", and "–" (not computed) for a TPR at 1 % FPR that 8 negatives cannot resolve."""
    ruled = {column: [rate_missing(row, heading) or row[column] for _, row in frame.iterrows()]
             for heading, column in MEASURES.items() if column in frame}
    return frame.assign(**ruled)


def smaller_side(row) -> int:
    """The texts on the side with fewer, attacked or negative: what an AUROC's interval needs enough of."""
    return int(min(row.texts, row.get("negative_texts", row.texts)))


def shown_table(frame: pd.DataFrame, measure: str) -> pd.DataFrame:
    """`method_by_attack` as read: each value with what stands behind it. A TPR or a share with its exact 95 %
    interval (Clopper-Pearson, over the texts), an AUROC with its interval, entity survival with the mentions counted;
    a rate from fewer texts than the small-sample rule allows says so instead (`fwsapp.sample_size`)."""
    from scipy.stats import binomtest

    def cell(row) -> str | None:
        value = pd.to_numeric(row[MEASURES[measure]], errors="coerce")
        if measure == "Entity survival" and row.get("mentions") == 0:
            return "no mentions to keep"  # a dose change on answers that state no dose: nothing survived or fell
        if missing := rate_missing(row, measure):
            return missing
        if pd.isna(value):
            return None
        if measure == "AUROC":
            bounds = row.get("auroc_ci")
            if isinstance(bounds, (list, tuple)):
                return f"{value:.3f} ({bounds[0]:.2f}–{bounds[1]:.2f})"
            smaller = smaller_side(row)
            return f"{value:.3f}" if enough("auroc_ci", smaller) else f"{value:.3f} (no interval: n = {smaller})"
        if measure == "Entity survival":
            return f"{value:.2f} ({int(row.mentions_kept)} of {int(row.mentions)} mentions)"
        if measure.startswith("TPR") or measure.startswith("Still"):
            detected = int(round(value * row.texts))
            low, high = binomtest(detected, int(row.texts)).proportion_ci(0.95)
            return f"{value:.2f} ({low:.2f}–{high:.2f})"
        return f"{value:.3f}"

    cells = frame.assign(cell=[cell(row) for _, row in frame.iterrows()])
    table = cells.pivot_table(index="run", columns="attack_label", values="cell", aggfunc="first", dropna=False)
    table.columns.name = None
    return table.reindex(columns=method_by_attack(frame, measure).columns)


def default_measure(frame: pd.DataFrame) -> str:
    """TPR at 1 % FPR, as the literature reports robustness, or at 5 % where too few negatives resolve 1 %; AUROC
    where neither is resolved."""
    resolved = [name for name in ("TPR at 1% FPR", "TPR at 5% FPR")
                if pd.to_numeric(frame[MEASURES[name]], errors="coerce").notna().any()]
    return resolved[0] if resolved else "AUROC"


def unresolved_note(frame: pd.DataFrame, measure: str) -> str | None:
    """Why a TPR is missing, as the Detect page says it: too few negatives for its FPR."""
    if not measure.startswith("TPR"):
        return None
    return roc.unresolved_fpr_warning(dict(zip(frame.run, frame.negative_texts)))


def strength_curves(frame: pd.DataFrame, attack: str, measure: str) -> pd.DataFrame:
    """For one attack: the measure against its strength, one series per run (other parameters at their values)."""
    strength = ATTACKS[attack].strength
    own = frame[frame.attack == attack]
    return pd.DataFrame({"run": own.run, "strength": [params.get(strength) for params in own.params],
                         "value": pd.to_numeric(own[MEASURES[measure]], errors="coerce")}).dropna().sort_values(
        ["run", "strength"])
