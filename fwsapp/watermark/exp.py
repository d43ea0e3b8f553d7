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

from fwsapp.watermark import methods
from fwsapp.watermark.keyed_uniforms import UniformsDetector


def exponential_keys(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """r^(1/p), as log(r)/p to stay finite: the token with the largest is taken."""
    return torch.log(uniforms) / probs


class EXP(UniformsDetector, info=methods.EXP):
    keys = staticmethod(exponential_keys)

    def token_evidence(self, contexts: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """e = −log(1 − r): Exp(1) for a token the key did not choose, large for one it did."""
        return np.asarray([-float(np.log1p(-r)) for r in self.uniforms.drawn(contexts, tokens)])
