"""EWD (Lu et al., 2024, "Entropy-based text watermarking detection"): KGW at generation; at detection each
token counts with a weight that grows with the spike entropy of the distribution it was drawn from.

A low-entropy token (a drug name's second half, a fixed phrase) could hardly have been steered to green, so its
colour says little; EWD lets it count less instead of not at all (SWEET's hard cut). With the spike entropy
S_t = Σ_v p_v / (1 + z p_v), z = (1 − γ)(e^δ − 1) / (1 − γ + γ e^δ), the weights are w_t = S_t − min_s S_s over
the scored tokens, and
    z-score = (Σ_t w_t g_t − γ Σ_t w_t) / sqrt(γ (1 − γ) Σ_t w_t²),
g_t being 1 for a green token. Green lists use MarkLLM 0.1.5's EWD seeding (hash key × previous token, as its
SWEET), so its scores are reproduced (tests/test_watermarks.py).
"""
from __future__ import annotations

import math

import numpy as np

from fwsapp.watermark import methods
from fwsapp.models.teacher_forcing import spike_entropy
from fwsapp.watermark.evidence import WeightedGreenCount
from fwsapp.watermark.expected_evidence import spike_modulus
from fwsapp.watermark.kgw import KGW


class EWD(KGW, info=methods.EWD):
    evidence = WeightedGreenCount()
    seeding = "sweet"
    # Each text is read alone: the weights are differences of spike entropies, and where those are close (a flat
    # distribution) the last bits that padding in a batch moves would move the z-score, so a text's score would depend
    # on the texts beside it.
    statistics_batch_size = 1

    @property
    def spike(self):
        return spike_entropy(spike_modulus(self.params["gamma"], self.params["delta"]))

    def model_statistics(self) -> list:
        return [self.spike]

    def token_weights(self, stats, positions: np.ndarray) -> np.ndarray:
        """w_t = S_t − min_s S_s over the scored tokens."""
        spikes = np.asarray(stats[self.spike.name], dtype=float)[positions]
        return spikes - spikes.min() if len(spikes) else spikes

    def statistic(self, evidence: np.ndarray, weights: np.ndarray | None = None) -> float:
        """The weighted z itself: (Σ w g − γ Σ w) / sqrt(γ (1 − γ) Σ w²), 0 where the weights are all equal."""
        gamma = self.params["gamma"]
        spread = math.sqrt(gamma * (1 - gamma) * float(np.square(weights).sum()))
        return (float(weights[evidence == 1].sum()) - gamma * float(weights.sum())) / spread if spread > 0 else 0.0

    def z(self, statistic: float, scored: int) -> float:
        return statistic

    def p_value(self, statistic: float, scored: int) -> None:
        """None: EWD scores the weighted z alone, as Lu et al. and MarkLLM do."""
        return None
