"""Two methods compared text by text (fwsapp.results.paired): the statistics on known sums, then the pairing of
generated runs, the CLI and the FWS page."""
import itertools

import numpy as np
import pandas as pd
import pytest

from fwsapp.cli import main
from fwsapp.data.tasks import tasks_named
from fwsapp.results import paired

from tests.test_pages import APP

# One worker for this module's tests in the slow tier (`--dist loadgroup`): the runs they share (`paired_runs`) take
# 36 s to generate, score, analyse and attack, and were built once on each worker.
pytestmark = pytest.mark.xdist_group("paired_runs")


def sums(candidate_sum, candidate_count, baseline_sum, baseline_count, task="qa", setting=paired.EQUAL_DELTA):
    frame = pd.DataFrame({"candidate_sum": candidate_sum, "candidate_count": candidate_count,
                          "baseline_sum": baseline_sum, "baseline_count": baseline_count})
    return frame.assign(task=task, setting=setting, compared="delta 2 against delta 2", candidate_value=2.0,
                        baseline_value=2.0, seeds=2, measure=paired.UNSUPPORTED_SHARE, prompt=range(len(frame)),
                        texts=2)


def test_the_permutation_test_swaps_a_prompts_sum_and_count_together_and_is_exact_over_every_swap():
    rng = np.random.default_rng(3)
    mentions = [rng.integers(1, 6, 10), rng.integers(1, 6, 10)]
    unsupported = [rng.integers(0, count + 1) for count in mentions]
    frame = sums(unsupported[0], mentions[0], unsupported[1], mentions[1])
    found = paired.paired_difference(frame)

    share = lambda numerators, counts: sum(numerators) / sum(counts)  # noqa: E731
    assert found["candidate"] == pytest.approx(share(unsupported[0], mentions[0]))
    assert found["difference"] == pytest.approx(found["candidate"] - found["baseline"])
    # Every one of the 2^10 ways to swap the two methods within prompts, each prompt's (unsupported, mentions) as one.
    null = []
    for swaps in itertools.product((False, True), repeat=10):
        sides = [[(unsupported[1 - first][i], mentions[1 - first][i]) if swap else
                  (unsupported[first][i], mentions[first][i]) for i, swap in enumerate(swaps)] for first in (0, 1)]
        null.append(share(*zip(*sides[0])) - share(*zip(*sides[1])))
    null, observed = np.array(null), found["difference"]
    tolerance = 1e-12 * max(1.0, abs(observed))
    one_sided = min(np.mean(null >= observed - tolerance), np.mean(null <= observed + tolerance))
    assert found["p"] == pytest.approx(min(1.0, 2 * one_sided))
    assert found["low"] <= observed <= found["high"]


def test_a_mean_per_text_gets_a_bca_interval_and_the_difference_80_percent_power_finds():
    rng = np.random.default_rng(0)
    baseline = rng.poisson(1.5, 200).astype(float)
    candidate = baseline - 0.5 + rng.normal(0, 1, 200)
    frame = sums(candidate, np.ones(200), baseline, np.ones(200)).assign(measure="unsupported mentions per text",
                                                                          texts=1)
    found = paired.paired_difference(frame)
    differences = candidate - baseline
    assert found["difference"] == pytest.approx(differences.mean())
    standard_error = differences.std(ddof=1) / np.sqrt(200)
    # 2.80 standard errors, the bootstrap's close to the textbook one.
    assert found["detectable"] == pytest.approx(2.8016 * standard_error, rel=0.1)
    assert found["low"] == pytest.approx(differences.mean() - 1.96 * standard_error, abs=0.3 * standard_error)
    assert found["high"] < 0 and found["p"] < 0.001 and found["prompts"] == 200 and found["texts"] == 200


def test_one_prompt_gives_no_interval_and_pooled_tasks_keep_their_prompts_apart():
    alone = paired.paired_difference(sums([1], [2], [0], [2]))
    assert alone["difference"] == 0.5 and np.isnan(alone["low"]) and np.isnan(alone["p"])

    both = pd.concat([sums([1, 0, 2], [2, 1, 3], [0, 1, 1], [2, 2, 2], task=task) for task in ("qa", "completion")])
    table = paired.difference_table(both, resamples=199)
    assert list(table.task) == ["completion", "qa", paired.ALL_TASKS]
    assert list(table.prompts) == [3, 3, 6] and list(table.texts) == [6, 6, 12]
    assert table.difference.iloc[-1] == pytest.approx(6 / 12 - 4 / 12)
    assert table.compared.iloc[-1] == "at 2 on each task"
    assert paired.written(table)["95% interval"].tolist() == ["not enough data (n = 3)"] * 2 + ["not enough data (n = 6)"]
    assert list(tasks_named(paired.written(table)).task)[1:] == ["Question answering", paired.ALL_TASKS]  # as shown


def test_runs_pair_whatever_their_thresholds_but_not_across_a_parameter_that_shapes_the_texts():
    """DiPmark's z threshold is 1.513 and SWEET's 4: a threshold decides verdicts, not texts, yet runs of the two on the
    same prompts and seed were refused as differing in "z_threshold (shared parameter)"."""
    from fwsapp.watermark import methods

    dipmark, sweet = methods.info("DiPmark"), methods.info("SWEET")
    shared = paired.text_params(dipmark, sweet)
    assert {"gamma", "prefix_length"} <= shared and not shared & {"alpha", "delta", "z_threshold"}
    config = {"task": "qa", "model": "m", "n": 10, "max_new_tokens": 16, "seed": 7, "method": "x", "params": {}}

    def key(params):
        return paired._pairing_key({"config": config, "params": params}, paired.text_params(dipmark, sweet))

    assert key({"alpha": 0.45, "gamma": 0.5, "z_threshold": 1.513}) == key({"delta": 2.0, "gamma": 0.5, "z_threshold": 4})
    assert key({"alpha": 0.45, "gamma": 0.5}) != key({"delta": 2.0, "gamma": 0.25})


@pytest.fixture(scope="module")
def paired_runs(lm, tmp_path_factory):
    """KGW and EntityKGW at δ 2 on the same 10 QA prompts (a TPR needs 10 texts) under seeds 7 and 8, scored,
    analysed and attacked; and a KGW run of 6 prompts, which pairs with nothing."""
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store

    store = Store(tmp_path_factory.mktemp("paired") / "paired.duckdb")
    configs = [RunConfig(task="qa", method=method, n=10, max_new_tokens=16, batch_size=10, seed=seed,
                         params={"delta": 2.0}) for method in ("KGW", "EntityKGW") for seed in (7, 8)]
    configs.append(RunConfig(task="qa", method="KGW", n=6, max_new_tokens=16, batch_size=6, seed=7,
                             params={"delta": 2.0}))
    loader = lambda name: lm  # noqa: E731
    run_ids = pipeline.generate(store, configs, loader)
    pipeline.score(store, run_ids, loader, metrics=("simcse_reference", "f1", "factuality"), recognizer="mesh")
    pipeline.analyze(store, run_ids, loader, recognizer="mesh")
    pipeline.attack(store, run_ids[:4], loader, attack="word-deletion", params={"ratio": 0.3}, seed=0)
    return store, run_ids


def test_runs_pair_seed_by_seed_and_each_text_counts_its_stored_mentions(paired_runs, capsys, app_db):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import copy_store

    store, run_ids = paired_runs
    assert [found.setting for found in paired.settings(store, "EntityKGW", "KGW")] == [paired.EQUAL_DELTA]  # 16 < 64
    both = {found.setting: found for found in paired.settings(store, "EntityKGW", "KGW", tokens=16)}
    equal_delta, equal_strength = both[paired.EQUAL_DELTA], both[paired.EQUAL_STRENGTH]
    assert equal_delta.pairs == ((run_ids[2], run_ids[0]), (run_ids[3], run_ids[1]))  # the 8-prompt run pairs with none
    assert equal_strength.pairs == equal_delta.pairs  # δ 2 is the only value either method ran

    found = paired.prompt_sums(store, "EntityKGW", "KGW", tokens=16, recognizer="mesh")
    unsupported = found[(found.setting == paired.EQUAL_DELTA) & (found.measure == "unsupported mentions per text")]
    assert len(unsupported) == 10 and (unsupported.texts == 2).all()
    entities = store.entities(run_ids[:4])
    marked = entities[(entities.text_kind == "watermarked") & entities.hallucinated]
    assert unsupported.candidate_sum.sum() == marked.run_id.isin(run_ids[2:4]).sum()
    assert unsupported.baseline_sum.sum() == marked.run_id.isin(run_ids[:2]).sum()
    measures = set(found.measure)
    assert {"FWS (Auto)", paired.UNSUPPORTED_SHARE, "entity survival, word-deletion (ratio=0.3)"} <= measures

    assert main(["paired", "--method", "EntityKGW", "--against", "KGW", "--recognizer", "mesh",
                 "--db", str(store.path)]) == 0
    printed = capsys.readouterr().out
    assert "equal δ:" in printed and "unsupported mentions per text" in printed
    assert "\nequal strength:\n" in printed  # T read from the runs: their answers reach it
    assert main(["paired", "--method", "EntityKGW", "--against", "KGW", "--tokens", "64", "--db", str(store.path)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "No equal-strength comparison: no run has a TPR after 64 tokens" in printed
    from fwsapp.detection.strength import reached_tokens
    runs = store.runs()  # the two methods' runs: the advice names the T they reach, not "a smaller T"
    reached = reached_tokens(store, runs.run_id[runs.method.isin(["EntityKGW", "KGW"])].tolist())
    assert reached < 64 and f"Choose a T of {reached} or fewer" in printed
    assert main(["paired", "--method", "EntityKGW", "--against", "SynthID", "--db", str(store.path)]) == 1
    printed = capsys.readouterr().out
    assert "No finished generated run of SynthID. Generate one" in printed  # issue 58, item 12: what fails, named
    # (no SynthID run at all: it said "imported runs do not pair", as if there were some)
    assert main(["paired", "--method", "KGW", "--against", "kgw", "--db", str(store.path)]) == 2
    assert "both sides name it" in capsys.readouterr().err

    copy_store(store, app_db)
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    app.switch_page("pages/fws.py").run()
    app.number_input(key="strength-tokens").set_value(16).run()
    assert not app.exception
    assert app.selectbox(key="paired-candidate").value == "EntityKGW"
    assert app.selectbox(key="paired-baseline").value == "KGW"
    shown = next(frame.value for frame in app.dataframe if "95% interval" in frame.value.columns)
    assert set(shown.setting) == {paired.EQUAL_DELTA, paired.EQUAL_STRENGTH} and (shown.prompts == 10).all()


def test_runs_that_pair_without_measures_are_named_with_what_computes_them(paired_runs, tmp_path, capsys):
    """Issue 58, item 12: the runs pair, but none has a metric or an entity analysis yet."""
    from fwsapp.store import Store
    from tests.conftest import copy_store

    store, run_ids = paired_runs
    copy = tmp_path / "bare.duckdb"
    copy_store(store, copy)
    bare = Store(copy)
    with bare.transaction() as cursor:
        for table in ("metrics", "entities", "entity_analyses", "attacked_texts", "attack_sets"):
            cursor.execute(f"DELETE FROM {table}")
    bare.close()
    assert main(["paired", "--method", "EntityKGW", "--against", "KGW", "--tokens", "16", "--db", str(copy)]) == 1
    printed = capsys.readouterr().out
    assert "pair, but their watermarked texts have no measure yet" in printed
    assert "python -m fwsapp score --run" in printed and "python -m fwsapp analyze --run" in printed
    assert all(run_id in printed for run_id in run_ids[:4])


def test_a_shares_detectable_difference_beyond_1_says_none_is_detectable():
    """Two shares differ by at most 1: the CLI wrote "detectable (80% power) 1.06" for the unsupported share of four
    prompts, a difference no two shares can have; per-text counts have no such bound."""
    table = pd.DataFrame({"task": "qa", "setting": paired.EQUAL_DELTA, "compared": "delta 2 against delta 2",
                          "seeds": 1, "prompts": 4, "texts": 4, "candidate": 1.0, "baseline": 0.333,
                          "difference": 0.667, "n": 12, "low": 0.0, "high": 1.0, "p": 0.25,
                          "measure": [paired.UNSUPPORTED_SHARE, "unsupported mentions per text",
                                      f"{paired.SURVIVAL}, typo (p=0.05)", paired.UNSUPPORTED_SHARE],
                          "detectable": [1.06, 1.51, 1.2, 0.541]})
    assert paired.written(table)["detectable (80% power)"].tolist() == ["none (1.06 > 1)", "1.51", "none (1.2 > 1)",
                                                                        "0.541"]


def test_a_share_whose_mentions_sit_in_a_few_prompts_gets_no_interval_but_its_permutation_p():
    """SWEET against KGW on four summaries: SWEET named one disease in one prompt, KGW three in three. The bootstrap
    over those four prompts read 0.2 to 1 (0 excluded) beside a permutation p of 1: its resamples that dropped the one
    prompt had no share, and the rest all held it. The interval needs 10 prompts with a mention on each side."""
    sparse = sums([0, 1, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0])
    found = paired.paired_difference(sparse)
    assert found["difference"] == pytest.approx(1 - 2 / 3) and found["n"] == 1
    assert np.isnan(found["low"]) and np.isnan(found["high"]) and np.isnan(found["detectable"])
    assert found["p"] == pytest.approx(1.0)
    row = pd.DataFrame([{"task": "summarization", "setting": paired.EQUAL_DELTA, "compared": "delta 2 against delta 2",
                         "seeds": 1, "measure": paired.UNSUPPORTED_SHARE, **found}])
    assert paired.written(row)[["95% interval", "detectable (80% power)"]].values.tolist() == [
        ["not enough data (n = 1)", "–"]]

    # The same share over 10 prompts with a mention on each side is given its interval.
    rng = np.random.default_rng(5)
    mentions = rng.integers(1, 4, (2, 12))
    mentions[0, :2] = 0  # two prompts without a candidate mention: 10 carry it
    unsupported = [rng.integers(0, count + 1) for count in mentions]
    enough = paired.paired_difference(sums(unsupported[0], mentions[0], unsupported[1], mentions[1]))
    assert enough["n"] == 10 and enough["low"] <= enough["difference"] <= enough["high"]
