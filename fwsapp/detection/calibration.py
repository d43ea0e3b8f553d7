"""Calibrated thresholds: what a detector's threshold costs in false positives on a run's own negatives.

A method's theoretical threshold (z > 4, p < α) promises a false-positive rate under its null hypothesis: every token
independently green with probability γ, or a uniform p-value. Real text breaks that assumption (repeated phrases,
low-entropy spans, a tokenizer that splits differently), so the rate achieved on human or unwatermarked text can be
far from the nominal one. Here, for each run:

- the **achieved FPR** of the theoretical threshold on the run's negatives, with its exact (Clopper-Pearson)
  interval, beside the **nominal** one;
- the **empirical threshold** for a target FPR: the score the negatives pass at that rate, with a bootstrap 95 %
  interval, overall and per length bucket (tokens scored). A 1 % threshold needs 100 negatives in its bucket
  (`sample_size`); below that it is "not enough data (n = …)".

A green-list method's p-value (`evidence.green_p_value`) is the exact binomial tail where few tokens are scored, so every
method can be held to the same α.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from fwsapp import percent
from fwsapp.watermark import methods
from fwsapp.detection.roc import oriented, threshold_at_fpr
from fwsapp.sample_size import not_enough

# Token counts that bound the length buckets: (0, 32], (32, 64], (64, 128], (128, 256], (256, ∞).
LENGTH_EDGES = (32, 64, 128, 256)
BOOTSTRAP_RESAMPLES = 1000
CALIBRATED_LEVELS = (0.01, 0.05)


def nominal_fpr(info: methods.MethodInfo, threshold: float) -> float | None:
    """The false-positive rate a theoretical threshold promises: the normal tail above a z threshold, the α of a
    p-value threshold; None where the score is no standard test's (SynthID's mean g-value, DiPmark's green share,
    whose spread without a watermark is √(γ(1 − γ)), not 1)."""
    if not info.standard_score:
        return None
    return float(threshold) if info.score_direction == "lower" else float(stats.norm.sf(threshold))


def nominal_threshold(info: methods.MethodInfo, fpr: float) -> float | None:
    """The theoretical threshold whose nominal false-positive rate is `fpr` (z > Φ⁻¹(1 − fpr), p < fpr); None for a
    score without one."""
    if not info.standard_score:
        return None
    return float(fpr) if info.score_direction == "lower" else float(stats.norm.isf(fpr))


@dataclass(frozen=True)
class Achieved:
    """The share of negatives a threshold calls watermarked: `rate` = `false`/`negatives`, with its exact interval."""

    rate: float
    false: int
    negatives: int
    interval: tuple[float, float]


def achieved_fpr(negatives, threshold: float, direction: str = "higher", inclusive: bool = False) -> Achieved | None:
    """How many of the negatives the theoretical threshold calls watermarked (`methods.beyond_threshold`); None
    without negatives."""
    values = np.asarray(negatives, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    flagged = int(methods.beyond_threshold(values, threshold, direction, inclusive).sum())
    interval = stats.binomtest(flagged, values.size).proportion_ci(confidence_level=0.95, method="exact")
    return Achieved(flagged / values.size, flagged, int(values.size), (float(interval.low), float(interval.high)))


@dataclass(frozen=True)
class Calibrated:
    """The threshold that holds `fpr` on the negatives it came from, in the method's own score units, with a
    bootstrap 95 % interval."""

    fpr: float
    threshold: float
    interval: tuple[float, float]
    negatives: int


def minimum_negatives(fpr: float) -> int:
    """Negatives an empirical threshold at `fpr` needs: one false positive's worth at that rate (100 for 1 %)."""
    return math.ceil(1 / fpr - 1e-9)


def empirical_threshold(negatives, fpr: float, direction: str = "higher", resamples: int = BOOTSTRAP_RESAMPLES,
                        seed: int = 0) -> Calibrated | None:
    """The score above which (below, for a lower-is-watermarked method) at most a share `fpr` of the negatives fall,
    by the rule TPR at FPR uses everywhere (`roc.threshold_at_fpr`): 2 of 200 negatives above it at 1 %, where their
    (1 − fpr) quantile left 1, and none of 100. None when there are fewer than `minimum_negatives(fpr)`."""
    values = oriented(np.asarray(negatives, dtype=float), direction)
    values = values[~np.isnan(values)]
    if not 0 < fpr < 1 or values.size < minimum_negatives(fpr):
        return None
    rng = np.random.default_rng(seed)
    resampled = [threshold_at_fpr(rng.choice(values, values.size), fpr) for _ in range(resamples)]
    low, high = np.quantile(resampled, [0.025, 0.975])
    sign = -1.0 if direction == "lower" else 1.0  # back from the oriented scale to the method's own
    bounds = sorted((sign * float(low), sign * float(high)))
    return Calibrated(fpr, sign * threshold_at_fpr(values, fpr), (bounds[0], bounds[1]), int(values.size))


def length_bucket(tokens: int) -> str:
    """The label of the length bucket `tokens` scored tokens fall in."""
    lower = 0
    for edge in LENGTH_EDGES:
        if tokens <= edge:
            return f"{lower + 1}–{edge}"
        lower = edge
    return f"> {LENGTH_EDGES[-1]}"


def bucket_order() -> list[str]:
    return [length_bucket(edge) for edge in LENGTH_EDGES] + [length_bucket(LENGTH_EDGES[-1] + 1)]


def _shown(calibrated: Calibrated | None, negatives: int) -> str:
    if calibrated is None:
        return not_enough(negatives)
    low, high = calibrated.interval
    return f"{_significant(calibrated.threshold)} ({_significant(low)}–{_significant(high)})"


def _significant(value: float) -> str:
    """Three significant digits, trailing zeros kept, so that a column of thresholds reads alike ("1.70" beside
    "2.84", not "1.7"); a p-value threshold in its own scale ("0.000123")."""
    return f"{value:#.3g}".rstrip(".")


def run_calibration(method: str, params: dict, negatives: pd.DataFrame, label: str) -> list[dict]:
    """A run's calibration rows: all its negatives, then, where their lengths differ, each length bucket that has
    some. `negatives` holds the negative texts' `score` and `num_tokens_scored` (NaN for imported scores, which then
    have no buckets)."""
    info = methods.info(method)
    threshold = info.threshold(params)
    nominal = nominal_fpr(info, threshold)
    direction = info.score_direction
    groups = [("all", negatives)]
    buckets = negatives.num_tokens_scored.dropna().astype(int).map(length_bucket)
    if buckets.nunique() > 1:  # one bucket would repeat the "all" row
        groups += [(bucket, negatives.loc[buckets.index[buckets == bucket]]) for bucket in bucket_order()
                   if (buckets == bucket).any()]
    rows = []
    for bucket, group in groups:
        scores = group.score.dropna().to_numpy(dtype=float)
        achieved = achieved_fpr(scores, threshold, direction, info.threshold_inclusive)
        rows.append({
            "run": label, "tokens scored": bucket, "negatives": int(scores.size),
            "theoretical threshold": info.verdict_rule(params),
            "nominal FPR": nominal,
            "achieved FPR": achieved.rate if achieved else None,
            "achieved FPR 95% CI": f"{achieved.interval[0]:.3f}–{achieved.interval[1]:.3f}" if achieved else None,
            "false positives": f"{achieved.false} of {achieved.negatives}" if achieved else None,
            **{f"threshold at {percent(level)} FPR": _shown(empirical_threshold(scores, level, direction), int(scores.size))
               for level in CALIBRATED_LEVELS},
        })
    return rows
