"""One sample's clinical facts for review: the facts of its watermarked and unwatermarked answers and its reference,
what changed between them (each answer against the reference, and the watermarked against the unwatermarked one, by
concept), and clinicians' verdicts on each fact, the disease verdict rule extended to every kind."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from fwsapp.entities.changes import BY_CONCEPT, Change, changes, corruptions
from fwsapp.entities.facts import Fact, FactFinder
from fwsapp.entities.introduced import filed_rater, rater_name

TEXT_KINDS = ("watermarked", "unwatermarked", "reference")
# The comparisons shown, as (text, against).
COMPARISONS = (("watermarked", "unwatermarked"), ("watermarked", "reference"), ("unwatermarked", "reference"))
# A verdict on a fact; "not_this_kind" reads "Not a drug", "Not a dose"… on the page.
FACT_VERDICTS = {
    "correct": "Correct, as the reference says",
    "correct_not_in_reference": "Correct, not in the reference",
    "wrong": "Wrong",
    "not_this_kind": "Not a {kind}",
}


@dataclass(frozen=True)
class SampleFacts:
    texts: dict[str, str]  # text kind -> its text ("" where the sample has none)
    facts: dict[str, list[Fact]]
    changes: dict[tuple[str, str], list[Change]]  # (text, against) -> the text's changes against the other

    def changed_spans(self, text_kind: str) -> dict[tuple[int, int], list[tuple[str, Change]]]:
        """Each changed span of a text, with the text kinds it changed against and the change."""
        marked: dict[tuple[int, int], list[tuple[str, Change]]] = {}
        for (text, against), found in self.changes.items():
            if text == text_kind:
                for change in found:
                    marked.setdefault((change.start, change.end), []).append((against, change))
        return marked


def samples_facts(samples: list[dict[str, str | None]], finder: FactFinder | None = None) -> list[SampleFacts]:
    """The facts of each sample's three texts and their changes (by concept: the answers were written
    independently), every text found in one call of the recognizers."""
    samples = [{kind: text if isinstance(text, str) else "" for kind, text in texts.items()} for texts in samples]
    kinds = [[kind for kind in TEXT_KINDS if kind in texts] for texts in samples]
    found = iter((finder or FactFinder()).find_many([texts[kind] for texts, own in zip(samples, kinds) for kind in own]))
    return [_compared(texts, {kind: next(found) for kind in own}) for texts, own in zip(samples, kinds)]


def sample_facts(texts: dict[str, str | None], finder: FactFinder | None = None) -> SampleFacts:
    """One sample's `samples_facts`."""
    return samples_facts([texts], finder)[0]


def stored_sample_facts(store, run_id: str, sample_idx: int, texts: dict[str, str | None],
                        config: str) -> SampleFacts | None:
    """One sample's `sample_facts` as `analyze` stored them under `config` (`fact_analysis`): read, not found again
    (no recognizer loads), and the very facts the run's analysis holds. None where the sample was not analysed so."""
    rows = store.sample_fact_rows(run_id, sample_idx, config)
    if rows is None:
        return None
    fact_rows, change_rows = rows
    texts = {kind: text if isinstance(text, str) else "" for kind, text in texts.items()}
    facts = {kind: [Fact(row.kind, int(row.start_char), int(row.end_char), row.text, row.value, row.assertion)
                    for row in fact_rows[fact_rows.text_kind == kind].itertuples()] for kind in texts}
    changed = {(text, against): [] for text, against in COMPARISONS if texts.get(text)}
    for row in change_rows.itertuples():
        changed[(row.text_kind, row.against)].append(Change(row.kind, int(row.start_char), int(row.end_char), row.was,
                                                            row.now))
    return SampleFacts(texts, facts, changed)


def _compared(texts: dict[str, str], found: dict[str, list[Fact]]) -> SampleFacts:
    changed = {}
    for text, against in COMPARISONS:
        if texts.get(text) and texts.get(against):
            changed[(text, against)] = changes(texts[text], found[text], texts[against], found[against], by=BY_CONCEPT)
        elif texts.get(text):
            changed[(text, against)] = corruptions(texts[text])
    return SampleFacts(texts, found, changed)


def verdict_label(verdict: str, kind: str) -> str:
    from fwsapp.entities.recognizers import KINDS

    return FACT_VERDICTS[verdict].format(kind=KINDS[kind].change)


def flagged(found: SampleFacts, text_kind: str, fact: Fact) -> bool:
    """Whether the automatic comparison flags a fact of an answer: the reference does not state it, or states it with
    the other assertion."""
    return any((change.start, change.end) == (fact.start, fact.end)
               for change in found.changes.get((text_kind, "reference"), []))


def record_fact_verdict(store, rater: str, run_id: str, sample_idx: int, text_kind: str, fact: Fact, verdict: str,
                        is_flagged: bool) -> None:
    """A clinician's verdict on one fact of a text, with whether the comparison flagged it; a later verdict by the same
    rater replaces it."""
    if verdict not in FACT_VERDICTS:
        raise ValueError(f"A verdict is one of {', '.join(FACT_VERDICTS)}.")
    if text_kind not in TEXT_KINDS:
        raise ValueError(f"A text kind is one of {', '.join(TEXT_KINDS)}.")
    store.record_fact_verdict(run_id, sample_idx, text_kind, fact.kind, (fact.start, fact.end), fact.text,
                              is_flagged, filed_rater(rater), verdict)


def undo_fact_verdict(store, rater: str, run_id: str, sample_idx: int, text_kind: str, fact: Fact) -> None:
    store.delete_fact_verdict(run_id, sample_idx, text_kind, fact.kind, fact.start, filed_rater(rater))


def rater_fact_verdicts(store, rater: str, run_id: str, sample_idx: int) -> dict[tuple[str, str, int], str]:
    """What this rater recorded on a sample's facts: (text kind, fact kind, start) -> verdict."""
    name = rater_name(rater)
    if not name:
        return {}
    rows = store.fact_verdicts(name, run_id, sample_idx)
    return {(row.text_kind, row.fact_kind, int(row.start_char)): row.verdict for row in rows.itertuples()}


def fact_verdict_agreement(store) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Clinicians against the automatic comparison, per kind of fact: the counts of (flagged or not) × verdict, and per
    kind the share of flagged facts clinicians called wrong (precision) and the share of facts called wrong that were
    flagged (recall). 'Not a …' is a recognition error: counted in the table, left out of both rates; a rate from too
    few facts is None (`fwsapp.sample_size`)."""
    from fwsapp.sample_size import enough

    verdicts = store.fact_verdicts()
    if verdicts.empty:
        return pd.DataFrame(), pd.DataFrame()
    counts = pd.crosstab([verdicts.fact_kind.rename("kind"),
                          verdicts.flagged.map({True: "flagged", False: "not flagged"}).rename("comparison")],
                         verdicts.verdict.map(lambda code: FACT_VERDICTS[code].format(kind="…")).rename("clinician"))
    rows = []
    for kind, group in verdicts[verdicts.verdict != "not_this_kind"].groupby("fact_kind"):
        wrong, flagged_facts = group.verdict.eq("wrong"), group.flagged.astype(bool)
        rows.append({"kind": kind, "verdicts": len(group), "flagged": int(flagged_facts.sum()),
                     "called wrong": int(wrong.sum()),
                     "precision": float((wrong & flagged_facts).sum() / flagged_facts.sum())
                     if enough("precision", flagged_facts.sum()) else None,
                     "recall": float((wrong & flagged_facts).sum() / wrong.sum())
                     if enough("precision", wrong.sum()) else None})
    return counts, pd.DataFrame(rows)
