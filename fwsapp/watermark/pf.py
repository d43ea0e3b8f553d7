"""PF (Zhao et al., ICLR 2025): the watermark of the Permute-and-Flip decoder.

At each step the last `prefix_length` tokens seed r_v ~ U(0, 1) for every token v (the keyed uniforms EXP reads,
`keyed_uniforms.py`), and the token taken is argmax_v p_v / r_v, PF's "report noisy max" with exponential noise
−log r. Detection sums −log r_t over the scored tokens: for text the key did not choose, each term is Exp(1), so the sum
over n tokens is Gamma(n, 1) and its survival function is the p-value (lower = watermarked).

A method on the detector skeleton (`detector.py`) is this module: its choice at generation and its per-token
evidence; the draw is `keyed_uniforms.py`'s, the Gamma p-value the exponential family's (`ExponentialDetector`).
"""
from __future__ import annotations

import numpy as np
import torch

from fwsapp.watermark import methods
from fwsapp.watermark.keyed_uniforms import UniformsDetector


# A draw of exactly 0 (torch.rand can give one) is read as this, at generation and detection alike, as MarkLLM's PF
# reads it, so that −log r stays finite.
ZERO_DRAW = 1e-4


def permute_and_flip_keys(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """log p − log r: the token with the largest is taken."""
    return torch.log(probs) - torch.log(torch.where(uniforms == 0, ZERO_DRAW, uniforms))


class PF(UniformsDetector, info=methods.PF):
    keys = staticmethod(permute_and_flip_keys)

    def token_evidence(self, contexts: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """e = −log r: Exp(1) for a token the key did not choose, large for one whose r was small."""
        return np.asarray([-float(np.log(r or ZERO_DRAW)) for r in self.uniforms.drawn(contexts, tokens)])
