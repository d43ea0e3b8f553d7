"""EXP (Aaronson, 2023): the exponential, or Gumbel, watermark.

At each step the last `prefix_length` tokens seed a generator that draws r_v ~ U(0, 1) for every token v, and the
token taken is argmax_v r_v^(1/p_v): an exact sample from p over random r, made deterministic by the key.
Detection redraws each token's r and sums −log(1 − r_t): for text the key did not choose, each term is Exp(1), so
the sum over n tokens is Gamma(n, 1), and its survival function is the p-value (lower = watermarked).

Random numbers are MarkLLM 0.1.5's EXP: `torch.rand(V)` on a CPU generator seeded with
hash_key × (product of the last prefix_length tokens mod V), so its scores are reproduced
(tests/test_watermarks.py). The scheme vLLM ships natively is this one.
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.stats import gamma as gamma_distribution
from transformers import LogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.evidence import ExponentialSum
from fwsapp.watermark.detector import TokenDetector
from fwsapp.watermark.keyed_uniforms import KeyedChoiceProcessor, KeyedUniforms


def exponential_keys(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """r^(1/p), as log(r)/p to stay finite: the token with the largest is taken."""
    return torch.log(uniforms) / probs


class EXP(TokenDetector, info=methods.EXP):
    evidence = ExponentialSum()
    flag_above = float(np.log(2))  # above Exp(1)'s median: half of unwatermarked tokens are
    continuous = True

    def __init__(self, vocab_size: int, lm=None, **params):
        super().__init__(vocab_size, lm, **params)
        self.uniforms = KeyedUniforms(vocab_size, self.params["hash_key"], self.params["prefix_length"])

    def logits_processor(self) -> LogitsProcessor:
        return KeyedChoiceProcessor(self.uniforms, self.params["top_k"], exponential_keys)

    def scores_token(self, token: int) -> bool:
        return 0 <= token < self.vocab_size

    def token_evidence(self, contexts: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """e = −log(1 − r): Exp(1) for a token the key did not choose, large for one it did."""
        return np.asarray([-float(np.log1p(-r)) for r in self.uniforms.drawn(contexts, tokens)])

    def p_value(self, statistic: float, scored: int) -> float:
        """The Gamma(n, 1) tail of the summed evidence."""
        return float(gamma_distribution.sf(statistic, scored)) if scored else 1.0
