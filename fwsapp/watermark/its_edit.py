"""ITS-Edit (Kuditipudi et al., 2024): inverse-transform sampling with a keyed permutation, and EXP-edit's
edit-robust test.

Key: a permutation π of the vocabulary and a sequence ξ of `pseudo_length` uniforms. Generation: token i is
the first token, in π's order, at which the cumulative probability passes ξ[s + i] (s a random shift per text):
an exact sample from p. Detection maps each token to its normalised position u = π⁻¹(token) / V, aligns u with
every shift of ξ by a Levenshtein cost with substitution |u − ξ| and insertion/deletion 1, keeps the smallest
cost, and compares it with `n_runs` null keys: p = #{null ≤ observed} / n_runs (lower = watermarked).

Keys and p-values are MarkLLM 0.1.5's ITSEdit, draw for draw: its key comes from the first of
`sequence_length` seeds drawn after `torch.manual_seed(key)`, and its null keys from the same global draws,
replayed here on a generator of their own (tests/test_watermarks.py checks both). The alignment is EXP-edit's
compiled recurrence with this cost.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.base import Detection, GenerationBatch, Watermark
from fwsapp.watermark.exp_edit import _alignment_costs

EDIT_COST = 1.0  # MarkLLM's insertion/deletion cost for ITS-Edit
NULL_SEEDS = 100000  # MarkLLM draws each null key's seed below this


def transform_key(generator: torch.Generator, pseudo_length: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(ξ, π): pseudo_length uniforms and a permutation, drawn as MarkLLM's transform_key_func draws them."""
    permutation = torch.randperm(vocab_size, generator=generator)
    uniforms = torch.rand((pseudo_length, 1), generator=generator)
    return uniforms[:, 0].numpy(), permutation.numpy()


@lru_cache(maxsize=4)
def text_key(key: int, sequence_length: int, pseudo_length: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The watermark's (ξ, π) for a secret key."""
    seeds = torch.Generator().manual_seed(key)
    generator = torch.Generator().manual_seed(int(torch.randint(2**32, (sequence_length,), generator=seeds)[0]))
    return transform_key(generator, pseudo_length, vocab_size)


def edit_statistic(positions: np.ndarray, uniforms: np.ndarray) -> float:
    """The smallest alignment cost of normalised positions u against every shift of ξ."""
    costs = np.abs(uniforms.astype(np.float64)[:, None] - positions.astype(np.float64)[None, :])
    return float(_alignment_costs(costs, EDIT_COST).min())


def normalised_positions(tokens: np.ndarray, permutation: np.ndarray) -> np.ndarray:
    inverse = np.argsort(permutation)
    return (inverse[tokens] / np.float32(len(permutation))).astype(np.float32)


class ITSLogitsProcessor(LogitsProcessor):
    """Inverse-transform sampling as a processor: every logit but the chosen token's becomes −inf."""

    def __init__(self, uniforms: np.ndarray, permutation: np.ndarray, shifts: np.ndarray):
        self.uniforms = torch.from_numpy(uniforms)
        self.permutation = torch.from_numpy(permutation).long()
        self.shifts = torch.from_numpy(np.asarray(shifts))
        self.start: int | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.start is None:
            self.start = input_ids.shape[1]
        step = input_ids.shape[1] - self.start
        width = min(scores.shape[-1], len(self.permutation))
        probs = torch.zeros(scores.shape[0], len(self.permutation))
        probs[:, :width] = torch.softmax(scores[:, :width].float(), dim=-1).cpu()
        cumulative = torch.cumsum(probs[:, self.permutation], dim=1)
        draws = self.uniforms[(self.shifts + step) % len(self.uniforms)]
        index = torch.searchsorted(cumulative, draws[:, None]).clamp(max=len(self.permutation) - 1)
        chosen = self.permutation[index[:, 0]].to(scores.device)
        return torch.full_like(scores, float("-inf")).scatter(1, chosen.unsqueeze(1), 0.0)


class ITSEdit(Watermark, info=methods.ITS_EDIT):

    def __init__(self, vocab_size: int, lm=None, **params):
        super().__init__(vocab_size, lm, **params)
        p = self.params
        self.uniforms, self.permutation = text_key(p["key"], p["sequence_length"], p["pseudo_length"], vocab_size)

    def logits_processor(self, shifts: Sequence[int] = (0,)) -> LogitsProcessor:
        return ITSLogitsProcessor(self.uniforms, self.permutation, np.asarray(shifts))

    def generation_kwargs(self, batch: GenerationBatch) -> dict:
        """A random, seeded shift per text, as in Kuditipudi et al. (MarkLLM starts every text at 0)."""
        shifts = np.random.default_rng(batch.seed).integers(0, self.params["pseudo_length"], batch.size)
        return {"logits_processor": [self.logits_processor(shifts)]}

    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        tokens = np.asarray([token for token in token_ids if 0 <= token < self.vocab_size], dtype=np.int64)
        if len(tokens) == 0:
            return Detection(score=1.0, p=1.0, num_tokens_scored=0)
        observed = edit_statistic(normalised_positions(tokens, self.permutation), self.uniforms)
        # MarkLLM's null: each run permutes the (already permuted) tokens again and draws a fresh key, all from
        # the global generator after torch.manual_seed(key); replayed on a generator of its own.
        draws, key_generator = torch.Generator().manual_seed(self.params["key"]), torch.Generator()
        permuted, at_least_as_extreme = torch.from_numpy(tokens), 0
        for _ in range(self.params["n_runs"]):
            permuted = torch.argsort(torch.randperm(self.vocab_size, generator=draws))[permuted]
            key_generator.manual_seed(int(torch.randint(high=NULL_SEEDS, size=(1,), generator=draws)))
            uniforms, permutation = transform_key(key_generator, self.params["pseudo_length"], self.vocab_size)
            at_least_as_extreme += edit_statistic(normalised_positions(permuted.numpy(), permutation), uniforms) <= observed
        p_value = at_least_as_extreme / self.params["n_runs"]
        return Detection(score=p_value, p=p_value, num_tokens_scored=len(tokens))
