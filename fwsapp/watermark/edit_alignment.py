"""Kuditipudi et al.'s (2024) edit-robust test, and the detector skeleton of the methods that use it (EXP-edit,
ITS-Edit).

Their watermark is no per-token draw seeded by the tokens before: a key is a sequence ξ of `pseudo_length` rows, and a
text, started at an unknown shift, follows it row after row. So the text's tokens are aligned with every shift of ξ by a
Levenshtein cost (a substitution costs what the method says a token costs against a row, an insertion or deletion a
fixed gap), and the smallest cost is the test statistic; edits to the text move it little. Its p-value is a permutation
test: the same statistic under `n_runs` null keys, the share that come out at least as small.

The base owns the tokens aligned, the empty text, the null loop and the Detection; a method supplies:
- `substitution_costs(tokens)`: the [pseudo_length, k] cost of each row of its key against each token;
- `null_costs(tokens)`: the same under each of its `n_runs` null keys, in order (its null keys' draw);
- `gap_cost()` and `p_value(at_least_as_extreme, runs)`.

The recurrence is compiled with numba and runs its shifts in parallel; it equals the plain recurrence exactly
(tests/test_watermarks.py keeps the reference). MarkLLM's Cython loop takes ~30 s per text.
"""
from __future__ import annotations

from abc import abstractmethod
from typing import Iterator, Sequence

import numba
import numpy as np

from fwsapp.watermark.base import Detection, Watermark


@numba.njit(parallel=True, cache=True)
def _alignment_costs(costs: np.ndarray, gap: float) -> np.ndarray:
    n, k = costs.shape
    smallest = np.empty(n)
    for shift in numba.prange(n):  # shifts are independent: one per core
        previous = np.empty(k + 1)
        current = np.empty(k + 1)
        for column in range(k + 1):
            previous[column] = column * gap
        for i in range(1, k + 1):
            current[0] = i * gap
            for j in range(1, k + 1):
                best = previous[j] + gap
                if current[j - 1] + gap < best:
                    best = current[j - 1] + gap
                substitution = previous[j - 1] + costs[(shift + j - 1) % n, i - 1]
                if substitution < best:
                    best = substitution
                current[j] = best
            previous, current = current, previous
        smallest[shift] = previous[k]
    return smallest


def alignment_costs(costs: np.ndarray, gap: float = 0.0) -> np.ndarray:
    """The Levenshtein alignment cost of the k tokens against every shift j of the key's n rows: `costs[r, i]` is what
    token i costs against row r, and the text is aligned to rows j, j+1, …, j+k−1 (mod n), as MarkLLM's recurrence
    has it. Returns the n costs."""
    return _alignment_costs(np.ascontiguousarray(costs, dtype=np.float64), float(gap))


def smallest_alignment_cost(costs: np.ndarray, gap: float = 0.0) -> float:
    """The test statistic: the smallest alignment cost over the shifts."""
    return float(alignment_costs(costs, gap).min())


class AlignmentDetector(Watermark):
    """The edit-robust test's detector: the smallest alignment cost of the text against the key, and its p-value against
    null keys."""

    def aligned_tokens(self, token_ids: Sequence[int]) -> np.ndarray:
        """The tokens aligned: those in the vocabulary."""
        return np.asarray([int(token) for token in token_ids if 0 <= token < self.vocab_size], dtype=np.int64)

    @abstractmethod
    def substitution_costs(self, tokens: np.ndarray) -> np.ndarray:
        """[pseudo_length, k]: what each token costs against each row of the key."""

    @abstractmethod
    def null_costs(self, tokens: np.ndarray) -> Iterator[np.ndarray]:
        """The substitution costs under each null key, in the order they are drawn."""

    @abstractmethod
    def gap_cost(self) -> float:
        """What an inserted or deleted token costs."""

    @abstractmethod
    def p_value(self, at_least_as_extreme: int, runs: int) -> float:
        """The permutation test's p-value from the null keys whose statistic came out at least as small."""

    def statistic(self, costs: np.ndarray) -> float:
        return smallest_alignment_cost(costs, self.gap_cost())

    def smallest_p_value(self) -> float:
        """What a text that beats every null key gets: EXP-edit's (1 + 0) / (1 + n_runs), 0.0099 at its 100 keys."""
        return self.p_value(0, self.params["n_runs"])

    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        tokens = self.aligned_tokens(token_ids)
        if len(tokens) == 0:
            return Detection(score=1.0, p=1.0, num_tokens_scored=0)
        observed = self.statistic(self.substitution_costs(tokens))
        at_least_as_extreme = sum(self.statistic(costs) <= observed for costs in self.null_costs(tokens))
        p_value = self.p_value(at_least_as_extreme, self.params["n_runs"])
        return Detection(score=p_value, p=p_value, statistic=observed, num_tokens_scored=len(tokens))
