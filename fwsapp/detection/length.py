"""How long must a text be? A detector's test statistic after every token, the tokens a text needs to be detected, TPR
against length, and windowed detection (lm-watermarking's WinMax).

Most detectors add up per-token evidence, so the statistic of a text's first T tokens follows from running sums of what
the detector already produced, in one pass: no re-tokenising, no second detection. Each method's detector class declares
the form of its evidence (`fwsapp.watermark.evidence`: green counts, weighted green counts, DiPmark's permutation
count, SynthID's mean g, EXP's exponential sum), read here through `MethodInfo.evidence`.

The statistic is the method's score where that is a z-score or a p-value, and otherwise the score standardised to a z
under the null (DiPmark's score over √(γ(1 − γ)); SynthID's mean g as (ḡ − ½) / (½ / √(depth·N)), the z its detector
reports): a mean g of 0.52 is strong evidence after 500 tokens and none after 5, so only a standardised statistic has a
threshold that means the same at every length. Verdicts at every length use the nominal threshold for the chosen
false-positive rate (z > Φ⁻¹(1 − f), p < f); the tables state the rate it achieves on the run's negatives.

The statistic at T is the one the T-token prefix gets when detected on its own (tests/test_length.py checks it for
every method): each detector here is causal, a token's colour depending only on the tokens before it. A method with no
such evidence (EXP-edit, ITS-edit, Unbiased: an alignment, a maximin over the whole text) gets its statistic at T by
detecting the prefix again, at LENGTH_GRID only.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from fwsapp import percent
from fwsapp.watermark import methods
from fwsapp.watermark.evidence import Evidence
from fwsapp.detection.calibration import nominal_threshold
from fwsapp.detection.roc import negative_kind, oriented, threshold_at_fpr
from fwsapp.store import detection_record
from fwsapp.sample_size import enough

# The lengths at which TPR is tabulated, and at which a method without per-token evidence is detected again.
LENGTH_GRID = (16, 32, 64, 128, 256, 512)
DEFAULT_FPR = 0.01  # the false-positive rate of verdicts by length unless one is chosen
MAX_WINDOW = 100_000  # tokens: longer than any text here, and a 32-bit column stores it
NULL_DRAWS = 2000  # unwatermarked texts simulated for a WinMax threshold: p-values down to 1/2001


def _evidence(method: str) -> Evidence | None:
    return methods.info(method).evidence


def prefix_statistics(method: str, params: dict, detection) -> list[float] | None:
    """The statistic of the text's first T tokens for T = 1 … its length, from one detection's per-token evidence;
    None for a method without any (its prefixes are detected again: `grid_lengths`)."""
    evidence = _evidence(method)
    if evidence is None or not detection.token_flags:
        return None
    full = {**methods.info(method).defaults, **params}
    return evidence.statistics(evidence.arrays(detection, full), full).astype(float).tolist()


# A text of fewer token ids than this (an empty or one-token answer) is not scorable: it is stored without a score,
# counted as such, and left out of detection rates, never scored as a negative.
MIN_TOKENS = 2


def unscorable_record(sample_idx: int, text_kind: str, detector: str) -> dict:
    """The detections-table row of a text too short to score (`MIN_TOKENS`)."""
    return detection_record(sample_idx, text_kind, detector, None, num_tokens_scored=0)


def detected_record(sample_idx: int, text_kind: str, detector: str, detection, params: dict) -> dict:
    """The detections-table row of a detector's `Detection` of one text (`params`: the detector's), with its score
    after every token where the method's evidence gives it."""
    return detection_record(sample_idx, text_kind, detector, detection.score, z=detection.z, p=detection.p,
                            num_tokens_scored=detection.num_tokens_scored,
                            prefix_statistics=prefix_statistics(detector, params, detection))


def statistic(method: str, params: dict, detection) -> float:
    """One detection's statistic, as the curves hold it: its score, standardised where the score is not a z or a p."""
    evidence = _evidence(method)
    if evidence is None or methods.info(method).standard_score:
        return detection.score
    full = {**methods.info(method).defaults, **params}
    return float(evidence.statistics(evidence.arrays(detection, full), full)[-1]) if detection.token_flags else 0.0


def grid_lengths(tokens: int) -> list[int]:
    """The prefix lengths detected again for a method without per-token evidence: LENGTH_GRID below the text's own."""
    return [length for length in LENGTH_GRID if length < tokens]


def grid_curve(scores_at: dict[int, float], tokens: int) -> list[float]:
    """A curve known at some lengths only (`scores_at`: length -> score), NaN elsewhere, as the store keeps it."""
    curve = [math.nan] * tokens
    for length, score in scores_at.items():
        curve[length - 1] = score
    return curve


# -- verdicts at every length ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LengthThreshold:
    """The fixed threshold verdicts at every length use, in the method's own units, and where it comes from."""

    value: float
    direction: str
    nominal: bool  # True: the nominal threshold for the FPR; False: the method's own (no nominal one exists)
    label: str
    inclusive: bool = False  # a score at the threshold passes, as the method decides (`MethodInfo.threshold_inclusive`)


def length_threshold(method: str, params: dict, fpr: float) -> LengthThreshold:
    info = methods.info(method)
    nominal = nominal_threshold(info, fpr)
    if nominal is not None:
        sign = methods.comparison(info.score_direction, info.threshold_inclusive)
        return LengthThreshold(nominal, info.score_direction, True,
                               f"{info.score_label} {sign} {nominal:.3g} (nominal {percent(fpr)} FPR)",
                               info.threshold_inclusive)
    if info.evidence:  # the curves hold the score standardised to a z
        return LengthThreshold(float(norm.isf(fpr)), "higher", True,
                               f"z > {norm.isf(fpr):.3g} ({info.score_label} standardised; nominal {percent(fpr)} FPR)")
    return LengthThreshold(info.threshold(params), info.score_direction, False,
                           f"{info.verdict_rule(params)} ({method}'s own threshold: its score has no nominal FPR)",
                           info.threshold_inclusive)


def detected(curve, threshold: LengthThreshold) -> np.ndarray:
    """Per length, whether the score there passes the threshold; NaN (a length not scored) stays False."""
    values = np.asarray(curve, dtype=float)
    with np.errstate(invalid="ignore"):
        return methods.beyond_threshold(values, threshold.value, threshold.direction, threshold.inclusive)


def tokens_to_detect(curve, threshold: LengthThreshold) -> float:
    """The smallest T from which the text stays detected (MarkMyWords' "size"): every scored length from T on passes.
    A text detected early that falls below the threshold later counts from where it is detected for good; one not
    detected at its full length is never detected: infinity. Curves known at some lengths only answer at those."""
    values = stored_curve(curve)
    known = np.flatnonzero(~np.isnan(values))
    if known.size == 0:
        return math.inf
    passes = detected(values[known], threshold)
    if not passes[-1]:
        return math.inf
    failing = np.flatnonzero(~passes)
    return float(known[failing[-1] + 1 if failing.size else 0] + 1)


def score_at(curve, length: int) -> float:
    """The score after `length` tokens; NaN where the text is shorter or that length was not scored."""
    return float(curve[length - 1]) if len(curve) >= length else math.nan


def tokens_quantile(values, q: float):
    """A quantile of tokens-to-detect values (NaN left out): an observed count, "never" where it falls among the texts
    never detected, None without any."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    found = float(np.quantile(values, q, method="inverted_cdf"))  # an observed value: a count of tokens
    return "never" if math.isinf(found) else int(found)


def tokens_summary(curves: list, threshold: LengthThreshold) -> dict:
    """Tokens to detect over a run's watermarked texts: median and quartiles (a quantile past the detected share is
    "never"), how many are never detected, and every text's value for a histogram."""
    values = np.array([tokens_to_detect(curve, threshold) for curve in curves], dtype=float)
    return {"n": int(values.size), "median": tokens_quantile(values, 0.5),
            "iqr": [tokens_quantile(values, 0.25), tokens_quantile(values, 0.75)],
            "never_detected": int(np.isinf(values).sum()),
            "values": [None if math.isinf(value) else int(value) for value in values.tolist()]}


def detected_by(values: list[int | None], longest: int = 0) -> list[tuple[int, int]]:
    """How many of a run's watermarked texts (`tokens_summary`'s values) are detected by T tokens, at each T where the
    count rises (from none at 0), held to `longest` (the most tokens read of any of them). Over all of them, a step
    curve whose crossings of ½, ¼ and ¾ are the median and quartiles `tokens_summary` gives, and that stays below 1 by
    the share never detected (a box over the detected texts alone put k-SemStamp's median near 30 tokens where the table
    said "never"). Held to the texts' end, it shows how far they were read: a run none of whose texts was detected drew
    one point at T = 0."""
    found = sorted(value for value in values if value is not None)
    steps = [(0, 0)] + [(length, sum(value <= length for value in found)) for length in sorted(set(found))]
    return steps + [(longest, steps[-1][1])] if longest > steps[-1][0] else steps


def rate_at(curves: list, threshold: LengthThreshold, length: int | None) -> tuple[float | None, int]:
    """The share of texts detected after `length` tokens (None: at their full length), over the texts that long; None
    below sample_size's minimum of texts."""
    scores = [curve[-1] if length is None else score_at(curve, length) for curve in curves if len(curve)]
    scores = [score for score in scores if not math.isnan(score)]
    if not enough("rate", len(scores)):
        return None, len(scores)
    return float(detected(scores, threshold).mean()), len(scores)


def tpr_at_length(positives: list, negatives: list, threshold: LengthThreshold) -> dict[str, dict]:
    """Per length of LENGTH_GRID that some text reaches, and at full length: the TPR over watermarked texts at least
    that long and the FPR the same threshold achieves on the negatives that long (None from too few texts)."""
    longest = max((len(curve) for curve in positives), default=0)
    table = {}
    for length in [*[length for length in LENGTH_GRID if length <= longest], None]:
        tpr, n = rate_at(positives, threshold, length)
        fpr, negatives_n = rate_at(negatives, threshold, length)
        table["full" if length is None else str(length)] = {"tpr": tpr, "n": n, "fpr": fpr, "negatives": negatives_n}
    return table


def length_summary(method: str, params: dict, positives: list, negatives: list, fpr: float = DEFAULT_FPR) -> dict:
    """The report's length block of one run: the threshold used, tokens to detect and TPR at each length."""
    threshold = length_threshold(method, params, fpr)
    return {"fpr": fpr, "threshold": threshold.label, "tokens_to_detect": tokens_summary(positives, threshold),
            "tpr_at_length": tpr_at_length(positives, negatives, threshold)}


# -- windowed detection ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WinMax:
    """The best window of a text: its score, where it starts (token index), and the threshold that holds the FPR for
    a text of this length and window without a watermark, with the p-value of the score against that null."""

    score: float
    start: int
    window: int
    threshold: float
    p: float
    fpr: float
    detected: bool


def check_window(method: str, window: int) -> Evidence:
    """The method's evidence, if a window of `window` tokens can be scored with it; a clear error otherwise."""
    evidence = _evidence(method)
    if evidence is None:
        with_evidence = ", ".join(entry.name for entry in methods.METHODS if entry.evidence)
        raise ValueError(f"Windowed detection needs per-token evidence, and {method}'s score has none (it aligns or "
                         f"maximises over the whole text); use one of {with_evidence}.")
    check_window_size(window)
    return evidence


def check_window_size(window: int) -> None:
    if not 1 <= window <= MAX_WINDOW:
        raise ValueError(f"--window must be from 1 to {MAX_WINDOW:,} tokens, not {window}.")


def window_scores(method: str, params: dict, detection, window: int) -> np.ndarray:
    """The score of every run of `window` consecutive tokens (the whole text when it is shorter)."""
    evidence = check_window(method, window)
    full = {**methods.info(method).defaults, **params}
    arrays = evidence.arrays(detection, full)
    return evidence.scores(arrays, full, min(window, arrays["scored"].size))


def winmax(method: str, params: dict, detection, window: int, fpr: float = DEFAULT_FPR, draws: int = NULL_DRAWS,
           seed: int = 0) -> WinMax:
    """The highest window score of a text, with its own calibrated threshold: the score that the highest window of at
    most a share `fpr` of `draws` simulated texts exceeds (texts with the same tokens scored and their evidence drawn
    as unwatermarked text shows it). The maximum over hundreds of windows is far above a single window's z, so the
    whole-text threshold does not hold."""
    direction = methods.info(method).score_direction
    scores = oriented(window_scores(method, params, detection, window), direction)
    best = int(np.argmax(scores))
    evidence = _evidence(method)
    full = {**methods.info(method).defaults, **params}
    arrays = evidence.arrays(detection, full)
    null = evidence.null(arrays, full, np.random.default_rng(seed), draws)
    maxima = oriented(evidence.scores(null, full, min(window, arrays["scored"].size)), direction).max(axis=-1)
    threshold = threshold_at_fpr(maxima, fpr)  # at most fpr of the simulated texts above it, as TPR at FPR everywhere
    p_value = (1 + int((maxima >= scores[best]).sum())) / (1 + draws)
    sign = -1.0 if direction == "lower" else 1.0
    return WinMax(sign * float(scores[best]), best, window, sign * threshold, p_value, fpr,
                  bool(scores[best] > threshold))


# -- a run's curves -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunCurves:
    """A run's scores at every length: its watermarked texts' and its negatives' (unwatermarked or reference)."""

    method: str
    params: dict
    positives: list
    negatives: list
    negative_kind: str
    source: str  # "generation", or the detection set that detected the texts again
    positive_samples: tuple[int, ...] = ()  # the sample index of each positive curve


def stored_curve(curve) -> np.ndarray:
    """A curve as the store returns it, its unscored lengths NaN: DuckDB gives a list with NULLs back as a masked
    array, whose masked cells `np.asarray` reads as 0, for a p-value detected: an EXP-edit answer known at 16 tokens
    and its full length was "detected after 1 token"."""
    return np.ma.filled(np.ma.asarray(curve, dtype=float), np.nan)


def _complete(rows, method: str, params: dict, source: str) -> RunCurves | None:
    from fwsapp.detection.roc import negative_kind

    rows = rows[rows.score.notna()] if "score" in rows else rows
    negative = negative_kind(set(rows.text_kind), method)
    positives = rows[rows.text_kind == methods.detection_kinds(method)[0]]
    if positives.empty or positives.prefix_statistics.isna().any():
        return None
    negatives = rows[(rows.text_kind == negative) & rows.prefix_statistics.notna()]
    return RunCurves(method, params, [stored_curve(curve) for curve in positives.prefix_statistics],
                     [stored_curve(curve) for curve in negatives.prefix_statistics], negative, source,
                     tuple(int(sample) for sample in positives.sample_idx))


def run_curves(store, run_id: str) -> RunCurves | None:
    """The run's curves: from its own detection where every watermarked text has one (runs generated here), else from
    the newest detection set of its own method and parameters, on its clean texts, that has them; None when neither
    has (`pipeline.lengths` makes them) or the method is post-hoc."""
    run = store.run(run_id)
    info = methods.info(run["method"])
    if info.post_hoc:
        return None
    params = info.checked_params(run["params"])
    own = _complete(store.prefix_curves(run_id, run["method"]), run["method"], params, "generation")
    if own is not None:
        return own
    sets = store.detection_sets([run_id])
    for entry in sets.iloc[::-1].itertuples():
        if entry.method == run["method"] and pd.isna(entry.normalize) and pd.isna(entry.window_tokens) and \
                json.loads(entry.params) == params:
            found = _complete(store.redetections([entry.set_id], curves=True), run["method"], params, entry.set_id)
            if found is not None:
                return found
    return None


def windowed_rates(store, set_id: str, method: str, window: int, fpr: float) -> str:
    """What a WinMax set found: the share of watermarked texts and of negatives whose best window passes the threshold
    calibrated for their length at `fpr`."""
    scores = store.redetections([set_id]).dropna(subset=["p"])
    negative = negative_kind(set(scores.text_kind), method)
    shares = {kind: (scores.loc[scores.text_kind == kind, "p"] < fpr) for kind in ("watermarked", negative)}
    said = [f"{kind} {found.mean():.2f} ({int(found.sum())} of {len(found)})" for kind, found in shares.items() if len(found)]
    return f"best {window}-token window past its {percent(fpr)} threshold: " + ", ".join(said)
