"""ITS-Edit (Kuditipudi et al., 2024): inverse-transform sampling with a keyed permutation, and EXP-edit's
edit-robust test.

Key: a permutation π of the vocabulary and a sequence ξ of `pseudo_length` uniforms. Generation: token i is
the first token, in π's order, at which the cumulative probability passes ξ[s + i] (s a random shift per text):
an exact sample from p. Detection maps each token to its normalised position u = π⁻¹(token) / V, aligns u with
every shift of ξ by a Levenshtein cost with substitution |u − ξ| and insertion/deletion 1, keeps the smallest
cost, and compares it with `n_runs` null keys: p = #{null ≤ observed} / n_runs (lower = watermarked).

Keys and p-values are MarkLLM 0.1.5's ITSEdit, draw for draw: its key comes from the first of
`sequence_length` seeds drawn after `torch.manual_seed(key)`, and its null keys from the same global draws,
replayed here on a generator of their own (tests/test_watermarks.py checks both). The alignment and the test are
`edit_alignment.py`'s, with this cost.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterator, Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.base import GenerationBatch
from fwsapp.watermark.edit_alignment import AlignmentDetector

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


def edit_costs(positions: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """|ξ_r − u_i|: what normalised position u_i costs against row r."""
    return np.abs(uniforms.astype(np.float64)[:, None] - positions.astype(np.float64)[None, :])


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


class ITSEdit(AlignmentDetector, info=methods.ITS_EDIT):
    """On the edit-robust skeleton: a token costs |ξ_r − u| against row r, u its normalised position in π, and the null
    keys are MarkLLM's."""

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

    def substitution_costs(self, tokens: np.ndarray) -> np.ndarray:
        return edit_costs(normalised_positions(tokens, self.permutation), self.uniforms)

    def null_costs(self, tokens: np.ndarray) -> Iterator[np.ndarray]:
        """MarkLLM's null: each run permutes the (already permuted) tokens again and draws a fresh key, all from the
        global generator after torch.manual_seed(key); replayed on a generator of its own."""
        draws, key_generator = torch.Generator().manual_seed(self.params["key"]), torch.Generator()
        permuted = torch.from_numpy(tokens)
        for _ in range(self.params["n_runs"]):
            permuted = torch.argsort(torch.randperm(self.vocab_size, generator=draws))[permuted]
            key_generator.manual_seed(int(torch.randint(high=NULL_SEEDS, size=(1,), generator=draws)))
            uniforms, permutation = transform_key(key_generator, self.params["pseudo_length"], self.vocab_size)
            yield edit_costs(normalised_positions(permuted.numpy(), permutation), uniforms)

    def gap_cost(self) -> float:
        return EDIT_COST

    def p_value(self, at_least_as_extreme: int, runs: int) -> float:
        """#{null ≤ observed} / n_runs, as MarkLLM's."""
        return at_least_as_extreme / runs
