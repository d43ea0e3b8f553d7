"""SimCSE-style similarity: cosine of sentence embeddings of the watermarked and unwatermarked outputs.

The unwatermarked output's similarity to itself is 1.0, as in the paper's Table 1. The default encoder
is all-MiniLM-L6-v2 (shipped offline); the numbers depend on the encoder, so its name is part of the
metric's config and shown wherever the metric is.
"""
from __future__ import annotations

import numpy as np

from fwsapp.quality.base import Metric, ReferenceMetric, metric_row


def similarity(encoder, watermarked: list[str], unwatermarked: list[str]) -> list[float]:
    if len(watermarked) != len(unwatermarked):
        raise ValueError("both lists must have the same length")
    a, b = encoder.encode(watermarked), encoder.encode(unwatermarked)
    return [float(value) for value in np.sum(a * b, axis=1)]


def encoder_config(resources) -> str:
    return f"encoder={resources.encoder_name}"


class SimCSE(Metric):
    """The paper's SimCSE compares the watermarked text with the unwatermarked one; the unwatermarked text has no such
    value (its similarity to itself is 1 by definition), so none is stored."""

    def config(self, run: dict, resources) -> str:
        return encoder_config(resources)

    def rows(self, todo, run: dict, resources, config: str):
        values = similarity(resources.encoder, todo.watermarked_text.tolist(), todo.unwatermarked_text.tolist())
        yield [metric_row(row.sample_idx, "watermarked", self.entry.name, config, value)
               for row, value in zip(todo.itertuples(), values)], len(todo)


class SimCSEToReference(ReferenceMetric):
    """Similarity to the reference, measured alike for both texts: what Auto-FWS reads for coherence."""

    def config(self, run: dict, resources) -> str:
        return encoder_config(resources)

    def values(self, outputs: list[str], references: list[str], resources) -> list[float]:
        return similarity(resources.encoder, outputs, references)
