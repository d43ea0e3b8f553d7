"""EXP-edit (Kuditipudi et al., 2024): distortion-free exponential-minimum sampling with an edit-robust test.

Generation: a key gives a sequence ξ of `pseudo_length` uniform vectors over the vocabulary. Each text
starts at a random shift s; its token i is argmax_v ξ[s + i][v]^(1/p(v)) (the exponential-minimum trick:
an exact sample from p, made deterministic by the key).

Detection: the test statistic is the minimum over shifts j of a Levenshtein alignment cost between the
tokens and ξ[j:j+k], with substitution cost log(1 − ξ[·][token]) and insertion/deletion cost γ (0.0 as in
MarkLLM). A permutation test against `n_runs` other keys, each seeded, gives the p-value
(1 + #{null ≤ observed}) / (1 + n_runs): the same text always gets the same p-value. Lower means
watermarked.

Speed: only the columns of ξ for the text's tokens matter, and their log(1 − ξ) is computed once; the alignment is
the compiled one of `edit_alignment.py`.

ξ is drawn with numpy's PCG64 from the key by default. `xi="markllm"` draws MarkLLM's own ξ: its pure-Python
Mersenne twister is MT19937 seeded as `init_genrand(key)`, with rand() = 32-bit output / 2³², which numpy's
MT19937 produces in a fraction of a second, so MarkLLM's EXP-edit texts can be checked. `align="all"`
aligns every token as MarkLLM does; the default aligns the first `sequence_length`. MarkLLM's null keys are
unseeded, so its p-values cannot be reproduced draw for draw; the test statistic can.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterator, Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.base import GenerationBatch
from fwsapp.watermark.edit_alignment import AlignmentDetector, smallest_alignment_cost




@lru_cache(maxsize=2)
def key_sequence(key: int, pseudo_length: int, vocab_size: int, source: str = "pcg64") -> np.ndarray:
    """ξ: pseudo_length × vocab_size uniforms in [0, 1) from the key, as float32."""
    if source == "markllm":
        generator = np.random.MT19937()
        generator.state = np.random.RandomState(key).get_state(legacy=False)  # init_genrand(key), as MarkLLM
        raw = generator.random_raw(pseudo_length * vocab_size)
        return (raw * (1.0 / 2**32)).astype(np.float32).reshape(pseudo_length, vocab_size)
    return np.random.default_rng(key).random((pseudo_length, vocab_size), dtype=np.float32)


class ExpEditLogitsProcessor(LogitsProcessor):
    """Exponential-minimum sampling as a processor: every logit but the chosen token's becomes -inf,
    so whatever sampler runs after it returns that token. Row b reads ξ from its own shift."""

    def __init__(self, xi: np.ndarray, shifts: np.ndarray):
        self.xi = torch.from_numpy(xi)
        self.shifts = torch.from_numpy(np.asarray(shifts))
        self.start: int | None = None  # the padded prompt length, learned on the first step

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.start is None:
            self.start = input_ids.shape[1]
        step = input_ids.shape[1] - self.start
        width = min(scores.shape[-1], self.xi.shape[1])
        probs = torch.softmax(scores[:, :width].float(), dim=-1).cpu()
        rows = self.xi[(self.shifts + step) % self.xi.shape[0], :width]
        # argmax u^(1/p) = argmax log(u)/p; zero-probability tokens can never win.
        keys = torch.where(probs > 0, torch.log(rows) / probs, torch.tensor(float("-inf")))
        chosen = keys.argmax(dim=-1).to(scores.device)
        forced = torch.full_like(scores, float("-inf"))
        forced.scatter_(1, chosen.unsqueeze(1), 0.0)
        return forced


class ExpEdit(AlignmentDetector, info=methods.EXP_EDIT):
    """On the edit-robust skeleton: a token costs log(1 − ξ[r][token]) against row r, and the null keys are fresh
    uniforms, each seeded, for the text's distinct tokens (only those columns matter)."""

    def __init__(self, vocab_size: int, lm=None, **params):
        super().__init__(vocab_size, lm, **params)
        self.xi = key_sequence(self.params["key"], self.params["pseudo_length"], vocab_size, self.params["xi"])

    def logits_processor(self, shifts: Sequence[int] = (0,)) -> LogitsProcessor:
        """A processor reading ξ from the given shift of each row (one shift serves every row)."""
        return ExpEditLogitsProcessor(self.xi, np.asarray(shifts))

    def generation_kwargs(self, batch: GenerationBatch) -> dict:
        """A random, seeded shift per text, as in Kuditipudi et al."""
        shifts = np.random.default_rng(batch.seed).integers(0, self.params["pseudo_length"], batch.size)
        return {"logits_processor": [self.logits_processor(shifts)]}

    def aligned_tokens(self, token_ids: Sequence[int]) -> np.ndarray:
        """The first `sequence_length` tokens in the vocabulary, or every one with align="all"."""
        tokens = super().aligned_tokens(token_ids)
        return tokens if self.params["align"] == "all" else tokens[: self.params["sequence_length"]]

    def substitution_costs(self, tokens: np.ndarray) -> np.ndarray:
        return log_complement(self.xi[:, tokens])

    def null_costs(self, tokens: np.ndarray) -> Iterator[np.ndarray]:
        unique, inverse = np.unique(tokens, return_inverse=True)
        for run in range(self.params["n_runs"]):
            null = np.random.default_rng([self.params["key"], run + 1]).random(
                (self.params["pseudo_length"], len(unique)), dtype=np.float32)
            yield log_complement(null[:, inverse])

    def gap_cost(self) -> float:
        return self.params["gamma"]

    def p_value(self, at_least_as_extreme: int, runs: int) -> float:
        """(1 + #{null ≤ observed}) / (1 + n_runs): the same text always gets the same p-value."""
        return (at_least_as_extreme + 1.0) / (runs + 1.0)


def log_complement(columns: np.ndarray) -> np.ndarray:
    """log(1 − ξ), in float64: EXP-edit's substitution cost."""
    return np.log1p(-columns.astype(np.float64))


def test_statistic(columns: np.ndarray, gamma: float = 0.0) -> float:
    """The smallest alignment cost of ξ's columns for a text's tokens (bench/watermarks.py times it)."""
    return smallest_alignment_cost(log_complement(columns), gamma)
