"""Minimum sample sizes: one rule for every statistic the app and the report show.

Below its minimum a statistic is not shown as a number but as "not enough data (n = …)": a Pearson r of 0.994 from
two items, a rule precision from two verdicts or a TPR at 1 % FPR from four negatives read as findings when they are
noise. The minimums are conventions, chosen to keep the worst cases out, not power calculations:
"""
from __future__ import annotations

MINIMUM = {
    "pearson": 10,       # pairs; below this r's 95 % interval spans most of [-1, 1]
    "spearman": 10,      # pairs, as for Pearson's r
    "friedman": 10,      # blocks (ratings of a text): the χ² approximation is poor below
    "krippendorff": 5,   # texts rated by two raters or more
    "precision": 10,     # entities the rule flagged that clinicians judged
    "auroc_ci": 10,      # texts on each side
    "rate": 10,          # texts behind a TPR or FPR at one length (fwsapp.detection.length, fwsapp.detection.strength)
    "bootstrap": 10,     # prompts behind a paired interval (fwsapp.results.paired); for a share, those with a mention on
                         # the side with fewer: below this BCa's acceleration and tails rest on a handful of values, and
                         # resamples without a mention leave the share undefined
}


def enough(statistic: str, n: int) -> bool:
    return n >= MINIMUM[statistic]


def not_enough(n: int) -> str:
    return f"not enough data (n = {n})"


def shown(value: float | None, statistic: str, n: int, digits: int = 3):
    """The value rounded for display, or why there is none."""
    if not enough(statistic, n):
        return not_enough(n)
    return "–" if value is None else round(float(value), digits)
