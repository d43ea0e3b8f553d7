"""Token-level F1 for QA, with SQuAD's answer normalisation (lower case, no punctuation or articles)."""
from __future__ import annotations

import re
import string
from collections import Counter

from fwsapp.quality.base import ReferenceMetric

CONFIG = "squad-v1.1-normalisation"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(char for char in text if char not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def token_f1(prediction: str, reference: str) -> float:
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(reference).split()
    if not predicted or not expected:
        return float(predicted == expected)
    common = Counter(predicted) & Counter(expected)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(predicted), overlap / len(expected)
    return 2 * precision * recall / (precision + recall)


def f1(outputs: list[str], references: list[str]) -> list[float]:
    if len(outputs) != len(references):
        raise ValueError("outputs and references must have the same length")
    return [token_f1(output, reference) for output, reference in zip(outputs, references)]


class TokenF1(ReferenceMetric):
    def config(self, run: dict, resources) -> str:
        return CONFIG

    def values(self, outputs: list[str], references: list[str], resources) -> list[float]:
        return f1(outputs, references)
