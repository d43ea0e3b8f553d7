"""Detection analytics: AUROC, ROC curves and TPR at a fixed FPR, respecting each method's score direction.

Scores are oriented before any metric: for methods whose scores are p-values (lower = watermarked) the
score is negated, so "larger means watermarked" holds everywhere below.

TPR at FPR = f: the threshold is set on the negatives (unwatermarked) alone. A text is flagged when its
oriented score is strictly greater than the threshold; the threshold is the smallest negative score that
keeps at most floor(f · N) negatives above it. Ties with that threshold are therefore never flagged, so
the realised FPR never exceeds f (at f = 0 no negative is flagged at all).
"""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve

from fwsapp.sample_size import enough, not_enough

FPR_LEVELS = (0.0, 0.01, 0.05)
Z_95 = NormalDist().inv_cdf(0.975)


def unresolved_fpr_levels(negatives: int) -> list[float]:
    """The nonzero FPR levels that `negatives` texts cannot resolve: below 1/N not even one negative may be
    flagged, so 'TPR at 1 % FPR' on 4 negatives is really TPR at FPR 0."""
    return [level for level in FPR_LEVELS if 0 < level and level * negatives < 1]


def unresolved_fpr_warning(negatives_per_run: dict[str, int]) -> str | None:
    """One warning for the runs whose negatives are too few for some FPR levels, grouped by count; None if none."""
    groups: dict[tuple[int, tuple[float, ...]], list[str]] = {}
    for run, negatives in negatives_per_run.items():
        if levels := unresolved_fpr_levels(negatives):
            groups.setdefault((negatives, tuple(levels)), []).append(run)
    if not groups:
        return None
    parts = [f"{', '.join(runs)}: {negatives} negatives{' each' if len(runs) > 1 else ''}, so TPR@FPR="
             f"{', '.join(f'{level:g}' for level in levels)} {'is' if len(levels) == 1 else 'are'} unresolved"
             for (negatives, levels), runs in sorted(groups.items())]
    return ("Too few negatives to resolve some false-positive rates: at FPR f a run needs at least 1/f negatives, "
            "or no negative may be flagged and the TPR shown is really the TPR at FPR 0. " + "; ".join(parts)
            + ". Generate more samples for resolved rates.")


def negative_kind(available: set[str], method: str) -> str:
    """The text kind a run's negatives are: the method's own, unless only the human reference was scored
    (the paper's logs, MarkLLM's "natural" mode)."""
    from fwsapp.watermark.methods import detection_kinds

    default = detection_kinds(method)[1]
    return "reference" if default not in available and "reference" in available else default


def oriented(scores, direction: str) -> np.ndarray:
    values = np.asarray(scores, dtype=float)
    if direction not in {"higher", "lower"}:
        raise ValueError(f"score direction must be 'higher' or 'lower', not {direction!r}")
    return values if direction == "higher" else -values


def auroc(positives, negatives, direction: str = "higher") -> float | None:
    pos, neg = oriented(positives, direction), oriented(negatives, direction)
    if len(pos) == 0 or len(neg) == 0:
        return None
    labels = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    return float(roc_auc_score(labels, np.r_[pos, neg]))


def roc_points(positives, negatives, direction: str = "higher") -> tuple[np.ndarray, np.ndarray]:
    pos, neg = oriented(positives, direction), oriented(negatives, direction)
    labels = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    fpr, tpr, _ = roc_curve(labels, np.r_[pos, neg])
    return fpr, tpr


def threshold_at_fpr(negatives: np.ndarray, fpr: float) -> float:
    """The oriented threshold that flags at most floor(fpr · N) negatives (strictly greater than it)."""
    ordered = np.sort(negatives)[::-1]
    allowed = math.floor(fpr * len(ordered) + 1e-9)
    return float(ordered[allowed]) if allowed < len(ordered) else -math.inf


def tpr_at_fpr(positives, negatives, fpr: float, direction: str = "higher") -> float | None:
    pos, neg = oriented(positives, direction), oriented(negatives, direction)
    if len(pos) == 0 or len(neg) == 0:
        return None
    threshold = threshold_at_fpr(neg, fpr)
    return float(np.mean(pos > threshold))


def auroc_interval(area: float | None, positives: int, negatives: int, z: float = Z_95) -> tuple[float, float] | None:
    """A 95 % interval for an AUROC (`score_interval`), the same on the Detect page, the Robustness page and in the
    report; None below sample_size's minimum texts on either side."""
    if area is None or not enough("auroc_ci", min(positives, negatives)):
        return None
    return score_interval(area, positives, negatives, z)


def score_interval(area: float, positives: int, negatives: int, z: float = Z_95) -> tuple[float, float]:
    """Newcombe's (2006) score interval for an AUROC (his method 5): the θ whose Hanley and McNeil (1982) variance
    V(θ), with (m + n)/2 texts standing for each side's count, admits the area, (θ − A)² ≤ z²·V(θ). The Wald
    interval A ± z·√V(A) collapses to 1–1 at a perfect separation however few the texts, and reaches past 1 near it;
    this one stays inside [0, 1] and widens as the texts get fewer (an AUROC of 1 on 20 texts a side: 0.90–1).
    SingleCaseES (R) computes it for NAP; no Python library does."""
    from scipy.optimize import brentq

    pairs, half = positives * negatives, (positives + negatives) / 2 - 1

    def excess(theta: float) -> float:
        """mn(2 − θ)(1 + θ)·[(θ − A)² − z²V(θ)]: negative inside the interval, zero at its ends."""
        return (pairs * (theta - area) ** 2 * (2 - theta) * (1 + theta)
                - z * z * theta * (1 - theta) * (2 + half + (1 + 2 * half) * theta * (1 - theta)))

    inside = 1e-9  # an area of 0 or 1 is itself a root: the bound is the other one
    low = brentq(excess, 0.0, min(area, 1 - inside)) if area > 0 else 0.0
    high = brentq(excess, max(area, inside), 1.0) if area < 1 else 1.0
    return float(low), float(high)


def summary(positives, negatives, direction: str = "higher",
            kinds: tuple[str, str] = ("watermarked", "unwatermarked")) -> dict:
    """The report's detection block for one run; its mean scores are named by the text kinds scored (`kinds`:
    positives, negatives), so an imported run's reference texts are not called unwatermarked."""
    pos, neg = np.asarray(positives, float), np.asarray(negatives, float)
    area = auroc(pos, neg, direction)
    return {
        "auroc": area,
        "auroc_ci": auroc_interval(area, len(pos), len(neg)),
        "n": {"positives": len(pos), "negatives": len(neg)},
        # None where the negatives cannot resolve the level (unresolved_fpr_levels): it would be the TPR at FPR 0.
        "tpr_at_fpr": {level_key(level): None if level in unresolved_fpr_levels(len(neg))
                       else tpr_at_fpr(pos, neg, level, direction) for level in FPR_LEVELS},
        "mean_score": {
            kinds[0]: float(pos.mean()) if len(pos) else None,
            kinds[1]: float(neg.mean()) if len(neg) else None,
        },
        "score_direction": direction,
    }


def level_key(level: float) -> str:
    return "0" if level == 0 else f"{level:g}"


def interval_label(block: dict) -> str:
    """A detection block's AUROC interval as the page and the report show it."""
    smaller = min(block["n"]["positives"], block["n"]["negatives"])
    if not enough("auroc_ci", smaller):
        return not_enough(smaller)
    bounds = block["auroc_ci"]
    return f"{bounds[0]:.3f}–{bounds[1]:.3f}" if bounds else "–"


def tpr_label(block: dict, key: str) -> float | str | None:
    """A detection block's TPR at one FPR level as the page and the report show it: a rate, so below the small-sample
    rule's minimum of texts on either side (the positives it counts, the negatives that set its threshold) it says so,
    as the Robustness page's TPRs do; and a level the negatives cannot resolve is never shown."""
    return tpr_missing(float(key), block["n"]["positives"], block["n"]["negatives"]) or block["tpr_at_fpr"][key]


def tpr_missing(level: float, positives: int, negatives: int) -> str | None:
    """Why a TPR at FPR `level` is not shown, or None: negatives too few to resolve the level (8 flag none at 1 %, so
    that TPR is the TPR at 0), or fewer texts on either side than the small-sample rule allows. Table 1, the Detect
    page and the robustness tables all read it."""
    if level in unresolved_fpr_levels(negatives):
        return not_enough(negatives)
    smaller = min(positives, negatives)
    return None if enough("rate", smaller) else not_enough(smaller)
