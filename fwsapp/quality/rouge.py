"""ROUGE-2 and ROUGE-L F-measure of an output against its reference, with google-research rouge-score.

No stemmer, as in the paper's MarkLLM evaluation.
"""
from __future__ import annotations

from functools import lru_cache

from rouge_score import rouge_scorer

from fwsapp.quality.base import ReferenceMetric

CONFIG = "rouge-score;no-stemmer"


@lru_cache(maxsize=1)
def _scorer() -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer(["rouge2", "rougeL"], use_stemmer=False)


def rouge(outputs: list[str], references: list[str]) -> dict[str, list[float]]:
    """{'rouge2': [...], 'rougeL': [...]}: F-measures, one per (output, reference) pair."""
    if len(outputs) != len(references):
        raise ValueError("outputs and references must have the same length")
    scores = [_scorer().score(reference, output) for output, reference in zip(outputs, references)]
    return {
        "rouge2": [score["rouge2"].fmeasure for score in scores],
        "rougeL": [score["rougeL"].fmeasure for score in scores],
    }


class ROUGE(ReferenceMetric):
    def config(self, run: dict, resources) -> str:
        return CONFIG

    def values(self, outputs: list[str], references: list[str], resources) -> dict[str, list[float]]:
        return rouge(outputs, references)
