"""What a watermark is expected to gain at each token, from the model's next-token distribution there.

A watermark can only move a choice the model had: where the next token is all but certain, no keyed draw changes it
and the token carries no evidence. Two closed forms turn a distribution into the statistic a detector expects after T
tokens, in the scale the length curves keep (fwsapp.detection.length), so a predicted curve is read at the same
threshold as a measured one:

- **green list** (KGW, Unigram): Kirchenbauer et al. (2023), Theorem 4.2. At a position whose distribution has spike
  entropy S = Σ_v p_v / (1 + ζ p_v), with ζ = (1 − γ)(e^δ − 1) / (1 + (e^δ − 1)γ), the biased token is green with
  probability at least γ e^δ S / (1 + (e^δ − 1)γ). The expected green count after T tokens gives the expected z. It
  is a lower bound, so the predicted length is an upper bound.
- **Gumbel** (Aaronson's exponential sampling, vLLM's Gumbel): the token chosen as argmax r_v^(1/p_v) has
  r = M^p, with M uniform and p its probability, so its evidence −log(1 − r) has expectation ψ(1 + 1/p) + γ_E (1 for
  p = 1, the null's mean: a certain token tells nothing). The sum after T tokens is read against the null's Gamma(T, 1),
  as both detectors compute the p-value.

Each needs one value per token from teacher forcing (fwsapp.models.teacher_forcing): the spike entropy at the
watermark's modulus, or the chosen token's probability, both of the distribution the token was sampled from (at the
run's temperature; top-k and top-p truncation, not applied here, would make the prediction longer than needed).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

SPIKE_ENTROPY = "spike entropy"
CHOSEN_PROBABILITY = "chosen token's probability"


def spike_modulus(gamma: float, delta: float) -> float:
    """ζ of the spike entropy for a green share γ and bias δ (Kirchenbauer et al. 2023, Theorem 4.2)."""
    alpha = math.exp(delta)
    return (1 - gamma) * (alpha - 1) / (1 + (alpha - 1) * gamma)


def green_list_curve(params: dict, spike: np.ndarray) -> np.ndarray:
    """The expected z after each token, from each token's spike entropy at `spike_modulus`."""
    gamma, alpha = params["gamma"], math.exp(params["delta"])
    green = gamma * alpha * np.asarray(spike, dtype=float) / (1 + (alpha - 1) * gamma)
    count = np.arange(1, green.size + 1)
    return (np.cumsum(green) - gamma * count) / np.sqrt(count * gamma * (1 - gamma))


def gumbel_curve(params: dict, chosen: np.ndarray) -> np.ndarray:
    """The p-value of the expected evidence sum after each token, from each chosen token's probability."""
    from scipy import special  # here: the registry that names this curve loads without scipy

    probability = np.clip(np.asarray(chosen, dtype=float), 1e-300, 1.0)
    evidence = special.digamma(1 + 1 / probability) + np.euler_gamma
    count = np.arange(1, evidence.size + 1)
    return special.gammaincc(count, np.cumsum(evidence))


@dataclass(frozen=True)
class ExpectedEvidence:
    """A closed form of a method's expected statistic: the per-token value it needs from the model (`statistic`, with
    the spike entropy's modulus from the parameters where it is one), and the curve it makes of them."""

    name: str
    statistic: str
    curve: Callable[[dict, np.ndarray], np.ndarray]
    # The score it predicts ("z" or "p") and the parameters its curve reads: a method declaring it must have both.
    score_label: str
    needs_params: tuple[str, ...] = ()
    modulus: Callable[[dict], float] | None = None


GREEN_LIST = ExpectedEvidence("green-list spike-entropy bound (Kirchenbauer et al. 2023, Thm 4.2)", SPIKE_ENTROPY,
                              green_list_curve, "z", ("gamma", "delta"),
                              lambda params: spike_modulus(params["gamma"], params["delta"]))
GUMBEL = ExpectedEvidence("Gumbel expectation ψ(1 + 1/p) + γ_E per token", CHOSEN_PROBABILITY, gumbel_curve, "p")
