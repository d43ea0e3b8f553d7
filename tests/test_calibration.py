"""Calibrated thresholds (issue 34): the nominal and achieved FPR of a theoretical threshold, the empirical threshold
that holds a target FPR on held-apart negatives, and exact p-values for green-list counts."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fwsapp.watermark import methods
from fwsapp.detection.calibration import (
    achieved_fpr,
    bucket_order,
    empirical_threshold,
    length_bucket,
    nominal_fpr,
    nominal_threshold,
    run_calibration,
)
from fwsapp.detection.roc import threshold_at_fpr
from fwsapp.watermark.evidence import EXACT_BELOW, green_p_value, green_z


def test_the_nominal_fpr_is_the_normal_tail_of_z_and_the_alpha_of_p():
    assert nominal_fpr(methods.KGW, 4.0) == pytest.approx(3.167e-5, rel=1e-3)
    assert nominal_fpr(methods.EXP, 0.01) == 0.01
    assert nominal_fpr(methods.SYNTHID, 0.52) is None  # SynthID's mean g-value is no test's statistic
    assert nominal_fpr(methods.DIPMARK, 1.513) is None  # DiPmark's score has spread √(γ(1 − γ)) without a watermark
    assert nominal_threshold(methods.KGW, 0.01) == pytest.approx(2.326, abs=1e-3)
    assert nominal_threshold(methods.EXP, 0.01) == 0.01


def test_a_green_count_has_an_exact_p_value_when_few_tokens_are_scored():
    assert green_p_value(10, 10, 0.5) == pytest.approx(0.5 ** 10)  # the normal approximation says 0.00078
    assert green_p_value(8, 10, 0.5) == pytest.approx(56 / 1024)
    assert green_p_value(0, 0, 0.5) == 1.0
    many = EXACT_BELOW + 100
    assert green_p_value(180, many, 0.5) == pytest.approx(stats.norm.sf(green_z(180, many, 0.5)))


@pytest.mark.parametrize("direction", ["higher", "lower"])
def test_the_calibrated_threshold_holds_its_fpr_within_its_interval_on_held_apart_negatives(direction):
    rng = np.random.default_rng(7)
    # z-scores of unwatermarked text run wider than N(0, 1): a theoretical z > 2.33 is not a 1 % test on them.
    draw = (lambda n: rng.standard_t(5, n)) if direction == "higher" else (lambda n: rng.beta(0.8, 1.0, n))
    calibration, held_apart = draw(2000), draw(200_000)
    calibrated = empirical_threshold(calibration, 0.01, direction, resamples=400)
    low, high = calibrated.interval
    assert low <= calibrated.threshold <= high

    def rate(threshold):
        return float((held_apart > threshold).mean() if direction == "higher" else (held_apart < threshold).mean())

    looser, stricter = (low, high) if direction == "higher" else (high, low)
    assert rate(stricter) <= 0.01 <= rate(looser)
    assert abs(rate(calibrated.threshold) - 0.01) < 0.005
    if direction == "higher":
        theoretical = achieved_fpr(held_apart, 2.326)
        assert theoretical.rate > 0.015 and theoretical.interval[0] > 0.01  # the nominal 1 % does not hold


@pytest.mark.parametrize("direction", ["higher", "lower"])
def test_the_calibrated_threshold_lets_through_the_share_of_negatives_its_fpr_names(direction):
    """On 100 negatives the 1 % threshold was the highest of them (none above: 0 %), on 200 the second highest (0.5 %),
    while the TPR at 1 % FPR beside it used the one with 1 % above."""
    def flagged(scores, fpr) -> int:
        threshold = empirical_threshold(scores, fpr, direction, resamples=50).threshold
        return int((scores > threshold).sum() if direction == "higher" else (scores < threshold).sum())

    scores = np.arange(200, dtype=float) if direction == "higher" else np.linspace(0.0005, 0.1, 200)
    assert (flagged(scores, 0.01), flagged(scores, 0.05), flagged(scores[:100], 0.01)) == (2, 10, 1)


def test_an_empirical_threshold_needs_one_false_positives_worth_of_negatives():
    negatives = np.random.default_rng(0).normal(size=99)
    assert empirical_threshold(negatives, 0.01) is None
    assert empirical_threshold(negatives, 0.05) is not None
    assert empirical_threshold(np.append(negatives, 0.0), 0.01) is not None


def test_achieved_fpr_counts_the_negatives_past_the_threshold_with_an_exact_interval():
    achieved = achieved_fpr([0.1, 5.0, 4.5, -1.0, np.nan], 4.0)
    assert (achieved.false, achieved.negatives, achieved.rate) == (2, 4, 0.5)
    assert achieved.interval == pytest.approx(stats.binomtest(2, 4).proportion_ci(method="exact"))
    assert achieved_fpr([0.2, 0.001], 0.01, "lower").false == 1
    assert achieved_fpr([], 4.0) is None


def test_a_runs_calibration_splits_its_negatives_by_length_and_says_where_data_is_short():
    rng = np.random.default_rng(3)
    tokens = rng.integers(10, 400, 300)
    negatives = pd.DataFrame({"score": rng.normal(size=300), "num_tokens_scored": tokens})
    rows = pd.DataFrame(run_calibration("KGW", {}, negatives, "KGW run"))
    assert rows["tokens scored"].tolist() == ["all"] + [bucket for bucket in bucket_order()
                                                        if (pd.Series(tokens).map(length_bucket) == bucket).any()]
    overall = rows.iloc[0]
    assert overall.negatives == 300 and overall["theoretical threshold"] == "z > 4"
    assert overall["nominal FPR"] == pytest.approx(stats.norm.sf(4))
    # The rule TPR at 1 % FPR uses: 3 of 300 negatives above it (the 0.99 quantile left 2, and none of 100).
    exact = threshold_at_fpr(negatives.score.to_numpy(), 0.01)
    assert float(overall["threshold at 1% FPR"].split(" ")[0]) == pytest.approx(exact, rel=5e-3)
    assert (negatives.score > exact).sum() == 3
    # three significant digits in every row, trailing zeros kept: "1.70" beside "2.84", not "1.7"
    even = pd.DataFrame({"score": np.r_[np.linspace(-3, 1.7, 198), 2.0, 2.1], "num_tokens_scored": np.nan})
    assert run_calibration("KGW", {}, even, "KGW run")[0]["threshold at 1% FPR"].startswith("1.70 (")
    assert rows.iloc[1:].negatives.sum() == 300
    short = rows[rows.negatives < 100].iloc[0]
    assert short["threshold at 1% FPR"] == f"not enough data (n = {short.negatives})"
    assert length_bucket(32) == "1–32" and length_bucket(33) == "33–64" and length_bucket(1000) == "> 256"
    imported = pd.DataFrame({"score": rng.uniform(size=50), "num_tokens_scored": np.nan})
    (only,) = run_calibration("EXP-edit", {}, imported, "imported")
    assert only["tokens scored"] == "all" and only["theoretical threshold"] == "p < 0.2"
    alike = negatives.assign(num_tokens_scored=100)
    assert [row["tokens scored"] for row in run_calibration("KGW", {}, alike, "one length")] == ["all"]
