"""DiPmark (Wu et al., 2024): a distribution-preserving reweighting.

At each step a key and the last `prefix_length` tokens seed a permutation of the vocabulary. In that
order the cumulative probability F is remapped to F'(F) = max(F − α, 0) + max(F − (1 − α), 0), which
moves mass toward the end of the permutation. Averaged over keys, the watermarked distribution equals the model's: the
watermark is unbiased. Detection counts tokens in the last (1 − γ) of their permutation ("green"):
score = (N_G − (1 − γ)·T) / sqrt(T), the green-token ratio's deviation in units of sqrt(T).

Key derivation and seeds follow MarkLLM's DiP (sha256 of the context's int64 bytes and a 1024-bit key
drawn from Python's `random` seeded with `key`). Every step is reweighted (MarkLLM's ignore_history).
"""
from __future__ import annotations

import hashlib
import random
from math import sqrt
from typing import Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

from fwsapp.watermark.base import Detection, Watermark


def dip_reweight(logits: torch.Tensor, permutation: torch.Tensor, alpha: float) -> torch.Tensor:
    """Reweighted logits: each row's distribution after DiP's α-reweight along its permutation."""
    probs = torch.softmax(logits.float(), dim=-1)
    permuted = torch.gather(probs, -1, permutation)
    cumulative = torch.cumsum(permuted, dim=-1)
    cumulative = cumulative / cumulative[..., -1:]
    previous = cumulative - permuted
    # dF'/dF is 1 above α plus 1 above 1 − α: each token keeps the share of its interval [F_prev, F]
    # that lies above α, plus the share above 1 − α.
    def share_above(level: float) -> torch.Tensor:
        width = (cumulative - previous).clamp_min(1e-30)
        return ((cumulative - torch.maximum(previous, torch.tensor(level))).clamp(min=0) / width).clamp(0, 1)

    weight = share_above(alpha) + share_above(1 - alpha)
    new_permuted = permuted * weight
    reweighted = torch.zeros_like(probs).scatter_(-1, permutation, new_permuted)
    return torch.log(reweighted.clamp_min(1e-40)).to(logits.dtype)


class DiPKey:
    def __init__(self, key: int, prefix_length: int, vocab_size: int):
        generator = random.Random(key)
        self.secret = generator.getrandbits(1024).to_bytes(128, "big")
        self.prefix_length = prefix_length
        self.vocab_size = vocab_size

    def seed(self, context: Sequence[int]) -> int:
        tail = list(context)[-self.prefix_length:] if self.prefix_length else list(context)
        digest = hashlib.sha256(np.asarray(tail, dtype=np.int64).tobytes() + self.secret).digest()
        return int.from_bytes(digest, "big") % (2**32 - 1)

    def permutation(self, context: Sequence[int]) -> torch.Tensor:
        return torch.randperm(self.vocab_size, generator=torch.Generator().manual_seed(self.seed(context)))


class DiPLogitsProcessor(LogitsProcessor):
    def __init__(self, key: DiPKey, alpha: float):
        self.key = key
        self.alpha = alpha

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        width = min(scores.shape[-1], self.key.vocab_size)
        permutations = torch.stack([self.key.permutation(row) for row in input_ids.tolist()])
        if width < self.key.vocab_size:  # logits narrower than the vocabulary: keep the order of the ids present
            permutations = torch.stack([row[row < width] for row in permutations])
        reweighted = scores.clone()
        reweighted[:, :width] = dip_reweight(scores[:, :width], permutations.to(scores.device), self.alpha)
        return reweighted


class DiPmark(Watermark):
    name = "DiPmark"
    description = "Wu et al. (2024): distribution-preserving reweighting along a keyed permutation (unbiased)."
    defaults = {"gamma": 0.5, "alpha": 0.45, "key": 42, "prefix_length": 5, "z_threshold": 1.513}

    def __init__(self, vocab_size: int, lm=None, **params):
        super().__init__(vocab_size, lm, **params)
        if not 0 <= self.params["alpha"] <= 0.5:
            raise ValueError("DiPmark's alpha must lie in [0, 0.5].")
        self.key = DiPKey(self.params["key"], self.params["prefix_length"], vocab_size)

    def logits_processor(self) -> LogitsProcessor:
        return DiPLogitsProcessor(self.key, self.params["alpha"])

    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        context = list(context_ids)
        gamma = self.params["gamma"]
        flags = []
        for position, token in enumerate(token_ids):
            prefix = context + list(token_ids[:position])
            if not prefix or token >= self.vocab_size:
                flags.append(-1 if not prefix else 0)
                continue
            rank = int((self.key.permutation(prefix) == token).nonzero()[0, 0])
            flags.append(int((rank + 1) / self.vocab_size >= gamma))
        scored = [flag for flag in flags if flag >= 0]
        count = len(scored)
        score = (sum(scored) - (1 - gamma) * count) / sqrt(count) if count else 0.0
        return Detection(score=score, z=score, num_tokens_scored=count, token_flags=flags)
