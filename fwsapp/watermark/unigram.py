"""Unigram watermark (Zhao et al., 2024): one fixed green list for every position.

A fixed list is robust to edits (no context to destroy) at the cost of a detectable token-frequency
shift. The list is MarkLLM 0.1.5's: a boolean mask of γ·|V| True values shuffled by numpy's generator
seeded from sha256 of the hash key. Every token is scored; there is no context.
"""
from __future__ import annotations

import hashlib

import numpy as np
import torch
from transformers import LogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.kgw import GreenCountDetector, bias_green


def unigram_mask(vocab_size: int, gamma: float, hash_key: int) -> np.ndarray:
    green = int(gamma * vocab_size)
    mask = np.array([True] * green + [False] * (vocab_size - green))
    seed = int.from_bytes(hashlib.sha256(np.int64(hash_key)).digest()[:4], "little")
    np.random.default_rng(seed).shuffle(mask)
    return mask


class UnigramLogitsProcessor(LogitsProcessor):
    def __init__(self, mask: np.ndarray, delta: float):
        self.mask = torch.from_numpy(mask)
        self.delta = delta

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        return bias_green(scores, self.mask.expand(scores.shape[0], -1), self.delta)


class Unigram(GreenCountDetector, info=methods.UNIGRAM):

    def __init__(self, vocab_size: int, lm=None, **params):
        super().__init__(vocab_size, lm, **params)
        self.mask = unigram_mask(vocab_size, self.params["gamma"], self.params["hash_key"])

    def logits_processor(self) -> LogitsProcessor:
        return UnigramLogitsProcessor(self.mask, self.params["delta"])

    def token_evidence(self, contexts: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """1 where the token is in the one green list, else 0."""
        return np.asarray([token < self.vocab_size and bool(self.mask[token]) for token in tokens.tolist()], dtype=float)
