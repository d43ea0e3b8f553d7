import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from fwsapp.detection.roc import auroc, interval_label, summary, tpr_at_fpr, tpr_label, unresolved_fpr_warning


def test_tpr_at_fpr_with_ties_never_exceeds_the_fpr():
    negatives = [0.0, 1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]
    positives = [3.0, 3.0, 4.0, 5.0]
    # FPR 0: threshold is the top negative (3.0); positives tied at 3.0 are not flagged.
    assert tpr_at_fpr(positives, negatives, 0.0) == 0.5
    # FPR 0.1 allows one negative above the threshold, but six tie at 3.0: still threshold 3.0.
    assert tpr_at_fpr(positives, negatives, 0.1) == 0.5
    # FPR 0.7 allows seven: threshold drops to the 8th highest, 2.0, and flags the 3.0 ties.
    assert tpr_at_fpr(positives, negatives, 0.7) == 1.0


def test_tpr_at_fpr_levels_on_a_clean_separation():
    negatives = list(np.linspace(-2, 2, 100))
    positives = [1.9, 2.5, 3.0, 10.0]
    assert tpr_at_fpr(positives, negatives, 0.0) == 0.75  # threshold 2.0
    # Five negatives may lie above the threshold: it drops to the sixth highest, about 1.80.
    assert tpr_at_fpr(positives, negatives, 0.05) == 1.0


def test_p_value_direction_is_respected():
    watermarked_p = [0.001, 0.01, 0.02, 0.3]
    plain_p = [0.4, 0.6, 0.8, 0.9, 0.05]
    assert auroc(watermarked_p, plain_p, "lower") == pytest.approx(
        roc_auc_score([1] * 4 + [0] * 5, [-p for p in watermarked_p + plain_p])
    )
    assert auroc(watermarked_p, plain_p, "lower") > 0.8
    assert auroc(watermarked_p, plain_p, "higher") < 0.2
    # At FPR 0 the threshold is the smallest negative p (0.05): 3 of 4 are strictly below it.
    assert tpr_at_fpr(watermarked_p, plain_p, 0.0, "lower") == 0.75


def test_summary_schema_and_what_small_samples_cannot_say():
    result = summary([5.0, 6.0, 4.5], [0.0, -1.0, 1.0])
    assert result["auroc"] == 1.0
    assert set(result["tpr_at_fpr"]) == {"0", "0.01", "0.05"}
    assert result["mean_score"] == {"watermarked": pytest.approx(5.1666, 1e-3), "unwatermarked": 0.0}
    # Three negatives resolve neither 1 % nor 5 % FPR, and three texts a side give no interval: said, not guessed.
    assert result["tpr_at_fpr"]["0.01"] is None and result["auroc_ci"] is None
    assert tpr_label(result, "0.01") == "not enough data (n = 3)"
    # TPR at FPR 0 needs no more negatives than one to be defined, but three texts a side make a rate of thirds (the
    # report's Table 1 read 0.750 for four answers beside "not enough data (n = 4)" at 1 % and 5 %).
    assert result["tpr_at_fpr"]["0"] == 1.0 and tpr_label(result, "0") == "not enough data (n = 3)"
    few_positives = summary([5.0] * 4, list(range(-20, 0)))
    assert tpr_label(few_positives, "0") == "not enough data (n = 4)"
    assert tpr_label(summary([5.0] * 9 + [-30.0], list(range(-20, 0))), "0") == 0.9  # ten a side: a rate
    assert interval_label(result) == "not enough data (n = 3)"
    larger = summary(list(range(10, 40)), list(range(0, 30)))
    low, high = larger["auroc_ci"]
    assert low <= larger["auroc"] <= high and interval_label(larger) == f"{low:.3f}–{high:.3f}"
    assert tpr_label(larger, "0.05") == larger["tpr_at_fpr"]["0.05"] is not None  # 30 negatives resolve 5 %


def test_the_auroc_interval_is_newcombes_score_interval_and_a_perfect_separation_is_not_certain():
    """Hanley and McNeil's Wald interval read 1.000–1.000 for every AUROC of 1, on 20 texts a side as on 200 (the
    report's table for the strength grid: four runs so). Newcombe's score interval, held to SingleCaseES's NAP example
    (R: NAP(A = c(20, 20, 26, 25, 22, 23), B = c(28, 25, 24, 27, 30, 30, 29)))."""
    from scipy.stats import norm

    from fwsapp.detection.roc import auroc_interval, score_interval

    assert score_interval(11 / 12, 6, 7) == pytest.approx((0.5973193600384168, 0.9859976893703788), abs=1e-9)
    assert score_interval(11 / 12, 6, 7, norm.ppf(0.95)) == pytest.approx((0.6591091902344411, 0.9822247870934007),
                                                                           abs=1e-9)
    low, high = auroc_interval(1.0, 20, 20)
    assert high == 1 and low == pytest.approx(0.8987, abs=1e-4)
    assert auroc_interval(1.0, 200, 200)[0] == pytest.approx(0.9903, abs=1e-4)  # narrower with more texts
    assert auroc_interval(0.0, 20, 20) == pytest.approx((0.0, 1 - low))  # symmetric
    low, high = auroc_interval(0.5, 100, 100)
    assert low == pytest.approx(1 - high) and 0.40 < low < 0.45


def test_empty_sides_give_none():
    assert auroc([], [1.0]) is None and tpr_at_fpr([1.0], [], 0.01) is None


def test_runs_with_too_few_negatives_are_named_once_per_count():
    warning = unresolved_fpr_warning({"a": 8, "b": 8, "c": 50, "d": 200})
    assert "a, b: 8 negatives each, so TPR@FPR=0.01, 0.05 are unresolved" in warning
    assert "c: 50 negatives, so TPR@FPR=0.01 is unresolved" in warning
    assert "d:" not in warning  # 200 negatives resolve FPR 1%: 2 may be flagged
    assert unresolved_fpr_warning({"d": 100}) is None
