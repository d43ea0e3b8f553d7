"""KGW (Kirchenbauer et al., 2023): a soft red/green-list watermark.

At each step the previous token seeds a pseudo-random split of the vocabulary; a fraction γ is "green"
and gets δ added to its logits. A detector counts green tokens and reports
    z = (|s|_G − γT) / sqrt(T γ (1 − γ)).

Green lists are bit-identical to MarkLLM 0.1.5's KGW ("time" f-scheme, "left" window) for the same
vocabulary size, so scores here and in the paper's MarkLLM pipeline agree.
"""
from __future__ import annotations

from collections import OrderedDict
from math import sqrt
from typing import Sequence

import torch
from transformers import LogitsProcessor

from fwsapp.watermark.base import Detection, Watermark


class GreenLists:
    """MarkLLM's left-hash green lists, cached per seed: each list depends only on the seed.

    Two seeding schemes, as MarkLLM has them: "kgw" passes the prefix through a keyed pseudo-random
    permutation (KGW's f_time); "sweet" multiplies the hash key by the prefix (SWEET's _seed_rng).
    """

    def __init__(self, vocab_size: int, gamma: float, hash_key: int, prefix_length: int, cache_size: int = 4096,
                 scheme: str = "kgw"):
        self.vocab_size = vocab_size
        self.gamma = gamma
        self.hash_key = hash_key
        self.prefix_length = prefix_length
        self.green_size = int(vocab_size * gamma)
        self._rng = torch.Generator(device="cpu")
        self._rng.manual_seed(hash_key)
        self._prf = torch.randperm(vocab_size, generator=self._rng).tolist()
        self._cache: OrderedDict[int, torch.Tensor] = OrderedDict()
        self._cache_size = cache_size
        self.scheme = scheme

    def seed(self, prefix: Sequence[int]) -> int:
        """The generator seed for the token after `prefix`, from the product of its last tokens."""
        product = 1
        for token in prefix[-self.prefix_length:]:
            product *= int(token)
        if self.scheme == "sweet":
            return self.hash_key * (product % self.vocab_size)
        return (self.hash_key * self._prf[product % self.vocab_size]) % self.vocab_size

    def mask(self, seed: int) -> torch.Tensor:
        """Boolean mask over the vocabulary: True where green."""
        cached = self._cache.get(seed)
        if cached is not None:
            self._cache.move_to_end(seed)
            return cached
        self._rng.manual_seed(seed)
        permutation = torch.randperm(self.vocab_size, generator=self._rng)
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        mask[permutation[: self.green_size]] = True
        self._cache[seed] = mask
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return mask

    def green_ids(self, prefix: Sequence[int]) -> torch.Tensor:
        return self.mask(self.seed(prefix)).nonzero().flatten()

    def batch_mask(self, input_ids: torch.Tensor) -> torch.Tensor:
        """[batch, vocab] green masks for the next token of each row."""
        rows = input_ids[:, -self.prefix_length:].tolist()
        return torch.stack([self.mask(self.seed(row)) for row in rows])

    def flags(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> list[int]:
        """1/0 per token for green/red; -1 where fewer than `prefix_length` tokens precede it."""
        context = list(context_ids)[-self.prefix_length:] if self.prefix_length else []
        full = context + list(token_ids)
        offset = len(context)
        flags = []
        for position, token in enumerate(token_ids):
            end = offset + position
            if end < self.prefix_length:
                flags.append(-1)
                continue
            token = int(token)
            green = token < self.vocab_size and bool(self.mask(self.seed(full[end - self.prefix_length:end]))[token])
            flags.append(int(green))
        return flags


def bias_green(scores: torch.Tensor, green: torch.Tensor, delta: float) -> torch.Tensor:
    """Add δ to green logits; logits wider than the vocabulary (padding rows) are left as they are."""
    width = min(scores.shape[-1], green.shape[-1])
    scores = scores.clone()
    scores[:, :width] += delta * green[:, :width].to(scores.device, scores.dtype)
    return scores


def z_score(green_count: int, scored: int, gamma: float) -> float:
    if scored < 1:
        return 0.0
    return (green_count - gamma * scored) / sqrt(scored * gamma * (1 - gamma))


def count_detection(flags: list[int], gamma: float) -> Detection:
    """z-score over the scored tokens (flags 0 or 1; -1 is not scored)."""
    scored = [flag for flag in flags if flag >= 0]
    z = z_score(sum(scored), len(scored), gamma)
    return Detection(score=z, z=z, num_tokens_scored=len(scored), token_flags=flags)


class KGWLogitsProcessor(LogitsProcessor):
    def __init__(self, green_lists: GreenLists, delta: float):
        self.green_lists = green_lists
        self.delta = delta

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[-1] < self.green_lists.prefix_length:
            return scores
        return bias_green(scores, self.green_mask(input_ids, scores), self.delta)

    def green_mask(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.Tensor:
        """Where δ is added: the green list of each row."""
        return self.green_lists.batch_mask(input_ids)


class KGW(Watermark):
    name = "KGW"
    description = "Kirchenbauer et al. (2023): bias a pseudo-random green list seeded by the previous token."
    defaults = {"gamma": 0.5, "delta": 2.0, "hash_key": 15485863, "prefix_length": 1, "z_threshold": 4.0}
    seeding = "kgw"

    def __init__(self, vocab_size: int, **params):
        super().__init__(vocab_size, **params)
        p = self.params
        self.green_lists = GreenLists(vocab_size, p["gamma"], p["hash_key"], p["prefix_length"], scheme=self.seeding)

    def logits_processor(self) -> LogitsProcessor:
        return KGWLogitsProcessor(self.green_lists, self.params["delta"])

    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        return count_detection(self.green_lists.flags(token_ids, context_ids), self.params["gamma"])
