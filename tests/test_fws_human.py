"""FWS arithmetic, the human-rating assignment rule, and the agreement statistics against their libraries."""
import numpy as np
import pandas as pd
import pytest
import scikit_posthocs
from scipy.stats import friedmanchisquare, pearsonr

from fwsapp.fws import PRESETS, fws, fws_from_likert, pareto_front, ratio_weights
from fwsapp.human import (RATERS_PER_ITEM, RatingError, correlation_table, friedman_nemenyi, human_means,
                          krippendorff_alpha, next_item, progress, sample_items, skip, submit_rating)
from fwsapp.importer import LogFile, import_logs


def test_fws_from_likert_divides_by_five():
    scores = [[4, 2, 3], [2, 2, 2]]  # coherence, relevance, factual accuracy
    assert fws_from_likert(scores).tolist() == pytest.approx([0.56, 0.40])
    assert fws_from_likert(scores, 0.3, 0.4).tolist() == pytest.approx([0.62, 0.40])
    assert fws(1, 1, 1) == pytest.approx(1.0)


def test_ratio_mode_keeps_two_alpha_plus_beta_at_one_and_matches_the_presets():
    for ratio in (0.5, 1, 2, 4, 6, 7.5):
        alpha, beta = ratio_weights(ratio)
        assert 2 * alpha + beta == pytest.approx(1.0) and alpha / beta == pytest.approx(ratio)
    for name, ratio in (("Coherence-heavy", 0.5), ("Equal", 1), ("Current", 2), ("Factuality-heavy 4:1", 4),
                        ("Factuality-heavy 6:1", 6)):
        assert ratio_weights(ratio) == pytest.approx(PRESETS[name], abs=0.005)
    with pytest.raises(ValueError):
        ratio_weights(0)


def test_pareto_front():
    points = pd.DataFrame({"x": [0.9, 0.95, 0.99, 0.8, 0.99], "y": [0.5, 0.45, 0.40, 0.3, 0.2]})
    assert pareto_front(points, "x", "y").index.tolist() == [0, 1, 2]


def rating_run(store, n=20):
    import json

    rows = [{"prompt": f"Q{i}?", "watermarked_text": f"w{i}", "unwatermarked_text": f"u{i}", "natural_text": f"r{i}"}
            for i in range(n)]
    return import_logs(store, method="KGW", model="m", task_name="qa", generations=LogFile("g.json", json.dumps(rows).encode()))


def test_each_item_goes_to_three_different_raters_and_nobody_sees_one_twice(store):
    run_id = rating_run(store)
    assert sample_items(store, run_id, fraction=0.25) == 5
    assert sample_items(store, run_id, fraction=0.25) == 0  # idempotent
    raters = [f"rater {k}" for k in range(5)]
    seen = {rater: [] for rater in raters}
    rng = np.random.default_rng(0)
    active = list(raters)
    while active:
        rater = active[rng.integers(len(active))]
        item = next_item(store, rater)
        if item is None:
            active.remove(rater)
            continue
        assert item not in seen[rater]
        seen[rater].append(item)
        submit_rating(store, rater, item, [3, 4, 5], [2, 3, 4])
    counts = store.cursor().execute("SELECT sample_idx, count(DISTINCT rater), count(*) FROM human_ratings GROUP BY 1").fetchall()
    assert len(counts) == 5 and all(distinct == total == RATERS_PER_ITEM for _, distinct, total in counts)
    assert sum(len(items) for items in seen.values()) == 5 * RATERS_PER_ITEM


def test_rating_rules(store):
    run_id = rating_run(store, n=4)
    sample_items(store, run_id, fraction=1.0)
    item = next_item(store, "Dr A")
    with pytest.raises(RatingError, match="three ratings from 1 to 5"):
        submit_rating(store, "Dr A", item, [3, 4, 6], [2, 3, 4])
    with pytest.raises(RatingError, match="Enter your name"):
        submit_rating(store, "  ", item, [3, 4, 5], [2, 3, 4])
    submit_rating(store, "Dr A", item, [3, 4, 5], [1, 2, 3], "B is off topic")
    with pytest.raises(RatingError, match="already rated"):
        submit_rating(store, "Dr A", item, [3, 4, 5], [1, 2, 3])
    skip(store, "Dr A", next_item(store, "Dr A"))
    assert progress(store, "Dr A") == (2, 4)
    stored = store.cursor().execute("SELECT scores_watermarked, scores_unwatermarked FROM human_ratings").fetchone()
    expected = ([3, 4, 5], [1, 2, 3]) if item.watermarked_first else ([1, 2, 3], [3, 4, 5])
    assert (list(stored[0]), list(stored[1])) == expected  # A/B mapped back to the texts


RATED = pd.DataFrame({
    "rater": ["a", "b", "a", "b", "a", "b", "a", "b"],
    "run_id": ["r"] * 8, "sample_idx": [0, 0, 1, 1, 2, 2, 3, 3], "kind": ["watermarked"] * 8,
    "coherence": [4, 5, 3, 3, 2, 1, 5, 4], "relevance": [3, 4, 2, 2, 2, 1, 4, 4],
    "factual_accuracy": [2, 3, 3, 2, 1, 1, 5, 5],
})


def test_correlations_equal_scipy():
    humans = human_means(RATED)
    judge = humans[["run_id", "sample_idx", "kind"]].assign(coherence=[0.8, 0.6, 0.2, 1.0], relevance=[0.6, 0.6, 0.2, 0.8],
                                                             factual_accuracy=[0.4, 0.6, 0.2, 1.0])
    metrics = pd.DataFrame({"run_id": "r", "sample_idx": [0, 1, 2, 3], "text_kind": "watermarked", "metric": "simcse",
                            "value": [0.9, 0.7, 0.1, 0.95]})
    table = correlation_table(humans, judge, judge.iloc[:0], metrics, 0.4, 0.2).set_index(["aspect", "source"])
    expected = pearsonr(humans.coherence, judge.coherence)
    assert table.loc[("coherence", "GPT judge"), "r"] == pytest.approx(expected.statistic)
    assert table.loc[("coherence", "GPT judge"), "p"] == pytest.approx(expected.pvalue)
    assert table.loc[("factual_accuracy", "simcse"), "r"] == pytest.approx(
        pearsonr(humans.factual_accuracy, metrics.value).statistic)
    assert table.loc[("fws", "GPT judge"), "n"] == 4


def test_friedman_and_nemenyi_equal_scipy_and_scikit_posthocs():
    statistic, p_value, nemenyi = friedman_nemenyi(RATED)
    data = RATED[["coherence", "relevance", "factual_accuracy"]].to_numpy(dtype=float)
    expected = friedmanchisquare(*data.T)
    assert statistic == pytest.approx(expected.statistic) and p_value == pytest.approx(expected.pvalue)
    assert np.allclose(nemenyi.to_numpy(), scikit_posthocs.posthoc_nemenyi_friedman(data).to_numpy())


def test_krippendorff_alpha_is_one_for_identical_raters():
    identical = RATED.assign(coherence=RATED.groupby("sample_idx").coherence.transform("first"))
    assert krippendorff_alpha(identical)["coherence"] == pytest.approx(1.0)
    assert krippendorff_alpha(RATED)["coherence"] < 1.0
