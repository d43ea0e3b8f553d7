"""Mention-level precision, recall and F1 against gold spans, exact and overlapping.

Exact: a predicted span counts only where a gold span has the same start and end.
Overlapping (lenient): a predicted span is correct where it overlaps some gold span, and a gold span is found
where some predicted span overlaps it; precision and recall are counted on their own sides.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

Span = tuple[int, int]


@dataclass(frozen=True)
class Scores:
    precision: float
    recall: float
    f1: float
    predicted: int
    gold: int

    def as_dict(self) -> dict:
        return asdict(self)


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def overlaps(span: Span, others) -> bool:
    """Whether `span` shares a character with any of `others` (character spans, end exclusive)."""
    return any(span[0] < end and span[1] > start for start, end in others)


def score_spans(predicted: list[list[Span]], gold: list[list[Span]]) -> dict[str, Scores]:
    """{'exact': Scores, 'overlap': Scores} over documents given in the same order."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted documents against {len(gold)} gold ones")
    n_predicted = sum(map(len, predicted))
    n_gold = sum(map(len, gold))
    exact = sum(len(set(found) & set(truth)) for found, truth in zip(predicted, gold))
    correct = sum(overlaps(span, truth) for found, truth in zip(predicted, gold) for span in found)
    covered = sum(overlaps(span, found) for found, truth in zip(predicted, gold) for span in truth)

    def scores(precision_hits: int, recall_hits: int) -> Scores:
        precision = precision_hits / n_predicted if n_predicted else 0.0
        recall = recall_hits / n_gold if n_gold else 0.0
        return Scores(precision, recall, _f1(precision, recall), n_predicted, n_gold)

    return {"exact": scores(exact, exact), "overlap": scores(correct, covered)}
