"""The Factuality-Weighted Score: FWS = α(Rel + FactAcc) + β·Coh, every aspect scaled to [0, 1].

Judge Likert scores are divided by 5 (the scale maximum), as the paper's Table 4 is computed.
"""
from __future__ import annotations

import numpy as np

DEFAULT_ALPHA, DEFAULT_BETA = 0.4, 0.2
LIKERT_MAX = 5.0

# The paper's weightings (its Table 5): name -> (α, β).
PRESETS = {
    "Coherence-heavy": (0.25, 0.5),
    "Equal": (0.33, 0.33),
    "Current": (0.4, 0.2),
    "Factuality-heavy 4:1": (0.44, 0.11),
    "Factuality-heavy 6:1": (0.46, 0.08),
}


def fws(coherence, relevance, factual_accuracy, alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA):
    """Per-sample FWS from aspects already in [0, 1]; works on scalars, arrays and Series."""
    return alpha * (np.asarray(relevance, float) + np.asarray(factual_accuracy, float)) + beta * np.asarray(
        coherence, float
    )


def fws_from_likert(scores, alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA) -> np.ndarray:
    """Per-sample FWS from an (n, 3) array of judge scores [coherence, relevance, factual accuracy] on 1-5."""
    scaled = np.asarray(scores, float).reshape(-1, 3) / LIKERT_MAX
    return fws(scaled[:, 0], scaled[:, 1], scaled[:, 2], alpha, beta)


def ratio_weights(ratio: float) -> tuple[float, float]:
    """(α, β) with α:β = ratio ("factuality : coherence") and 2α + β = 1."""
    if ratio <= 0:
        raise ValueError("the factuality : coherence ratio must be positive")
    return ratio / (2 * ratio + 1), 1 / (2 * ratio + 1)
