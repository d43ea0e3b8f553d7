"""FWS arithmetic, the human-rating assignment rule, and the agreement statistics against their libraries."""
import numpy as np
import pandas as pd
import pytest
import scikit_posthocs
from scipy.stats import friedmanchisquare, pearsonr

from fwsapp.results.fws import PRESETS, fws, fws_from_likert, pareto_front, ratio_sweep, ratio_weights
from fwsapp.human.agreement import (
    correlation_matrix,
    correlation_table,
    friedman_nemenyi,
    human_means,
    krippendorff_alpha,
    sensitivity_table,
)
from fwsapp.human.ratings import RATERS_PER_ITEM, OpenRater, sample_items
from fwsapp.human.workflow import RatingError
from fwsapp.orchestration.importer import LogFile, import_logs


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


def test_the_flip_chart_keeps_models_apart():
    def mean(model, kind, value):
        return {"run_id": model, "kind": kind, "coherence": value, "relevance": value, "factual_accuracy": value,
                "n": 1, "method": "KGW", "settings": "defaults", "model": model, "task": "qa", "params": "{}"}

    means = pd.DataFrame([mean("small", "watermarked", 0.2), mean("small", "unwatermarked", 0.4),
                          mean("large", "watermarked", 0.8), mean("large", "unwatermarked", 1.0)])
    sweep = ratio_sweep(means, [1.0, 2.0]).set_index(["ratio", "model", "method"]).fws
    # equal aspects give FWS = (2α + β) × value = value at every ratio
    assert sweep[(2.0, "small", "KGW")] == pytest.approx(0.2) and sweep[(2.0, "large", "KGW")] == pytest.approx(0.8)
    assert sweep[(1.0, "large", "Unwatermarked")] == pytest.approx(1.0) and len(sweep) == 8
    # Two runs of one model and method that differ in δ are two lines, not their mean.
    means.loc[means.model == "large", "model"] = "small"
    means.loc[2, "settings"] = "delta=1"
    runs = ratio_sweep(means, [1.0]).query("method == 'KGW'").set_index("settings").fws
    assert runs.to_dict() == {"defaults": pytest.approx(0.2), "delta=1": pytest.approx(0.8)}


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
        item = OpenRater(rater).queue(store).upcoming
        if item is None:
            active.remove(rater)
            continue
        assert item not in seen[rater]
        seen[rater].append(item)
        OpenRater(rater).submit(store, item, [3, 4, 5], [2, 3, 4])
    counts = store.rows("SELECT sample_idx, count(DISTINCT rater), count(*) FROM human_ratings GROUP BY 1")
    assert len(counts) == 5 and all(distinct == total == RATERS_PER_ITEM for _, distinct, total in counts)
    assert sum(len(items) for items in seen.values()) == 5 * RATERS_PER_ITEM


def test_rating_rules(store):
    run_id = rating_run(store, n=4)
    sample_items(store, run_id, fraction=1.0)
    rater = OpenRater("Dr A")
    item = rater.queue(store).upcoming
    with pytest.raises(RatingError, match="three ratings from 1 to 5"):
        rater.submit(store, item, [3, 4, 6], [2, 3, 4])
    with pytest.raises(RatingError, match="Enter your name"):
        OpenRater("  ")
    rater.submit(store, item, [3, 4, 5], [1, 2, 3], "B is off topic")
    with pytest.raises(RatingError, match="already rated"):
        rater.submit(store, item, [3, 4, 5], [1, 2, 3])
    rater.skip(store, rater.queue(store).upcoming)
    queue = rater.queue(store)
    assert (len(queue.done), queue.total) == (2, 4) and queue.done[1].skipped and queue.at(1) == (queue.done[1], 2)
    stored = store.row("SELECT scores_watermarked, scores_unwatermarked FROM human_ratings")
    expected = ([3, 4, 5], [1, 2, 3]) if item.watermarked_first else ([1, 2, 3], [3, 4, 5])
    assert (list(stored[0]), list(stored[1])) == expected  # A/B mapped back to the texts


RATED = pd.DataFrame({  # ten texts, each rated by two raters
    "rater": ["a", "b"] * 10,
    "run_id": ["r"] * 20, "sample_idx": [index for index in range(10) for _ in range(2)], "kind": ["watermarked"] * 20,
    "coherence": [4, 5, 3, 3, 2, 1, 5, 4, 3, 4, 2, 2, 5, 5, 1, 2, 4, 3, 3, 3],
    "relevance": [3, 4, 2, 2, 2, 1, 4, 4, 3, 3, 1, 2, 4, 5, 2, 2, 3, 3, 4, 3],
    "factual_accuracy": [2, 3, 3, 2, 1, 1, 5, 5, 2, 3, 1, 1, 4, 4, 2, 1, 3, 4, 3, 2],
})
JUDGED = {"coherence": [0.8, 0.6, 0.2, 1.0, 0.6, 0.4, 1.0, 0.2, 0.8, 0.6],
          "relevance": [0.6, 0.6, 0.2, 0.8, 0.6, 0.2, 1.0, 0.4, 0.6, 0.8],
          "factual_accuracy": [0.4, 0.6, 0.2, 1.0, 0.4, 0.2, 0.8, 0.2, 0.6, 0.6]}
SIMCSE = [0.9, 0.7, 0.1, 0.95, 0.5, 0.3, 0.85, 0.2, 0.6, 0.55]


def test_correlations_equal_scipy_and_say_when_there_are_too_few_texts():
    humans = human_means(RATED)
    judge = humans[["run_id", "sample_idx", "kind"]].assign(**JUDGED)
    metrics = pd.DataFrame({"run_id": "r", "sample_idx": range(10), "text_kind": "watermarked", "metric": "simcse",
                            "value": SIMCSE})
    table = correlation_table(humans, judge, judge.iloc[:0], metrics, 0.4, 0.2).set_index(["aspect", "source"])
    expected = pearsonr(humans.coherence, judge.coherence)
    assert table.loc[("coherence", "judge"), "r"] == pytest.approx(expected.statistic)
    assert table.loc[("coherence", "judge"), "p"] == pytest.approx(expected.pvalue)
    assert table.loc[("factual_accuracy", "simcse"), "r"] == pytest.approx(
        pearsonr(humans.factual_accuracy, metrics.value).statistic)
    assert table.loc[("fws", "judge"), "n"] == 10
    few = correlation_table(humans.head(4), judge, judge.iloc[:0], metrics, 0.4, 0.2)
    assert few.r.isna().all()
    assert correlation_matrix(few).loc["Coherence", "judge"] == "not enough data (n = 4)"
    # A source whose every r is a number is a column of numbers, which a page writes to three decimals (the pivot left
    # objects, read 0.48 beside 0.443); one with words among them stays mixed, for `uniform` to write alike.
    mixed = correlation_matrix(pd.concat([correlation_table(humans, judge, judge.iloc[:0], metrics, 0.4, 0.2)
                                          .query("source == 'simcse'"), few.query("source == 'judge'")]))
    assert mixed["SimCSE"].dtype.kind == "f" and mixed["judge"].dtype.kind != "f"
    # Named as every other table names them, in the order read (the FWS and Study pages showed factual_accuracy and
    # simcse_reference, FWS between the aspects and the metrics before the judge, as sorted by name).
    matrix = correlation_matrix(table.reset_index())
    assert list(matrix.index) == ["Coherence", "Relevance", "Factual accuracy", "FWS"]
    assert list(matrix.columns) == ["judge", "Auto-FWS mapping", "SimCSE"]
    assert matrix.loc["Factual accuracy", "SimCSE"] == round(table.loc[("factual_accuracy", "simcse"), "r"], 3)


def test_a_weightings_p_value_is_written_in_significant_digits_never_0():
    """The FWS page's sensitivity table read "p GPTJ 0" for a judge that agreed with the raters (p 1e-27), rounded to
    four decimals; its p now reads as the correlations' do."""
    rng = np.random.default_rng(0)
    humans = pd.DataFrame({"run_id": "r", "sample_idx": range(40), "kind": "watermarked",
                           **{aspect: rng.uniform(0.2, 1, 40) for aspect in ("coherence", "relevance", "factual_accuracy")}})
    judge = humans.assign(**{aspect: humans[aspect] + rng.normal(0, 0.01, 40)
                             for aspect in ("coherence", "relevance", "factual_accuracy")})
    table = sensitivity_table(humans, judge, humans.head(4), "judge (m)").set_index("Weighting")
    alpha, beta = PRESETS["Current"]
    expected = pearsonr(fws(humans.coherence, humans.relevance, humans.factual_accuracy, alpha, beta),
                        fws(judge.coherence, judge.relevance, judge.factual_accuracy, alpha, beta)).pvalue
    assert 0 < expected < 1e-20 and table.loc["Current", "p judge (m)"] == f"{expected:.3g}"  # the judge by its name
    assert table.loc["Current", "p Auto-FWS mapping"] == "not enough data (n = 4)"


def test_friedman_and_nemenyi_equal_scipy_and_scikit_posthocs():
    statistic, p_value, nemenyi = friedman_nemenyi(RATED)
    data = RATED[["coherence", "relevance", "factual_accuracy"]].to_numpy(dtype=float)
    expected = friedmanchisquare(*data.T)
    assert statistic == pytest.approx(expected.statistic) and p_value == pytest.approx(expected.pvalue)
    assert np.allclose(nemenyi.to_numpy(), scikit_posthocs.posthoc_nemenyi_friedman(data).to_numpy())
    assert list(nemenyi.columns) == ["Coherence", "Relevance", "Factual accuracy"]


def test_krippendorff_alpha_is_one_for_identical_raters_and_none_from_too_few_texts():
    identical = RATED.assign(coherence=RATED.groupby("sample_idx").coherence.transform("first"))
    assert krippendorff_alpha(identical)["coherence"] == pytest.approx(1.0)
    assert krippendorff_alpha(RATED)["coherence"] < 1.0
    assert krippendorff_alpha(RATED.head(8))["coherence"] is None  # 4 doubly rated texts: below the minimum of 5
    statistic, p_value, nemenyi = friedman_nemenyi(RATED.head(8))
    assert statistic is None and nemenyi is None


def judged_and_scored_store(store):
    """Two runs with judge verdicts and metrics; one metric also under a second, smaller config."""
    rng = np.random.default_rng(1)
    for run_id, method, task in (("a", "KGW", "qa"), ("b", "SWEET", "completion")):
        store.add_run(run_id, {"config": {}, "model": "m", "task": task, "method": method, "params": {}, "n": 6,
                               "imported": True, "status": "done"}, {
            "judgments": [{"sample_idx": i, "judge_model": "j", "prompt_version": "v", "watermarked_first": True,
                           "texts_hash": str(i), "status": "ok", "scores_watermarked": rng.integers(1, 6, 3).tolist(),
                           "scores_unwatermarked": rng.integers(1, 6, 3).tolist()} for i in range(6)],
            "metrics": [{"sample_idx": i, "text_kind": kind, "metric": metric, "config": config,
                         "value": float(rng.random()) * (1.5 if metric == "factuality" else 1)}
                        for i in range(6) for kind in ("watermarked", "unwatermarked")
                        for metric, config in (("simcse_reference", "c"), ("rougeL", "c"), ("f1", "c"), ("factuality", "c"))]
                       + [{"sample_idx": 0, "text_kind": "watermarked", "metric": "simcse_reference", "config": "other",
                           "value": 0.0}],
        })
    return store


def test_slider_views_equal_the_mean_of_per_sample_fws(store):
    from fwsapp.quality.scoring import read_values
    from fwsapp.results.fws import fws_views, judge_aspects, metric_aspects, prepare_views, run_means

    judged_and_scored_store(store)
    runs = store.runs()
    judge = judge_aspects(store.judgments())
    auto = metric_aspects(read_values(store), dict(zip(runs.run_id, runs.task)))
    prepared = prepare_views(run_means(judge, runs), run_means(auto, runs))
    views = fws_views(prepared, 0.3, 0.4, detect_column="n")
    direct = judge.assign(fws=fws(judge.coherence, judge.relevance, judge.factual_accuracy, 0.3, 0.4))
    expected = direct[direct.kind == "watermarked"].groupby("run_id").fws.mean()
    table = views["gptj"].set_index("method")
    assert table.at["KGW", "qa"] == pytest.approx(expected["a"])
    assert table.at["SWEET", "completion"] == pytest.approx(expected["b"])
    assert list(table.index) == ["Unwatermarked", "KGW", "SWEET"]


def test_report_and_fws_page_give_the_same_auto_fws(store):
    """One Auto-FWS: the report and the FWS page read each metric under its main config, clipped to [0, 1]."""
    from fwsapp.quality.scoring import read_values
    from fwsapp.results.fws import fws_views, metric_aspects, prepare_views, run_means
    from fwsapp.results.report import build_report

    judged_and_scored_store(store)
    runs = store.runs()
    auto = run_means(metric_aspects(read_values(store), dict(zip(runs.run_id, runs.task))), runs)
    page = fws_views(prepare_views(auto.iloc[0:0], auto), 0.4, 0.2, detect_column="n", tradeoff_source="Auto")
    report = {run["run_id"]: run for run in build_report(store, 0.4, 0.2)["runs"]}
    table = page["auto"].set_index("method")
    assert report["a"]["quality"]["fws_auto"]["watermarked"] == pytest.approx(table.at["KGW", "qa"])
    assert report["b"]["quality"]["fws_auto"]["watermarked"] == pytest.approx(table.at["SWEET", "completion"])
    metrics = store.metrics(["a"])
    own = metrics[(metrics.config == "c") & (metrics.text_kind == "watermarked")].pivot(
        index="sample_idx", columns="metric", values="value")
    by_hand = fws(own.simcse_reference, own.f1, own.factuality.clip(0, 1), 0.4, 0.2).mean()  # QA: relevance is F1
    assert report["a"]["quality"]["fws_auto"]["watermarked"] == pytest.approx(by_hand)


def test_position_consistency_counts_samples_whose_winner_survives_the_swap():
    from fwsapp.judge.summary import position_consistency

    def verdict(sample, first, watermarked, unwatermarked):
        return {"run_id": "r", "sample_idx": sample, "judge_model": "j", "watermarked_first": first, "status": "ok",
                "scores_watermarked": watermarked, "scores_unwatermarked": unwatermarked}

    judgments = pd.DataFrame([
        verdict(0, True, [5, 5, 5], [1, 1, 1]), verdict(0, False, [4, 4, 4], [2, 2, 2]),  # same winner
        verdict(1, True, [5, 5, 5], [1, 1, 1]), verdict(1, False, [1, 1, 1], [5, 5, 5]),  # flips
        verdict(2, True, [3, 3, 3], [3, 3, 3]), verdict(2, False, [3, 3, 3], [3, 3, 3]),  # tie both times
        verdict(3, True, [5, 5, 5], [1, 1, 1]),  # one order only: not counted
    ])
    assert position_consistency(judgments) == pytest.approx(2 / 3)


def test_pareto_front_is_drawn_per_task_through_undominated_points():
    from fwsapp.results.fws import tradeoff_points

    points = pd.DataFrame({"kind": "watermarked", "task": ["qa", "qa", "qa", "completion"],
                           "auroc": [0.9, 0.95, 0.8, 0.99], "coherence": 1.0, "relevance": [0.5, 0.4, 0.3, 0.1],
                           "factual_accuracy": [0.5, 0.4, 0.3, 0.1]})
    prepared = {"points": points, "reference": pd.DataFrame({"model": ["m"], "task": ["qa"], "coherence": [1.0],
                                                             "relevance": [1.0], "factual_accuracy": [1.0]})}
    _, front, reference = tradeoff_points(prepared, "auroc", 0.4, 0.2)
    assert sorted(map(tuple, front[["task", "auroc"]].to_numpy().tolist())) == [
        ("completion", 0.99), ("qa", 0.9), ("qa", 0.95)]
    assert reference.fws.tolist() == pytest.approx([1.0])


def test_each_model_keeps_its_own_unwatermarked_reference_line():
    from fwsapp.results.fws import prepare_views

    def mean(model, kind, value):
        return {"run_id": model, "kind": kind, "coherence": value, "relevance": value, "factual_accuracy": value,
                "n": 1, "method": "KGW", "model": model, "task": "qa", "params": "{}", "auroc": 1.0}

    means = pd.DataFrame([mean("small", "unwatermarked", 0.2), mean("large", "unwatermarked", 0.8),
                          mean("small", "watermarked", 0.1), mean("large", "watermarked", 0.7)])
    reference = prepare_views(means, means)["Auto"]["reference"]
    assert reference.set_index("model").coherence.to_dict() == {"small": 0.2, "large": 0.8}


def test_raters_are_asked_about_completeness_only_for_summaries():
    from fwsapp.human.workflow import questions

    assert questions("qa")["relevance"].startswith("Relevance:") and "summar" not in questions("qa")["relevance"]
    assert questions("summarization")["relevance"].startswith("Completeness:")
