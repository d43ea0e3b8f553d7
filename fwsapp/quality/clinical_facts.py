"""Clinical facts against the reference (`fwsapp.entities.changes`, by concept): per text, the facts the reference does
not state of each kind for which that is a failure (drugs, doses, durations: `FactKind.unstated_failure`), the facts
whose assertion it contradicts, and the corrupted medical terms per 1,000 words. Lower is better for each; the
watermarked and unwatermarked texts' values side by side say what the watermark adds.
The changes `analyze` stored under the same finder are counted as they are (fwsapp.entities.fact_analysis compares each
answer with the reference in the same way), so facts are found once, not again for the metric."""
from __future__ import annotations

import pandas as pd

from fwsapp.quality.base import ReferenceMetric, metric_row
from fwsapp.quality.registry import UNSTATED_FAILURES

# Stored column -> (change kind, only facts the reference lacks)
COUNTED = {
    **{kind.unsupported_column: (kind.change, True) for kind in UNSTATED_FAILURES},
    "negation_flips": ("negation", False),
    "corrupted_terms": ("corruption", False),  # per 1,000 words
}
PER_THOUSAND_WORDS = "corrupted_terms"


def with_both_texts(todo: pd.DataFrame, kinds) -> pd.Series:
    """Which samples have a reference and a text of each of `kinds`: those the facts analysis compared with their
    reference."""
    return todo.reference.fillna("").ne("") & pd.concat([todo[f"{kind}_text"].fillna("").ne("") for kind in kinds],
                                                        axis=1).all(axis=1)


class ClinicalFacts(ReferenceMetric):
    def finder(self, resources):
        from fwsapp.entities.facts import FactFinder

        return FactFinder({"disease": resources.recognizer_name})

    def config(self, run: dict, resources) -> str:
        return self.finder(resources).config

    def values(self, outputs: list[str], references: list[str], resources) -> dict[str, list[float]]:
        from fwsapp.entities.changes import BY_CONCEPT, changes

        found = self.finder(resources).find_many(outputs + references)
        values: dict[str, list[float]] = {name: [] for name in COUNTED}
        for index, (output, reference) in enumerate(zip(outputs, references)):
            changed = changes(output, found[index], reference, found[len(outputs) + index], by=BY_CONCEPT)
            for name, value in measures(output, changed).items():
                values[name].append(value)
        return values

    def stored(self, todo: pd.DataFrame, run: dict, resources, config: str) -> tuple[pd.DataFrame, list[dict]]:
        """The samples `analyze` compared with their reference under this config, from its stored changes."""
        analysed = set() if resources.store is None else resources.store.fact_analysed_samples(run["run_id"], config)
        samples = todo[todo.sample_idx.isin(analysed) & with_both_texts(todo, self.entry.kinds)]
        return samples, self.stored_rows(samples, run["run_id"], resources.store, config) if len(samples) else []

    def stored_rows(self, samples: pd.DataFrame, run_id: str, store, config: str) -> list[dict]:
        from fwsapp.entities.changes import Change

        changes = store.fact_changes([run_id])
        changes = changes[(changes.config == config) & (changes.against == "reference")]
        by_text = {key: [Change(row.kind, int(row.start_char), int(row.end_char), row.was, row.now)
                         for row in group.itertuples()]
                   for key, group in changes.groupby(["sample_idx", "text_kind"])}
        return [metric_row(sample.sample_idx, kind, name, config, value)
                for sample in samples.itertuples() for kind in self.entry.kinds
                for name, value in measures(getattr(sample, f"{kind}_text"),
                                            by_text.get((sample.sample_idx, kind), [])).items()]


def measures(output: str, changed) -> dict[str, float]:
    """The stored columns' values of one output from its changes against the reference."""
    from fwsapp.entities.changes import counted, word_count

    values = {}
    for name, (kind, unsupported_only) in COUNTED.items():
        count = counted(changed, kind, unsupported_only)
        if name == PER_THOUSAND_WORDS:
            words = word_count(output)
            values[name] = 1000 * count / words if words else 0.0
        else:
            values[name] = float(count)
    return values
