"""Unbiased watermark (Hu et al., 2024): γ-reweighting, and a likelihood-ratio detector that reads the model.

Generation: the last `prefix_length` tokens and the key seed a permutation (SHA-256, as DiPmark's); along it the
cumulative probability F becomes max(2F − 1, 0), which doubles the mass of the tokens late in the permutation
and removes it from the early ones. Over keys the distribution is the model's (the defining property, tested in
tests/test_watermarks.py). This is DiPmark's reweighting at α = 0.5.

Detection: the model gives p at each position and the key gives the reweighted q. Each token's log-likelihood
ratio log q/p is clipped to the range a maximin-robust test allows (Hu et al.'s "maximin variant": the worst case
over distributions within total variation d of p, for d on a grid of n_grid + 1 points); the best grid point's
sum S bounds the p-value by n_grid · e^(−S) (their Theorem 9). The clipping follows MarkLLM's current Unbiased
(`_get_max_llr`); its key is drawn at random per run, fwsapp's from `key`, so runs can be detected again.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from transformers import LogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.detector import TokenDetector
from fwsapp.watermark.dipmark import DiPKey, DiPLogitsProcessor, reweighted_probs

GAMMA_REWEIGHT = 0.5  # DiPmark's α at which its reweighting is Hu et al.'s γ-reweight


def _without_nan(values: torch.Tensor) -> torch.Tensor:
    return torch.nan_to_num(values, nan=0.0, posinf=math.inf, neginf=-math.inf)


def max_llr(p_logs: torch.Tensor, q_logs: torch.Tensor, queries: list[tuple[float, float]]) -> torch.Tensor:
    """Per row and query (d_p, d_q) in log space: the largest log-ratio a maximin test may credit (positions × queries).
    Tokens sorted by log q/p, it is the log-ratio of the tails where moving mass d_q out of q and d_p into p first
    makes the tail's ratio exceed the next token's own."""
    llr = _without_nan(q_logs - p_logs)
    order = torch.argsort(llr, dim=-1, descending=True)
    p_sorted, q_sorted = p_logs.gather(-1, order), q_logs.gather(-1, order)
    llr = _without_nan(q_sorted - p_sorted)
    q_tails, p_tails = torch.logcumsumexp(q_sorted, dim=-1), torch.logcumsumexp(p_sorted, dim=-1)
    found = []
    for d_p, d_q in queries:
        # A mass of 0 (log −inf) moves nothing: the tails as they are, the same values the formulas give, computed
        # once, not per query (one side of every query is 0, the detector's two calls each hold one side there).
        q_moved = q_tails if d_q == -math.inf else torch.where(
            q_tails <= d_q, torch.tensor(-math.inf), q_tails + torch.log(-torch.expm1(d_q - q_tails)))
        p_moved = p_tails if d_p == -math.inf else torch.logaddexp(p_tails, torch.tensor(d_p))
        moved = F.pad(_without_nan(q_moved - p_moved), (1, 0), value=-math.inf)
        crossing = llr < moved[..., :-1]
        cut = torch.where(crossing.any(-1), crossing.int().argmax(-1), torch.tensor(moved.shape[-1] - 1))
        found.append(moved.gather(-1, cut.unsqueeze(-1)))
    return torch.cat(found, dim=-1)


def grid_queries(n_grid: int) -> list[tuple[float, float]]:
    """(log d_p, log d_q) for d_p = 0 and d_q on the grid 0, 1/n, …, 1."""
    with np.errstate(divide="ignore"):
        return [(-math.inf, float(np.log(step / n_grid))) for step in range(n_grid + 1)]


def maximin_scores(p_logs: torch.Tensor, q_logs: torch.Tensor, tokens: torch.Tensor, n_grid: int) -> torch.Tensor:
    """Each token's log-likelihood ratio clipped to the maximin range, per grid point (tokens × grid)."""
    queries = grid_queries(n_grid)
    upper = max_llr(p_logs, q_logs, queries)
    lower = -max_llr(q_logs, p_logs, [(d_q, d_p) for d_p, d_q in queries])
    trivial = upper < lower
    upper, lower = upper.masked_fill(trivial, 0.0), lower.masked_fill(trivial, 0.0)
    observed = _without_nan(q_logs - p_logs).gather(-1, tokens[:, None])
    return torch.maximum(torch.minimum(observed, upper), lower)


class Unbiased(TokenDetector, info=methods.UNBIASED):
    """On the skeleton: a token's evidence is its log-likelihood ratio clipped at each grid point, read from the model's
    distribution before it and the key's reweighting of it; the test takes the grid point whose sum is largest."""

    reads_model_rows = True
    flag_above = 0.0  # a token the watermark made likelier

    def __init__(self, vocab_size: int, lm=None, **params):
        super().__init__(vocab_size, lm, **params)
        p = self.params
        self.key = DiPKey(p["key"], p["prefix_length"], vocab_size, p["rng"], p["cuda_blocks"])

    def logits_processor(self) -> LogitsProcessor:
        return DiPLogitsProcessor(self.key, GAMMA_REWEIGHT)

    @staticmethod
    def reweight(logits: torch.Tensor, permutations: torch.Tensor) -> torch.Tensor:
        """The γ-reweighted log-probabilities of each row along its permutation (−inf where no mass is left)."""
        return torch.log(reweighted_probs(logits, permutations, GAMMA_REWEIGHT))

    def scores_token(self, token: int) -> bool:
        return 0 <= token < self.vocab_size

    def token_evidence(self, contexts: np.ndarray, tokens: np.ndarray, rows: torch.Tensor) -> np.ndarray:
        """Per token and grid point (tokens × grid), the clipped log-likelihood ratio of the reweighted distribution to
        the model's."""
        p_logs = torch.log_softmax(rows[:, :self.vocab_size], dim=-1)
        permutations = torch.stack([self.key.permutation(context.tolist()) for context in contexts])
        q_logs = self.reweight(p_logs, permutations)
        return maximin_scores(p_logs, q_logs, torch.from_numpy(tokens), self.params["n_grid"]).numpy()

    def best_grid_point(self, evidence: np.ndarray) -> int:
        return int(np.argmax(evidence.sum(0))) if len(evidence) else 0

    def per_token(self, evidence: np.ndarray) -> np.ndarray:
        return evidence[:, self.best_grid_point(evidence)] if len(evidence) else evidence

    def statistic(self, evidence: np.ndarray, weights: np.ndarray | None = None) -> float:
        """The largest sum over the grid points."""
        return float(evidence.sum(0)[self.best_grid_point(evidence)]) if len(evidence) else 0.0

    def p_value(self, statistic: float, scored: int) -> float:
        """Hu et al.'s Theorem 9: n_grid · e^(−S), at most 1."""
        return min(1.0, self.params["n_grid"] * math.exp(-statistic)) if scored else 1.0

    def token_values(self, evidence: np.ndarray) -> np.ndarray:
        """The ratio's logistic: 0.5 where the watermark left the token's probability as it was."""
        return 1 / (1 + np.exp(-evidence))
