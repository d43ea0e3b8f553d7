"""SimCSE-style similarity: cosine of sentence embeddings of the watermarked and unwatermarked outputs.

The unwatermarked output's similarity to itself is 1.0, as in the paper's Table 1. The default encoder
is all-MiniLM-L6-v2 (shipped offline); the numbers depend on the encoder, so its name is part of the
metric's config and shown wherever the metric is.
"""
from __future__ import annotations

import numpy as np


def similarity(encoder, watermarked: list[str], unwatermarked: list[str]) -> list[float]:
    if len(watermarked) != len(unwatermarked):
        raise ValueError("both lists must have the same length")
    a, b = encoder.encode(watermarked), encoder.encode(unwatermarked)
    return [float(value) for value in np.sum(a * b, axis=1)]
