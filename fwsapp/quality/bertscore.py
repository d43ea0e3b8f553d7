"""BERTScore F1 (bert-score) of each output against its reference, with the local MiniLM encoder.

bert-score looks up layer counts by model name, so the local folder is passed with num_layers: all six
of MiniLM-L6's layers.
"""
from __future__ import annotations

from fwsapp.quality.base import ReferenceMetric
from fwsapp.models import encoder_folder

NUM_LAYERS = 6
CONFIG = f"bert-score;all-MiniLM-L6-v2;layers={NUM_LAYERS}"


def bertscore_f1(outputs: list[str], references: list[str]) -> list[float]:
    from bert_score import score

    _, _, f1 = score(outputs, references, model_type=str(encoder_folder()), num_layers=NUM_LAYERS, verbose=False)
    return [float(value) for value in f1]


class BERTScore(ReferenceMetric):
    def config(self, run: dict, resources) -> str:
        return CONFIG

    def values(self, outputs: list[str], references: list[str], resources) -> list[float]:
        return bertscore_f1(outputs, references)
