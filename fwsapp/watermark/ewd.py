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
from fwsapp.models.teacher_forcing import spike_entropy, teacher_force
from fwsapp.watermark.evidence import WeightedGreenCount
from fwsapp.watermark.expected_evidence import spike_modulus
from fwsapp.watermark.base import BatchedDetector, Detection, Texts
from fwsapp.watermark.kgw import KGW


def weighted_detection(flags: list[int], spikes, gamma: float) -> Detection:
    """The weighted z-score of one text from its green flags and the spike entropies of its tokens."""
    scored = np.array([flag >= 0 for flag in flags], dtype=bool)
    spikes = np.asarray(spikes, dtype=float)
    weights = np.zeros(len(flags))
    if scored.any():
        weights[scored] = spikes[scored] - spikes[scored].min()
    green = np.array([flag == 1 for flag in flags], dtype=bool)
    spread = math.sqrt(gamma * (1 - gamma) * float(np.square(weights[scored]).sum()))
    z = (float(weights[green].sum()) - gamma * float(weights[scored].sum())) / spread if spread > 0 else 0.0
    return Detection(score=z, z=z, num_tokens_scored=int(scored.sum()), token_flags=flags,
                     token_weights=weights.tolist())


class EWD(BatchedDetector, KGW, info=methods.EWD):
    evidence = WeightedGreenCount()
    seeding = "sweet"

    def detect_many(self, texts: Texts) -> list[Detection]:
        """Each text is read alone (batch_size=1): the weights are differences of spike entropies, and where those are
        close (a flat distribution) the last bits that padding in a batch moves would move the z-score, so a text's
        score would depend on the texts beside it."""
        spike = spike_entropy(spike_modulus(self.params["gamma"], self.params["delta"]))
        stats = teacher_force(self.lm, [(context_ids, token_ids) for token_ids, context_ids in texts], [spike],
                              batch_size=1)
        return [weighted_detection(self.green_lists.flags(token_ids, context_ids), found[spike.name], self.params["gamma"])
                for (token_ids, context_ids), found in zip(texts, stats)]
