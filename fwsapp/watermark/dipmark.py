"""DiPmark (Wu et al., 2024): a distribution-preserving reweighting.

At each step a key and the last `prefix_length` tokens seed a permutation of the vocabulary. In that
order the cumulative probability F is remapped to F'(F) = max(F − α, 0) + max(F − (1 − α), 0), which
moves mass toward the end of the permutation. Averaged over keys, the watermarked distribution equals the model's: the
watermark is unbiased. Detection counts tokens in the last (1 − γ) of their permutation ("green"):
score = (N_G − (1 − γ)·N) / sqrt(N), the green-token ratio's deviation in units of sqrt(N).

Key derivation and seeds follow MarkLLM's DiP (sha256 of the context's int64 bytes and a 1024-bit key
drawn from Python's `random` seeded with `key`), and so does the score: z = (G − (1 − γ)·N) / √N over all
N tokens. Every step is reweighted (MarkLLM's ignore_history). Permutations come from the generator that
`rng` names (see `rng.py`).
"""
from __future__ import annotations

import hashlib
import random
from math import ceil, sqrt
from typing import Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.evidence import PermutationGreenCount, green_p_value
from fwsapp.watermark.detector import TokenDetector
from fwsapp.watermark.rng import VocabularyShuffle


def dip_reweight(logits: torch.Tensor, permutation: torch.Tensor, alpha: float) -> torch.Tensor:
    """Reweighted logits: each row's distribution after DiP's α-reweight along its permutation."""
    return torch.log(reweighted_probs(logits, permutation, alpha).clamp_min(1e-40)).to(logits.dtype)


def reweighted_probs(logits: torch.Tensor, permutation: torch.Tensor, alpha: float) -> torch.Tensor:
    """Each row's distribution after the α-reweight along its permutation (α = 0.5: Hu et al.'s γ-reweight)."""
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
    return torch.zeros_like(probs).scatter_(-1, permutation, permuted * weight)


class DiPKey:
    def __init__(self, key: int, prefix_length: int, vocab_size: int, rng: str = "cuda", cuda_blocks: int = 0):
        generator = random.Random(key)
        self.secret = generator.getrandbits(1024).to_bytes(128, "big")
        self.prefix_length = prefix_length
        self.vocab_size = vocab_size
        self.shuffle = VocabularyShuffle(vocab_size, rng, cuda_blocks)

    def seed(self, context: Sequence[int]) -> int:
        tail = list(context)[-self.prefix_length:] if self.prefix_length else list(context)
        digest = hashlib.sha256(np.asarray(tail, dtype=np.int64).tobytes() + self.secret).digest()
        return int.from_bytes(digest, "big") % (2**32 - 1)

    def permutation(self, context: Sequence[int]) -> torch.Tensor:
        return torch.from_numpy(self.shuffle.permutation(self.seed(context)))

    def is_green(self, context: Sequence[int], token: int, gamma: float) -> bool:
        """MarkLLM's test: the token's quantile, (its position in the context's permutation + 1) / V, is at
        least γ. Settled from the token's own key where that suffices."""
        seed = self.seed(context)
        below = self.shuffle.rank_below(seed, token, ceil(gamma * self.vocab_size - 1))
        if below is None:
            return (self.shuffle.rank(seed, token) + 1) / self.vocab_size >= gamma
        return not below


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


class DiPmark(TokenDetector, info=methods.DIPMARK):
    """On the skeleton with MarkLLM's score, z = (G − (1 − γ)·N) / √N over all N tokens: a short context is hashed as it
    is, and a token with none (the first of a text scored alone) counts in N but cannot be green."""

    evidence = PermutationGreenCount()
    scores_short_contexts = True

    def __init__(self, vocab_size: int, lm=None, **params):
        super().__init__(vocab_size, lm, **params)
        p = self.params
        self.key = DiPKey(p["key"], p["prefix_length"], vocab_size, p["rng"], p["cuda_blocks"])

    def logits_processor(self) -> LogitsProcessor:
        return DiPLogitsProcessor(self.key, self.params["alpha"])

    def token_evidence(self, contexts: list[np.ndarray], tokens: np.ndarray) -> np.ndarray:
        gamma = self.params["gamma"]
        return np.asarray([len(context) > 0 and token < self.vocab_size and self.key.is_green(context.tolist(), token, gamma)
                           for context, token in zip(contexts, tokens.tolist())], dtype=float)

    def z(self, statistic: float, scored: int) -> float:
        return (statistic - (1 - self.params["gamma"]) * scored) / sqrt(scored) if scored else 0.0

    def p_value(self, statistic: float, scored: int) -> float:
        """A token is green by chance with probability 1 − γ."""
        return green_p_value(int(statistic), scored, 1 - self.params["gamma"])
