"""Re-detection: score a stored run's texts again, under any method, parameters and tokenizer.

This is how texts watermarked elsewhere are checked: the paper's logs, or MarkLLM output from a GPU. Each
text is scored as MarkLLM's detection scores it: alone (no prompt as context), encoded without special
tokens. Watermarked and unwatermarked texts are the generated part with single spaces, the words of the
prompt already dropped (the paper's `text.split()[len(prompt.split()):]`); the reference is scored as it is.
A text with fewer than two tokens is stored with no score, as MarkLLM skips it.

Scores form a detection set keyed by the run, the method, its full parameters and the tokenizer, and where
given the attack set whose texts it scores (the attacked watermarked texts alone: the negatives stay the run's
own, scored in the clean set) and the normaliser applied before tokenising. Stored scores are never overwritten,
and texts already scored in a set are not scored again.
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import pandas as pd

from fwsapp.detection import roc, length
from fwsapp.detection.deduplication import DEDUPLICATED, deduplicated, deduplication_problem
from fwsapp.detection.verdicts import (
    MinimumLength,
    configuration_evidence,
    evidence_record,
    verdict_fields,
    verdict_method,
)
from fwsapp.store import TEXT_COLUMNS, Store, detection_record
from fwsapp.models.tokenizers import TextTokenizer
from fwsapp.watermark import methods

CSV_COLUMNS = ["sample_idx", "text", "score", "num_tokens_scored"]
WRITE_EVERY = 50  # texts per transaction: a killed job keeps what it scored
# Scored alone, a text's first token only seeds the green list, so it needs a second to be scored at all.


def scored_texts(generations: pd.DataFrame) -> Iterator[tuple[int, str, str]]:
    """(sample index, text kind, text as MarkLLM scored it) for every stored text of a run."""
    for row in generations.itertuples():
        for kind, column in TEXT_COLUMNS.items():
            text = getattr(row, column)
            if isinstance(text, str):
                yield int(row.sample_idx), kind, text if kind == "reference" else " ".join(text.split())


def detection_set_id(run_id: str, method: str, params: dict, tokenizer: str, attack_set: str | None = None,
                     normalize: str | None = None, window: int | None = None, deduplicate: bool = False) -> str:
    identity = {"run": run_id, "method": method, "params": params, "tokenizer": tokenizer}
    identity.update({key: value for key, value in (("attack", attack_set), ("normalize", normalize),
                                                    ("window", window), ("deduplicate", deduplicate)) if value})
    return "det-" + hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:10]


def attacked_texts(store: Store, attack_set: str) -> list[tuple[int, str, str]]:
    """(sample index, "watermarked", attacked text) for each text of an attack set."""
    return [(int(row.sample_idx), "watermarked", row.text) for row in store.attacked_texts([attack_set]).itertuples()]


def redetect(
    store: Store,
    run_id: str,
    method: str,
    params: dict,
    tokenizer: TextTokenizer,
    lm=None,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
    attack_set: str | None = None,
    normalize: str | None = None,
    by_length: bool = False,
    window: int | None = None,
    deduplicate: bool = False,
) -> str:
    """Score every stored text of a run (or of its attack set) under `method`, each normalised first where
    `normalize` names a normaliser; returns the detection set's id. Each text's statistic after every token is kept
    where the method's evidence gives it in the same pass; `by_length` also detects the prefixes of LENGTH_GRID again
    for a method without such evidence, and gives texts scored before curves were kept theirs. With `window`, a text's
    score is its best window of that many tokens (WinMax), p its p-value against unwatermarked text of its length."""
    from fwsapp.detection.normalizers import normalizer
    from fwsapp.watermark.factory import create

    method = verdict_method(method).name
    # The run's own fit (k-SemStamp's clusters) where it is detected under its own method.
    fitted = store.run_fit(run_id) if store.run(run_id)["method"] == method else None
    watermark = create(method, tokenizer.vocab_size, params, lm=lm, tokenizer=tokenizer, fitted=fitted)  # checks parameters
    if window is not None:
        length.check_window(method, window)
    if deduplicate and (problem := deduplication_problem(method)):
        raise ValueError(problem)
    prepare = normalizer(normalize)
    set_id = detection_set_id(run_id, method, watermark.recorded_params, tokenizer.name, attack_set, normalize, window,
                              deduplicate)
    store.ensure_detection_set(set_id, run_id, method, watermark.recorded_params, tokenizer.name, watermark.score_direction,
                               attack_set, normalize, window, deduplicate)
    stored = store.redetections([set_id], curves=True)
    done = {(row.sample_idx, row.text_kind) for row in stored.itertuples()}
    # Scored before curves (or evidence records) were kept, or by a method whose curve needs its prefixes detected
    # again (NULL reads as None or NA).
    curveless = {(row.sample_idx, row.text_kind) for row in stored.itertuples()
                 if not hasattr(row.prefix_statistics, "__len__") and pd.notna(row.score)} if by_length and window is None else set()
    evidenceless = {(row.sample_idx, row.text_kind) for row in stored.itertuples()
                    if not isinstance(row.evidence, str) and pd.notna(row.score)} if window is None else set()
    again = curveless | evidenceless
    source = attacked_texts(store, attack_set) if attack_set else scored_texts(store.generations(run_id))
    texts = [(sample_idx, kind, prepare(text)) for sample_idx, kind, text in source
             if (sample_idx, kind) not in done or (sample_idx, kind) in again]
    total = len(done) - len(again) + len(texts)
    evidence = Evidence(tokenizer.name, MinimumLength.of_run(store, run_id, method, watermark.recorded_params))
    if progress:
        progress(total - len(texts), total)
    for start in range(0, len(texts), WRITE_EVERY):
        if cancel is not None and cancel.is_set():
            break
        chunk = [(sample_idx, kind, tokenizer.encode(text)) for sample_idx, kind, text in texts[start:start + WRITE_EVERY]]
        scorable = [token_ids for _, _, token_ids in chunk if len(token_ids) >= length.MIN_TOKENS]
        found = iter(_scored(watermark, scorable, by_length, window, deduplicate, evidence))
        rows = [next(found) | {"sample_idx": sample_idx, "text_kind": kind} if len(token_ids) >= length.MIN_TOKENS
                else length.unscorable_record(sample_idx, kind, method)
                for sample_idx, kind, token_ids in chunk]
        new = [row for row in rows if (row["sample_idx"], row["text_kind"]) not in done]
        if new:
            store.write_redetections(set_id, run_id, new)
        for column, missing in (("prefix_statistics", curveless), ("evidence", evidenceless)):
            store.complete_redetections(set_id, [row for row in rows if (row["sample_idx"], row["text_kind"]) in missing],
                                        column)
        if progress:
            progress(total - len(texts) + start + len(chunk), total)
    return set_id


@dataclass(frozen=True)
class Evidence:
    """What an evidence record needs beside the detection: the tokenizer's name and the minimum length its verdict
    is read against."""

    tokenizer: str
    minimum: MinimumLength | None = None  # None: the method's uncalibrated one


def _scored(watermark, texts: list[list[int]], by_length: bool, window: int | None,
            deduplicate: bool = False, evidence: Evidence | None = None) -> list[dict]:
    """Detection records (sample and kind left to fill) of texts scored alone: whole, by window, or with the statistics
    of their LENGTH_GRID prefixes (a p for these methods) where the method has no per-token evidence and `by_length`
    asks for them; with `deduplicate`, each (context, token) pair once. A whole text's record carries its evidence
    record (JSON) where `evidence` is given; a window's verdict is WinMax's, which no evidence record describes."""
    method, params = watermark.name, watermark.params
    found = watermark.detect_many([(token_ids, ()) for token_ids in texts])
    if deduplicate:
        found = [deduplicated(watermark, result, token_ids) for result, token_ids in zip(found, texts)]
    if window is not None:
        best = [length.winmax(method, params, result, window) for result in found]
        return [detection_record(0, "", method, wm.score, z=wm.score if watermark.info.score_label == "z" else None,
                                 p=wm.p, num_tokens_scored=result.num_tokens_scored) for wm, result in zip(best, found)]
    records = [length.detected_record(0, "", method, result, params) for result in found]
    if evidence is not None:
        minimum = evidence.minimum or MinimumLength.uncalibrated(watermark.info, params)
        configuration = configuration_evidence(watermark.info, watermark.recorded_params, evidence.tokenizer,
                                               minimum, DEDUPLICATED if deduplicate else None)
        for record, result, token_ids in zip(records, found, texts):
            verdict = verdict_fields(watermark, result, minimum)
            record["evidence"] = json.dumps(evidence_record(configuration, token_ids, verdict))
    if by_length and not watermark.info.evidence:
        prefixes = [(token_ids, size) for token_ids in texts for size in length.grid_lengths(len(token_ids))]
        scores = iter(result.score for result in watermark.detect_many([(token_ids[:size], ()) for token_ids, size in prefixes]))
        for record, token_ids in zip(records, texts):
            at = {size: next(scores) for size in length.grid_lengths(len(token_ids))}
            record["prefix_statistics"] = length.grid_curve({**at, len(token_ids): record["score"]}, len(token_ids))
    return records


def set_scores(store: Store, set_id: str) -> pd.DataFrame:
    """A set's scores as the CSV export has them: sample_idx, text, score, num_tokens_scored."""
    scores = store.redetections([set_id]).rename(columns={"text_kind": "text"})
    return scores[CSV_COLUMNS]


def set_evidence(store: Store, set_id: str) -> list[dict]:
    """A set's evidence records, one per scored text: run, sample, kind and the record (`detect --evidence`)."""
    scores = store.redetections([set_id])
    return [{"run_id": row.run_id, "sample_idx": int(row.sample_idx), "text_kind": row.text_kind,
             "evidence": json.loads(row.evidence)} for row in scores.itertuples() if isinstance(row.evidence, str)]


def run_evidence(store: Store, run_id: str) -> pd.DataFrame:
    """Per sample, each text's evidence record (JSON) under the run's own method and parameters (`evidence_<kind>`
    columns), from its newest plain detection set: no attack, normaliser, window or deduplication. None where the run
    has no such set yet (`detect --evidence` makes one)."""
    run = store.run(run_id)
    sets = store.detection_sets([run_id])
    plain = sets[(sets.method == run["method"]) & sets.normalize.isna() & sets.window_tokens.isna()
                 & ~sets.deduplicate.astype(bool) & sets.params.map(lambda params: json.loads(params) == run["params"])]
    columns = [f"evidence_{kind}" for kind in TEXT_COLUMNS]
    if plain.empty:
        return pd.DataFrame(columns=["sample_idx", *columns])
    records = store.redetections([plain.set_id.iloc[-1]])
    wide = records.pivot(index="sample_idx", columns="text_kind", values="evidence")
    wide.columns = [f"evidence_{kind}" for kind in wide.columns]
    return wide.reindex(columns=columns).reset_index()


def set_summaries(store: Store, run_ids: list[str] | None = None) -> dict[str, list[dict]]:
    """Per run, each detection set's detectability, its agreement with the run's own stored scores, and whether it
    scored under the run's own method and parameters (`run_settings`)."""
    sets = store.detection_sets(run_ids)
    if sets.empty:
        return {}
    scores = store.redetections(list(sets.set_id))
    runs = store.runs().set_index("run_id")
    stored = store.detections(list(sets.run_id.unique()))
    summaries: dict[str, list[dict]] = {}
    for entry in sets.itertuples():
        own = scores[scores.set_id == entry.set_id]
        negative = roc.negative_kind(set(stored.loc[stored.run_id == entry.run_id, "text_kind"]), entry.method)
        positives = own.loc[own.text_kind == "watermarked", "score"].dropna()
        negatives = own.loc[own.text_kind == negative, "score"].dropna()
        block = roc.summary(positives, negatives, entry.score_direction) if len(positives) and len(negatives) else None
        summaries.setdefault(entry.run_id, []).append({
            "set_id": entry.set_id, "method": entry.method, "params": json.loads(entry.params),
            "tokenizer": entry.tokenizer, "negatives": negative, "texts_scored": int(own.score.notna().sum()),
            "deduplicate": bool(entry.deduplicate),
            "window_tokens": None if pd.isna(entry.window_tokens) else int(entry.window_tokens),
            "normalize": entry.normalize if isinstance(entry.normalize, str) else None,
            "auroc": block["auroc"] if block else None, "tpr_at_fpr": block["tpr_at_fpr"] if block else None,
            "n": block["n"] if block else None,
            "agreement": agreement(own, stored[(stored.run_id == entry.run_id) & (stored.detector == entry.method)])
            if bool(runs.loc[entry.run_id, "imported"]) else None,
            "run_settings": entry.method == runs.loc[entry.run_id, "method"] and json.loads(entry.params)
            == methods.info(entry.method).checked_params(json.loads(runs.loc[entry.run_id, "params"])),
        })
    return summaries


# A stored score counts as reproduced within these bounds: a log that wrote its scores to four significant digits
# still agrees, while other green lists (another generator, key or tokenizer) move a z-score by whole units.
REPRODUCED_WITHIN = {"rtol": 1e-4, "atol": 1e-6}
NOT_REPRODUCED_HINT = ("the log was scored under other settings than the run's (another generator, key or tokenizer: "
                       "docs/methods.md, \"Checking texts from MarkLLM or the paper\"); find them with detect --param "
                       "and --tokenizer, then import the log again with those --param, so that attacks and every later "
                       "stage read them")


def agreement(scores: pd.DataFrame, stored: pd.DataFrame) -> dict | None:
    """How closely a set reproduces stored scores of the same texts: pairs compared, the largest gap and how many pairs
    differ beyond `REPRODUCED_WITHIN`."""
    if stored.empty:
        return None
    merged = scores.merge(stored, on=["sample_idx", "text_kind"], suffixes=("", "_stored")).dropna(
        subset=["score", "score_stored"])
    if merged.empty:
        return {"n": 0, "max_abs_diff": None, "differing": 0}
    close = np.isclose(merged.score, merged.score_stored, **REPRODUCED_WITHIN)
    return {"n": int(len(merged)), "max_abs_diff": float(np.max(np.abs(merged.score - merged.score_stored))),
            "differing": int((~close).sum())}


def not_reproduced(summaries: dict[str, list[dict]]) -> dict[str, dict]:
    """Per imported run, the agreement of a detection set under the run's own settings that does not reproduce its
    stored scores (`set_summaries`): the run's settings are not the log's."""
    return {run_id: entry["agreement"] for run_id, sets in summaries.items() for entry in sets
            if entry["run_settings"] and entry["agreement"] and entry["agreement"]["differing"]}


def reproduction(agreement: dict) -> str:
    """How a detection set's scores compare with the imported ones, in words: 'the imported scores of 400 texts
    reproduced exactly', or 'the imported scores NOT reproduced: 395 of 399 texts differ, by up to 4.1'."""
    gap, n = agreement["max_abs_diff"], agreement["n"]
    if not n:
        return "no imported score to compare with"
    if not agreement.get("differing"):
        return f"the imported scores of {n} texts reproduced " + ("exactly" if gap == 0 else f"within {gap:.2g}")
    return f"the imported scores NOT reproduced: {agreement['differing']} of {n} texts differ, by up to {gap:.2g}"
