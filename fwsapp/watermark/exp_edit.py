"""EXP-edit (Kuditipudi et al., 2024): distortion-free exponential-minimum sampling with an edit-robust test.

Generation: a key gives a sequence ξ of `pseudo_length` uniform vectors over the vocabulary. Each text
starts at a random shift s; its token i is argmax_v ξ[s + i][v]^(1/p(v)) (the exponential-minimum trick:
an exact sample from p, made deterministic by the key).

Detection: the test statistic is the minimum over shifts j of a Levenshtein alignment cost between the
tokens and ξ[j:j+k], with substitution cost log(1 − ξ[·][token]) and insertion/deletion cost γ (0.0 as in
MarkLLM). A permutation test against `n_runs` other keys, each seeded, gives the p-value
(1 + #{null ≤ observed}) / (1 + n_runs): the same text always gets the same p-value. Lower means
watermarked.

Speed: only the columns of ξ for the text's tokens matter, and their log(1 − ξ) is computed once. The
recurrence is compiled with numba and runs its shifts in parallel; it equals the plain recurrence
exactly (tests/test_watermarks.py keeps the reference). MarkLLM's Cython loop takes ~30 s per text.

ξ is drawn with numpy's PCG64 from the key by default. `xi="markllm"` draws MarkLLM's own ξ: its pure-Python
Mersenne twister is MT19937 seeded as `init_genrand(key)`, with rand() = 32-bit output / 2³², which numpy's
MT19937 produces in a fraction of a second, so MarkLLM's EXP-edit texts can be checked. `align="all"`
aligns every token as MarkLLM does; the default aligns the first `sequence_length`. MarkLLM's null keys are
unseeded, so its p-values cannot be reproduced draw for draw; the test statistic can.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numba
import numpy as np
import torch
from transformers import LogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.base import Detection, GenerationBatch, Watermark




@lru_cache(maxsize=2)
def key_sequence(key: int, pseudo_length: int, vocab_size: int, source: str = "pcg64") -> np.ndarray:
    """ξ: pseudo_length × vocab_size uniforms in [0, 1) from the key, as float32."""
    if source == "markllm":
        generator = np.random.MT19937()
        generator.state = np.random.RandomState(key).get_state(legacy=False)  # init_genrand(key), as MarkLLM
        raw = generator.random_raw(pseudo_length * vocab_size)
        return (raw * (1.0 / 2**32)).astype(np.float32).reshape(pseudo_length, vocab_size)
    return np.random.default_rng(key).random((pseudo_length, vocab_size), dtype=np.float32)


@numba.njit(parallel=True, cache=True)
def _alignment_costs(logs: np.ndarray, gamma: float) -> np.ndarray:
    n, k = logs.shape
    costs = np.empty(n)
    for shift in numba.prange(n):  # shifts are independent: one per core
        previous = np.empty(k + 1)
        current = np.empty(k + 1)
        for column in range(k + 1):
            previous[column] = column * gamma
        for i in range(1, k + 1):
            current[0] = i * gamma
            for j in range(1, k + 1):
                best = previous[j] + gamma
                if current[j - 1] + gamma < best:
                    best = current[j - 1] + gamma
                substitution = previous[j - 1] + logs[(shift + j - 1) % n, i - 1]
                if substitution < best:
                    best = substitution
                current[j] = best
            previous, current = current, previous
        costs[shift] = previous[k]
    return costs


def alignment_costs(columns: np.ndarray, gamma: float = 0.0) -> np.ndarray:
    """Levenshtein alignment cost for every shift at once.

    `columns[r, i]` is ξ[r][token_i] (r over the pseudo length n, i over the k tokens). For each shift j
    the text is aligned to rows j, j+1, …, j+k−1 (mod n). The recurrence is MarkLLM's, compiled with numba
    and run in parallel over shifts, with log(1 − ξ) computed once per (row, token). Returns the n costs.
    """
    return _alignment_costs(np.log1p(-columns.astype(np.float64)), float(gamma))


def test_statistic(columns: np.ndarray, gamma: float = 0.0) -> float:
    return float(alignment_costs(columns, gamma).min())


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


class ExpEdit(Watermark, info=methods.EXP_EDIT):

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

    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        tokens = [token for token in token_ids if token < self.vocab_size]
        tokens = np.asarray(tokens if self.params["align"] == "all" else tokens[: self.params["sequence_length"]])
        if len(tokens) == 0:
            return Detection(score=1.0, p=1.0, num_tokens_scored=0)
        gamma = self.params["gamma"]
        observed = test_statistic(self.xi[:, tokens], gamma)
        unique, inverse = np.unique(tokens, return_inverse=True)
        at_least_as_extreme = 0
        for run in range(self.params["n_runs"]):
            # Null keys: fresh uniforms for the text's distinct tokens (only those columns matter).
            null = np.random.default_rng([self.params["key"], run + 1]).random(
                (self.params["pseudo_length"], len(unique)), dtype=np.float32)
            at_least_as_extreme += test_statistic(null[:, inverse], gamma) <= observed
        p_value = (at_least_as_extreme + 1.0) / (self.params["n_runs"] + 1.0)
        return Detection(score=p_value, p=p_value, num_tokens_scored=len(tokens))

