"""PF (Zhao et al., ICLR 2025): the watermark of the Permute-and-Flip decoder.

At each step the last `prefix_length` tokens seed r_v ~ U(0, 1) for every token v (the keyed uniforms EXP reads,
`keyed_uniforms.py`), and the token taken is argmax_v p_v / r_v, PF's "report noisy max" with exponential noise
−log r. Detection sums −log r_t over the scored tokens: for text the key did not choose, each term is Exp(1), so the sum
over n tokens is Gamma(n, 1) and its survival function is the p-value (lower = watermarked).

A method on the detector skeleton (`detector.py`) is this module: its choice at generation, its per-token evidence
and its p-value.
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.stats import gamma as gamma_distribution
from transformers import LogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.detector import TokenDetector
from fwsapp.watermark.evidence import ExponentialSum
from fwsapp.watermark.keyed_uniforms import KeyedChoiceProcessor, KeyedUniforms


# A draw of exactly 0 (torch.rand can give one) is read as this, at generation and detection alike, as MarkLLM's PF
# reads it, so that −log r stays finite.
ZERO_DRAW = 1e-4


def permute_and_flip_keys(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """log p − log r: the token with the largest is taken."""
    return torch.log(probs) - torch.log(torch.where(uniforms == 0, ZERO_DRAW, uniforms))


class PF(TokenDetector, info=methods.PF):
    evidence = ExponentialSum()
    flag_above = float(np.log(2))  # above Exp(1)'s median: half of unwatermarked tokens are
    continuous = True

    def __init__(self, vocab_size: int, lm=None, **params):
        super().__init__(vocab_size, lm, **params)
        self.uniforms = KeyedUniforms(vocab_size, self.params["hash_key"], self.params["prefix_length"])

    def logits_processor(self) -> LogitsProcessor:
        return KeyedChoiceProcessor(self.uniforms, self.params["top_k"], permute_and_flip_keys)

    def scores_token(self, token: int) -> bool:
        return 0 <= token < self.vocab_size

    def token_evidence(self, contexts: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """e = −log r: Exp(1) for a token the key did not choose, large for one whose r was small."""
        return np.asarray([-float(np.log(r or ZERO_DRAW)) for r in self.uniforms.drawn(contexts, tokens)])

    def p_value(self, statistic: float, scored: int) -> float:
        """The Gamma(n, 1) tail of the summed evidence."""
        return float(gamma_distribution.sf(statistic, scored)) if scored else 1.0
