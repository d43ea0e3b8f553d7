"""Disease entities a watermarked text introduced or hallucinated, per sample and per run (the paper's
Table 7), and clinicians' verdicts on them. Recognition itself is the recognizers' (`recognizers/`); the table per run,
with runs named side by side, is `fwsapp.results.entity_table`.

Introduced: an entity of a generated text whose concept (its MeSH heading where the name has one, so that
synonyms match) is not among its reference's.
Unsupported by the reference ("hallucinated" in the paper): an introduced entity whose contextual
embedding has cosine similarity below a threshold (0.6 by default) to every reference entity. It means
far from everything the reference says, not necessarily wrong: clinicians' verdicts tell the two apart.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fwsapp.data.tasks import task_label
from fwsapp.sample_size import enough
from fwsapp.store import generated_here
from fwsapp.entities.recognizers.base import Entity, mesh_branch, mesh_heading

HALLUCINATION_THRESHOLD = 0.6


@dataclass
class IntroducedEntity:
    entity: Entity
    closest_reference: str | None
    similarity: float
    hallucinated: bool


@dataclass
class SampleEntities:
    reference: list[Entity]
    generated: list[Entity]
    introduced: list[IntroducedEntity] = field(default_factory=list)

    @property
    def hallucinated(self) -> list[IntroducedEntity]:
        return [item for item in self.introduced if item.hallucinated]

    @property
    def support(self) -> float:
        """Share of the text's disease mentions the reference supports; 1.0 when it mentions none."""
        if not self.generated:
            return 1.0
        return 1.0 - len(self.hallucinated) / len(self.generated)


def introduced_entities(generated: list[Entity], reference: list[Entity]) -> list[Entity]:
    known = {mesh_heading(entity.normalized) for entity in reference}
    return [entity for entity in generated if mesh_heading(entity.normalized) not in known]


def with_mesh_headings(entities: pd.DataFrame) -> pd.DataFrame:
    """Stored entity rows with each name's MeSH heading and branch; an entity stored as introduced whose
    heading its reference names (a synonym, analysed before headings were compared) is not introduced."""
    if entities.empty:
        return entities.assign(heading=pd.Series(dtype=str), branch=pd.Series(dtype=str))
    names = entities.normalized.unique()
    headings = dict(zip(names, map(mesh_heading, names)))
    branches = dict(zip(names, map(mesh_branch, names)))
    rows = entities.assign(heading=entities.normalized.map(headings), branch=entities.normalized.map(branches))
    reference = rows[rows.text_kind == "reference"]
    named = set(zip(reference.run_id, reference.sample_idx, reference.config, reference.heading))
    synonym = rows.introduced & pd.Series([key in named for key in zip(rows.run_id, rows.sample_idx, rows.config, rows.heading)],
                                          index=rows.index)
    rows.loc[synonym, ["introduced", "hallucinated"]] = False
    return rows


def judge_introduced(
    introduced: list[Entity],
    introduced_vectors: np.ndarray,
    reference: list[Entity],
    reference_vectors: np.ndarray,
    threshold: float = HALLUCINATION_THRESHOLD,
) -> list[IntroducedEntity]:
    """Mark each introduced entity hallucinated when no reference entity is at least `threshold` similar."""
    results = []
    for entity, vector in zip(introduced, introduced_vectors):
        if len(reference):
            similarities = reference_vectors @ vector
            best = int(np.argmax(similarities))
            closest, similarity = reference[best].text, float(similarities[best])
        else:
            closest, similarity = None, 0.0
        results.append(IntroducedEntity(entity, closest, similarity, similarity < threshold))
    return results


def analyze_pair(
    reference_text: str,
    generated_text: str,
    reference: list[Entity],
    generated: list[Entity],
    encoder,
    threshold: float = HALLUCINATION_THRESHOLD,
) -> SampleEntities:
    """Introduced and hallucinated entities of one generated text against its reference."""
    return analyze_pairs([reference_text], [generated_text], [reference], [generated], encoder, threshold)[0]


def analyze_pairs(reference_texts, generated_texts, references, generated, encoder,
                  threshold: float = HALLUCINATION_THRESHOLD) -> list[SampleEntities]:
    """`analyze_pair` for many pairs, embedding each distinct text's entities once, in batches."""
    introduced = [introduced_entities(found, reference) for found, reference in zip(generated, references)]
    # Reference entities matter only where something was introduced; embed each reference text once.
    needed = {text: entities for text, entities, new in zip(reference_texts, references, introduced) if new}
    reference_keys = list(needed)
    texts = reference_keys + list(generated_texts)
    spans = [[(e.start, e.end) for e in needed[text]] for text in reference_keys] + [
        [(e.start, e.end) for e in new] for new in introduced]
    vectors = encoder.span_embeddings_many(texts, spans) if any(spans) else [np.zeros((0, 1))] * len(texts)
    reference_vectors = dict(zip(reference_keys, vectors[: len(reference_keys)]))
    results = []
    for position, (reference_text, reference, found, new) in enumerate(zip(reference_texts, references, generated, introduced)):
        judged = judge_introduced(new, vectors[len(reference_keys) + position], reference,
                                  reference_vectors.get(reference_text, np.zeros((0, 1))), threshold) if new else []
        results.append(SampleEntities(reference, found, judged))
    return results


# -- per-run analysis -------------------------------------------------------------------------------

TEXT_KINDS = ("reference", "unwatermarked", "watermarked")


def analysis_config(recognizer_name: str, encoder_name: str, threshold: float) -> str:
    return f"{recognizer_name};{encoder_name};sim<{threshold}"


def stored_support(store, run_id: str, config: str, kinds) -> dict[tuple[int, str], float]:
    """Per (sample, text kind) of `kinds`, of each sample `analyze_run` analysed under `config`, the text's disease-entity
    support (`SampleEntities.support`) from the entities it stored: the share of its mentions it did not call
    unsupported, 1.0 where it found none."""
    analysed = store.entity_analyses([run_id])
    entities = store.entities([run_id])
    entities = entities[(entities.config == config) & entities.text_kind.isin(kinds)]
    counts = entities.groupby(["sample_idx", "text_kind"]).hallucinated.agg(["sum", "count"])
    unsupported = {key: row["sum"] / row["count"] for key, row in counts.iterrows()}
    return {(int(sample), kind): 1.0 - unsupported.get((sample, kind), 0.0)
            for sample in analysed[analysed.config == config].sample_idx for kind in kinds}


def recognizer_of(config: str) -> str:
    """The recognizer label an analysis config records."""
    return config.split(";", 1)[0]


def one_recognizer(entities: pd.DataFrame, analyses: pd.DataFrame, preferred: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Entity rows and analyses with one analysis config per run, so no figure pools two recognizers (or
    thresholds): the `preferred` recognizer's where the run has one, else the run's first config by name."""
    if analyses.empty:
        return entities, analyses
    configs = analyses[["run_id", "config"]].drop_duplicates()
    ranked = configs.assign(other=configs.config.map(recognizer_of) != preferred).sort_values(["run_id", "other", "config"])
    first = ranked.drop_duplicates("run_id")
    chosen = set(zip(first.run_id, first.config))

    def keep(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[[key in chosen for key in zip(frame.run_id, frame.config)]] if not frame.empty else frame

    return keep(entities), keep(analyses)


def analysed_entities(store) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The stored entity rows (with MeSH headings) and analyses that figures show: one recognizer per run,
    the default one where a run was analysed with it."""
    from fwsapp.entities.recognizers import recognizer_label

    return one_recognizer(with_mesh_headings(store.entities()), store.entity_analyses(), recognizer_label())


def _covered(spans, start: int, end: int) -> list[int]:
    return [index for index, (token_start, token_end) in enumerate(spans) if token_start < end and token_end > start]


def _token_info(store, run: dict, row, tokenizer, entropy_model: str | None) -> dict[str, tuple[list, list]]:
    """Per text kind: (token character spans, token entropies), where known; the teacher-forced ones under
    `entropy_model` alone, so no sample reads its reference under one model and its answer under another."""
    info = {}
    for kind, spans, entropy in store.sample_entropies(run["run_id"], int(row.sample_idx), entropy_model) \
            if entropy_model else ():
        info[kind] = ([tuple(span) for span in spans], list(entropy))
    if generated_here(run) and tokenizer is not None:  # else the teacher-forced ones: a server records none
        from fwsapp.entities.entropy import token_spans

        for kind in ("unwatermarked", "watermarked"):
            ids = getattr(row, f"{kind}_ids")
            if ids is not None and hasattr(ids, "__len__"):
                info[kind] = (token_spans(tokenizer, [int(i) for i in ids]), list(getattr(row, f"{kind}_entropy")))
    return info


def analyze_run(store, run_id: str, recognizer, encoder, tokenizer=None,
                threshold: float = HALLUCINATION_THRESHOLD, progress=None, entropy_model: str | None = None) -> int:
    """Find the disease entities of every text of a run, mark introduced and hallucinated ones, map them
    to tokens and their entropy (teacher-forced under `entropy_model`, else under the model the Entropy page reads
    the run under: `read_entropy_model`), and store them; samples already analysed are skipped."""
    from fwsapp.entities.entropy import read_entropy_model

    run = store.run(run_id)
    entropy_model = entropy_model or read_entropy_model(store, run_id)
    config = analysis_config(recognizer.backend, encoder.name, threshold)
    done = store.analysed_samples(run_id, config)
    samples = [row for row in store.generations(run_id).itertuples() if int(row.sample_idx) not in done]
    for position, row in enumerate(samples, start=1):
        texts = {kind: (row.reference if kind == "reference" else getattr(row, f"{kind}_text")) for kind in TEXT_KINDS}
        texts = {kind: text for kind, text in texts.items() if isinstance(text, str)}
        found = dict(zip(texts, recognizer.find_many(list(texts.values()))))
        tokens = _token_info(store, run, row, tokenizer, entropy_model)
        generated_kinds = [kind for kind in ("unwatermarked", "watermarked") if kind in texts]
        pairs = dict(zip(generated_kinds, analyze_pairs(
            [texts["reference"]] * len(generated_kinds), [texts[kind] for kind in generated_kinds],
            [found["reference"]] * len(generated_kinds), [found[kind] for kind in generated_kinds], encoder, threshold)))
        entity_rows = []
        analysis = {"sample_idx": int(row.sample_idx), "config": config}
        for kind in TEXT_KINDS:
            spans, entropy = tokens.get(kind, ([], []))
            analysis[f"{kind}_tokens"] = len(spans) if kind in tokens else None
            if kind not in texts:
                continue
            verdicts = {item.entity.start: item for item in pairs[kind].introduced} if kind in pairs else {}
            for entity in found[kind]:
                covered = _covered(spans, entity.start, entity.end)
                values = [entropy[i] for i in covered if i < len(entropy) and entropy[i] is not None and np.isfinite(entropy[i])]
                verdict = verdicts.get(entity.start)
                entity_rows.append({
                    "sample_idx": int(row.sample_idx), "text_kind": kind, "config": config,
                    "start_char": entity.start, "end_char": entity.end, "entity": entity.text,
                    "normalized": entity.normalized, "introduced": verdict is not None,
                    "hallucinated": bool(verdict and verdict.hallucinated),
                    "closest_reference": verdict.closest_reference if verdict else None,
                    "similarity": verdict.similarity if verdict else None,
                    "token_indices": covered, "entropy": float(np.mean(values)) if values else None,
                })
        store.write_entity_analysis(run_id, entity_rows, analysis)
        if progress:
            progress(position, len(samples))
    return len(samples)


# -- clinicians' verdicts ----------------------------------------------------------------------------

# A clinician's verdict on an introduced entity, and what each says about the automatic rule.
VERDICTS = {
    "correct": "Correct, as the reference says",
    "correct_not_in_reference": "Correct, not in the reference",
    "hallucinated": "Wrong (hallucinated)",
    "not_a_disease": "Not a disease",
}


def rater_name(rater: str | None) -> str:
    """The name verdicts are filed under: surrounding and repeated spaces do not make another rater."""
    return " ".join((rater or "").split())


def filed_rater(rater: str) -> str:
    """The rater's name as verdicts are filed under it; an error where none was entered."""
    if not (name := rater_name(rater)):
        raise ValueError("Enter your name first: verdicts are stored per clinician.")
    return name


@dataclass(frozen=True)
class NameToJudge:
    """An introduced name as a clinician judges it: every mention of one MeSH heading in one text shares a verdict."""

    text_kind: str
    heading: str
    shown: str  # the first mention's words
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    unsupported: int  # mentions the automatic rule calls unsupported by the reference
    similarity: float  # the lowest similarity of a mention to the reference's entities
    reference_names_one: bool = True  # False: the reference names no disease, so there was nothing to compare with

    def rule(self) -> str:
        """What the automatic rule said of this name, in words: with its similarity, or why it has none."""
        if not self.reference_names_one:
            return "unsupported: the reference names no disease"
        said = (f"{self.unsupported} of {len(self.starts)} unsupported by the reference" if len(self.starts) > 1 else
                "unsupported by the reference" if self.unsupported else "close to a reference entity")
        return f"{said} (lowest similarity {self.similarity:.2f})"


def names_to_judge(introduced: pd.DataFrame, text_kind: str) -> list[NameToJudge]:
    """One text's introduced entities (rows with a heading, `with_mesh_headings`), one per name, in reading order."""
    mentions = introduced[(introduced.text_kind == text_kind) & introduced.introduced].sort_values("start_char")
    return [NameToJudge(text_kind, heading, group.entity.iloc[0], tuple(map(int, group.start_char)),
                        tuple(map(int, group.end_char)), int(group.hallucinated.sum()), float(group.similarity.min()),
                        bool(group.closest_reference.notna().any()))
            for heading, group in mentions.groupby("heading", sort=False)]


def record_verdict(store, rater: str, run_id: str, sample_idx: int, name: NameToJudge, verdict: str) -> None:
    """A clinician's verdict on a name, filed for each of its mentions; a later verdict by the same rater replaces it."""
    if verdict not in VERDICTS:
        raise ValueError(f"A verdict is one of {', '.join(VERDICTS)}.")
    store.record_entity_verdicts(run_id, sample_idx, name.text_kind, list(name.starts), filed_rater(rater), verdict)


def undo_verdict(store, rater: str, run_id: str, sample_idx: int, name: NameToJudge) -> None:
    store.delete_entity_verdicts(run_id, sample_idx, name.text_kind, list(name.starts), filed_rater(rater))


def rater_verdicts(store, rater: str, run_id: str, sample_idx: int) -> dict[tuple[str, int], str]:
    """What this rater recorded on a sample's entities: (text kind, start) -> verdict."""
    name = rater_name(rater)
    if not name:
        return {}
    rows = store.rater_entity_verdicts(name, run_id, sample_idx)
    return {(kind, int(start)): verdict for kind, start, verdict in zip(rows.text_kind, rows.start_char, rows.verdict)}


def name_verdict(recorded: dict[tuple[str, int], str], name: NameToJudge) -> str | None:
    """The verdict a rater gave a name: the one all its mentions share, else none (mentions judged apart differ)."""
    verdicts = {recorded.get((name.text_kind, start)) for start in name.starts}
    return verdicts.pop() if len(verdicts) == 1 else None


def reviewed_samples(store, rater: str, entities: pd.DataFrame) -> tuple[int, int]:
    """(samples whose every introduced mention has this rater's verdict, samples with an introduced mention)."""
    introduced = entities[entities.introduced & entities.text_kind.isin(["watermarked", "unwatermarked"])]
    keys = ["run_id", "sample_idx", "text_kind", "start_char"]
    name = rater_name(rater)
    judged = store.rater_entity_verdicts(name)[keys].assign(judged=True) if name else pd.DataFrame(columns=[*keys, "judged"])
    marked = introduced[keys].merge(judged.astype({"sample_idx": "int64", "start_char": "int64"}), on=keys, how="left")
    per_sample = marked.judged.notna().groupby([marked.run_id, marked.sample_idx]).all()
    return int(per_sample.sum()), len(per_sample)


def verdict_agreement(store):
    """Clinicians' verdicts against the automatic rule, counted as clinicians give them: one per name (a MeSH
    heading in one text, by one rater), however many mentions it has and whichever recognizers analysed the text.
    The rule calls a name unsupported when it calls any of its mentions so. Returns the confusion counts and the
    precision (and recall) of 'similarity below the threshold means unsupported'. 'Not a disease' is a
    recognition error: counted in the table, left out of precision and recall."""
    joined = name_verdicts(store)
    if joined.empty:
        return joined, {}
    counts = pd.crosstab(joined.hallucinated.astype(bool).map({True: "rule: unsupported", False: "rule: supported"}),
                         joined.verdict.map(VERDICTS).rename("clinician"))
    judged = joined[joined.verdict != "not_a_disease"]
    clinician = judged.verdict.eq("hallucinated")
    automatic = judged.hallucinated.astype(bool)
    flagged = automatic.sum()
    # Below sample_size's minimum the rate is None, and the page says "not enough data (n = …)" with these counts.
    stats = {
        "verdicts": int(len(joined)), "flagged": int(flagged), "clinician_wrong": int(clinician.sum()),
        "precision": float((automatic & clinician).sum() / flagged) if enough("precision", flagged) else None,
        "recall": float((automatic & clinician).sum() / clinician.sum()) if enough("precision", clinician.sum()) else None,
    }
    return counts, stats


def name_verdicts(store) -> pd.DataFrame:
    """One row per clinician's verdict on a name: rater, run, sample, text kind, heading, the verdict, and whether
    the automatic rule calls the name unsupported. Mentions are read under the recognizer the figures show."""
    verdicts = store.entity_verdicts()
    keys = ["rater", "run_id", "sample_idx", "text_kind", "heading"]
    if verdicts.empty:
        return pd.DataFrame(columns=[*keys, "verdict", "hallucinated", "entity"])
    shown, _ = analysed_entities(store)
    mentions = verdicts.drop(columns="hallucinated").merge(
        shown[["run_id", "sample_idx", "text_kind", "start_char", "config", "heading", "hallucinated"]],
        on=["run_id", "sample_idx", "text_kind", "start_char", "config"])
    return mentions.groupby(keys, as_index=False).agg(verdict=("verdict", "first"), hallucinated=("hallucinated", "any"),
                                                      entity=("entity", "first"))


# -- browsing -----------------------------------------------------------------------------------------

def samples_by_hallucination(entities: pd.DataFrame, analyses: pd.DataFrame) -> pd.DataFrame:
    """The analysed samples, most hallucinated entities first, with their counts. Samples whose reference names no
    disease come after the rest: every name they introduce is unsupported for want of a comparison, not by one."""
    # A sample's reference names a disease when a reference mention is listed, or an introduced one was compared
    # with one (filters may have hidden the reference's own rows).
    compared = entities.text_kind.eq("reference") | entities.get("closest_reference", pd.Series(None, index=entities.index)).notna()
    counts = (entities.assign(compared=compared)
              .groupby(["run_id", "sample_idx"])
              .agg(hallucinated=("hallucinated", "sum"), introduced=("introduced", "sum"), entities=("entity", "size"),
                   reference_names_one=("compared", "any"))
              .reset_index())
    table = analyses[["run_id", "sample_idx", "method", "task"]].merge(counts, on=["run_id", "sample_idx"], how="left")
    if entities.empty or table.empty:
        return table.iloc[0:0]
    table = table.dropna(subset=["entities"]).fillna(0).astype({"reference_names_one": bool})
    return table.sort_values(["reference_names_one", "hallucinated", "introduced"], ascending=False).reset_index(drop=True)


def entity_sample_label(row) -> str:
    sample = f"{row.method} · {task_label(row.task)} · sample {int(row.sample_idx)}"
    if not getattr(row, "reference_names_one", True):
        return f"{sample} · {int(row.introduced)} introduced; the reference names no disease"
    return f"{sample} · {int(row.hallucinated)} unsupported, {int(row.introduced)} introduced"
