"""Factual consistency of an output with its reference: AlignScore when a checkpoint is given, otherwise
an offline stand-in named for what it is.

The stand-in, "disease-entity support", is the share of disease entities in the output that the
reference supports: the same entity (normalised name) or one whose contextual embedding is at least
0.6 cosine-similar. An output that mentions no disease scores 1.0 (it introduces nothing unsupported).
"""
from __future__ import annotations

import pandas as pd

from fwsapp.entities.introduced import HALLUCINATION_THRESHOLD, analysis_config, analyze_pairs, stored_support
from fwsapp.quality.base import ReferenceMetric, metric_row

STAND_IN_NAME = "Disease-entity support (offline stand-in)"
ALIGNSCORE_NAME = "AlignScore"


def stand_in_config(recognizer_name: str, encoder_name: str, threshold: float = HALLUCINATION_THRESHOLD) -> str:
    return f"entity-support;{recognizer_name};{encoder_name};sim>={threshold}"


def entity_support(recognizer, encoder, outputs: list[str], references: list[str],
                   threshold: float = HALLUCINATION_THRESHOLD) -> list[float]:
    found_outputs = recognizer.find_many(outputs)
    found_references = recognizer.find_many(references)
    analysed = analyze_pairs(references, outputs, found_references, found_outputs, encoder, threshold)
    return [sample.support for sample in analysed]


def alignscore(checkpoint: str, outputs: list[str], references: list[str]) -> list[float]:
    """AlignScore (Zha et al., 2023) of each output against its reference, with the user's checkpoint."""
    try:
        from alignscore import AlignScore
    except ImportError:
        raise RuntimeError(
            "AlignScore needs the `alignscore` package (github.com/yuh-zha/AlignScore) and its checkpoint. "
            "Without them, fwsapp uses its offline stand-in, disease-entity support."
        ) from None
    from fwsapp.models import best_device

    device, _ = best_device()
    scorer = AlignScore(model="roberta-large", batch_size=16, device=str(device), ckpt_path=checkpoint,
                        evaluation_mode="nli_sp")
    return [float(value) for value in scorer.score(contexts=references, claims=outputs)]


class Factuality(ReferenceMetric):
    def config(self, run: dict, resources) -> str:
        from fwsapp.entities.recognizers import recognizer_label

        if resources.alignscore_checkpoint:
            return f"alignscore;{resources.alignscore_checkpoint}"
        return stand_in_config(recognizer_label(resources.recognizer_name), resources.encoder_name)

    def stored(self, todo: pd.DataFrame, run: dict, resources, config: str) -> tuple[pd.DataFrame, list[dict]]:
        """The stand-in's values of the samples `analyze` analysed under the same recognizer, encoder and threshold,
        from the disease entities it stored: found once, not again (finding them again took 9 of the 16 minutes
        `score` spent on the paper's nine logs after `analyze`). An empty answer is read as well: no disease, 1.0, as
        found."""
        if resources.alignscore_checkpoint or resources.store is None:
            return super().stored(todo, run, resources, config)
        from fwsapp.entities.recognizers import recognizer_label

        support = stored_support(resources.store, run["run_id"], analysis_config(
            recognizer_label(resources.recognizer_name), resources.encoder_name, HALLUCINATION_THRESHOLD), self.entry.kinds)
        samples = todo[todo.sample_idx.isin({sample for sample, _ in support})]
        return samples, [metric_row(sample, kind, self.entry.stored_names[0], config, support[(sample, kind)])
                         for sample in samples.sample_idx for kind in self.entry.kinds]

    def values(self, outputs: list[str], references: list[str], resources) -> list[float]:
        if resources.alignscore_checkpoint:
            return alignscore(resources.alignscore_checkpoint, outputs, references)
        return entity_support(resources.recognizer, resources.encoder, outputs, references)

    def describe(self, config: str | None) -> str | None:
        if config is None:
            return None
        return ALIGNSCORE_NAME if config.startswith("alignscore") else STAND_IN_NAME
