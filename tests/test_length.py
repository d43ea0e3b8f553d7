"""Detection by length (issue 34): the score after every token equals the prefix detected alone, for every method; tokens
to detect on constructed flags; WinMax finding a pasted span; the equal-strength search on a sweep with a known answer;
the stored curves, `detect --by-length`, `compare` and the report's fields."""
import json
import math

import numpy as np
import pandas as pd
import pytest

from fwsapp.detection import length
from fwsapp.watermark import methods
from fwsapp.cli import main
from fwsapp.watermark.methods import watermark_names
from fwsapp.detection.redetect import _scored
from fwsapp.detection.strength import QUALITY, matched, on_tradeoff, sweep_lines
from fwsapp.watermark.factory import create
from fwsapp.watermark.base import Detection
from tests.test_pages import APP

TEXT = ("Gout is a form of inflammatory arthritis. Uric acid crystals collect in a joint, most often the big toe, "
        "causing sudden severe pain, swelling and redness that can last for days. Treatment lowers uric acid.")


@pytest.mark.parametrize("method", watermark_names())
def test_the_score_at_t_is_the_t_token_prefix_detected_alone(lm, method):
    ids = lm.tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    context = lm.tokenizer("Question: what is gout?")["input_ids"]
    watermark = create(method, lm.vocab_size, methods.info(method).test_params, lm=lm)
    if methods.info(method).evidence:
        detection = watermark.detect(ids, context)
        curve = length.prefix_statistics(method, watermark.params, detection)
        lengths = [1, 2, 5, 17, 33, len(ids)]
        if methods.info(method).unit == "sentence":  # counted in sentences: the prefix that ends where one ends
            lengths = [index + 1 for index, flag in enumerate(detection.token_flags) if flag >= 0] + [len(ids)]
            assert len(lengths) >= 3
        alone = {size: length.statistic(method, watermark.params, watermark.detect(ids[:size], context))
                 for size in lengths}
    else:  # detected again at LENGTH_GRID (texts scored alone, as re-detection scores them)
        curve = _scored(watermark, [ids], by_length=True, window=None)[0]["prefix_statistics"]
        lengths = [*length.grid_lengths(len(ids)), len(ids)]
        alone = {size: watermark.detect(ids[:size]).score for size in lengths}
        assert np.isnan(curve[lengths[0]]) and len(lengths) >= 3
    assert len(curve) == len(ids)
    # A detector that runs the model (EWD's entropies) reads a prefix's float32 logits from matrices of another shape
    # than the whole text's, so they agree to about 1e-6 relative, not to the last digit.
    tolerance = 1e-5 if methods.info(method).detector_needs_model(watermark.params) else 1e-6
    for size in lengths:
        assert curve[size - 1] == pytest.approx(alone[size], rel=tolerance, abs=tolerance), size


def curve_of(flags: list[int]) -> list[float]:
    return length.prefix_statistics("KGW", {}, Detection(score=0.0, num_tokens_scored=len(flags), token_flags=flags))


Z2 = length.LengthThreshold(2.0, "higher", True, "z > 2")


def test_tokens_to_detect_counts_from_where_a_text_is_detected_for_good():
    early_then_lost = [1] * 10 + [0] * 20 + [1] * 40  # z passes 2 at T=5, falls below, passes again for good later
    curve = np.array(curve_of(early_then_lost))
    found = length.tokens_to_detect(curve, Z2)
    assert curve[4] > 2 and (curve[int(found) - 2] <= 2) and (curve[int(found) - 1:] > 2).all()
    assert found > 30
    assert length.tokens_to_detect(curve_of([1] * 30), Z2) == 5  # z = √T: first above 2 at T = 5, and stays
    assert length.tokens_to_detect(curve_of([1] * 10 + [0] * 30), Z2) == math.inf  # detected early, never at the end
    assert length.tokens_to_detect(curve_of([-1, -1] + [1] * 10), Z2) == 7  # unscored tokens still count in T
    grid = length.grid_curve({16: 1.0, 32: 3.0, 48: 2.5}, 48)  # known at some lengths only
    assert length.tokens_to_detect(grid, Z2) == 32


def test_a_run_summary_counts_never_detected_texts_and_tabulates_only_texts_that_long():
    positives = [curve_of([1] * 40)] * 6 + [curve_of([1] * 20)] * 3 + [curve_of([0] * 70)] * 4
    summary = length.tokens_summary(positives, Z2)
    assert summary["never_detected"] == 4 and summary["median"] == 5 and summary["iqr"] == [5, "never"]
    table = length.tpr_at_length(positives, [curve_of([0, 1] * 40)] * 10, Z2)
    assert list(table) == ["16", "32", "64", "full"]
    assert table["16"]["tpr"] == pytest.approx(9 / 13) and table["full"]["tpr"] == pytest.approx(9 / 13)
    assert table["32"] == {"tpr": 0.6, "n": 10, "fpr": 0.0, "negatives": 10}  # the 20-token texts left out
    assert table["64"] == {"tpr": None, "n": 4, "fpr": 0.0, "negatives": 10}  # 4 texts: too few for a rate


def test_the_share_detected_by_each_length_counts_the_never_detected_and_crosses_a_half_at_the_median():
    """The Length tab drew a box over the detected texts alone: 3 of 8 k-SemStamp answers detected at 27-32 tokens made
    a box about 30 where the table said "never", and EXP-edit's box put its median near 9 against the table's 17."""
    values = [27, None, 32, None, None, 32, None, None]
    assert length.detected_by(values) == [(0, 0), (27, 1), (32, 3)]  # ends at 3 of 8, never reaching half
    assert length.tokens_quantile([math.inf if value is None else value for value in values], 0.5) == "never"
    values = [1, 1, 17, 17, 17, None, None, 9]
    steps = length.detected_by(values)
    assert steps == [(0, 0), (1, 2), (9, 3), (17, 6)]
    median = next(tokens for tokens, count in steps if count / len(values) >= 0.5)
    assert median == length.tokens_quantile([math.inf if value is None else value for value in values], 0.5) == 17
    # Held to the texts' end: a run none of whose 32-token texts was detected drew a lone point at T = 0.
    assert length.detected_by([None] * 8, longest=32) == [(0, 0), (32, 0)]
    assert length.detected_by(values, longest=17) == steps and length.detected_by(values, 64)[-1] == (64, 6)


def test_winmax_finds_a_pasted_watermarked_span_and_flags_no_reference_text(qa_run, lm):
    store, config, run_id = qa_run
    watermark = create("KGW", lm.vocab_size, config.params)
    references = [lm.tokenizer(" " + sample["reference"], add_special_tokens=False)["input_ids"]
                  for sample in json.loads(open("data/demo_qa.json").read())]
    pool = [token for ids in references for token in ids]
    hosts = [pool[start:start + 400] for start in range(0, len(pool) - 399, 400)]
    assert len(hosts) >= 3
    for host in hosts:  # human text alone
        assert not length.winmax("KGW", watermark.params, watermark.detect(host), 40).detected
    generations = store.generations(run_id)
    for ids in generations.unwatermarked_ids:  # and the model's text without the watermark
        assert not length.winmax("KGW", watermark.params, watermark.detect(list(ids)), 40).detected
    spans = [list(ids)[10:50] for ids in generations.watermarked_ids if watermark.detect(list(ids)).score > 4]
    assert spans
    for span in spans:
        pasted = hosts[0][:200] + span + hosts[0][200:360]
        found = watermark.detect(pasted)
        best = length.winmax("KGW", watermark.params, found, 40)
        assert found.score < 4 and best.detected and best.p < 0.01  # the whole text hides it; its window does not
        assert 180 <= best.start <= 220


def test_winmax_refuses_a_method_without_per_token_evidence():
    with pytest.raises(ValueError, match="EXP-edit's score has none"):
        length.check_window("EXP-edit", 40)
    for window in (0, 3_000_000_000):  # a 32-bit column holds the window
        with pytest.raises(ValueError, match="--window must be from 1 to 100,000 tokens"):
            length.check_window("KGW", window)


def sweep(method: str, tprs: dict[float, float], fws_per_delta: float = -0.1) -> list[dict]:
    return [{"method": method, "model": "m", "task": "qa", "sweep": method, "strength": "delta", "value": delta,
             "run_id": f"{method}-{delta}", "tpr": tpr, "basis": "empirical",
             **{label: 4.0 + fws_per_delta * delta for label in QUALITY}} for delta, tpr in tprs.items()]


def test_the_equal_strength_search_picks_the_known_setting():
    points = pd.DataFrame(sweep("KGW", {0.5: 0.3, 1.0: 0.6, 2.0: 0.95, 4.0: 1.0})
                          + sweep("EntityKGW", {1.0: 0.5, 2.0: 0.9, 4.0: 0.99})
                          + sweep("SWEET", {0.5: 0.92, 1.0: 0.99})
                          + sweep("Unigram", {0.5: 0.2, 1.0: 0.4}))
    table = matched(points, 0.9).set_index("method")
    # KGW: 0.9 lies 6/7 of the way from δ=1 (0.6) to δ=2 (0.95); quality is interpolated the same way.
    assert table.at["KGW", "value"] == pytest.approx(1 + 0.3 / 0.35)
    assert table.at["KGW", "FWS (Auto)"] == pytest.approx(4.0 - 0.1 * (1 + 0.3 / 0.35))
    assert table.at["KGW", "setting"] == "interpolated between delta=1 and 2"
    assert table.at["EntityKGW", "value"] == 2.0 and table.at["EntityKGW", "setting"] == "swept run EntityKGW-2.0"
    assert table.at["SWEET", "value"] == 0.5 and "weakest swept" in table.at["SWEET", "setting"]
    assert np.isnan(table.at["Unigram", "value"]) and table.at["Unigram", "setting"] == "not reached: best TPR 0.40 at delta=1"
    # Just short of the target, it is shown below it (it read "not reached: best TPR 0.90" against 0.9).
    table = matched(pd.DataFrame(sweep("KGW", {2.0: 0.895})), 0.9).set_index("method")
    assert table.at["KGW", "setting"] == "not reached: best TPR 0.895 at delta=2"
    # A sweep none of whose runs has a TPR at this length is a row that says so: it was left out of the table unseen.
    table = matched(pd.DataFrame(sweep("KGW", {1.0: 0.6, 2.0: 0.95}) + sweep("SWEET", {1.0: None, 2.0: None})),
                    0.9).set_index("method")
    assert table.at["SWEET", "runs"] == 0 and np.isnan(table.at["SWEET", "value"])
    assert table.at["SWEET", "setting"] == "not measured at this length: see the swept runs"
    assert table.at["KGW", "runs"] == 2


def test_runs_of_one_strength_on_several_seeds_are_read_together():
    """Seeds are replicates: a strength's TPR and quality are its runs' means (it interpolated from one seed's run to
    another's at the same δ, or took a seed that reached the target where their mean did not)."""
    def seeded(seed: int, tprs: dict[float, float], fws: dict[float, float]) -> list[dict]:
        return [{**row, "run_id": f"{row['run_id']}-s{seed}", "FWS (Auto)": fws[row["value"]]}
                for row in sweep("KGW", tprs)]

    points = pd.DataFrame(seeded(0, {1.0: 0.7, 2.0: 0.95}, {1.0: 0.5, 2.0: 0.4})
                          + seeded(1, {1.0: 0.8, 2.0: 0.85}, {1.0: 0.7, 2.0: 0.2}))
    row = matched(points, 0.8).iloc[0]
    # δ 1 reads 0.75 and δ 2 0.9: 0.8 lies a third of the way; FWS 0.6 at δ 1 and 0.3 at δ 2.
    assert row.value == pytest.approx(1 + 1 / 3) and row["FWS (Auto)"] == pytest.approx(0.6 - 0.3 / 3)
    assert row.setting == "interpolated between delta=1 and 2" and row.runs == 4
    assert row.low_run == ("KGW-1.0-s0", "KGW-1.0-s1") and row.high_run == ("KGW-2.0-s0", "KGW-2.0-s1")
    reached = matched(points, 0.75).iloc[0]
    assert reached.value == 1.0 and reached.setting == "swept runs KGW-1.0-s0, KGW-1.0-s1"
    # On the trade-off chart the setting sits at its runs' mean position.
    chart = pd.DataFrame({"run_id": points.run_id, "auroc": [0.8, 1.0, 0.9, 1.0], "fws": [0.5, 0.4, 0.7, 0.2]})
    placed = on_tradeoff(matched(points, 0.8), chart, "auroc", "fws").iloc[0]
    assert placed.auroc == pytest.approx(0.85 + (1.0 - 0.85) / 3) and placed.fws == pytest.approx(0.6 - 0.3 / 3)
    # The sweep's line joins its strengths' means, so the setting lies on it (it joined the four runs one by one: 0.5,
    # 0.7, 0.4, 0.2 up and down between the seeds). Another sweep of the method (another gamma) is a line of its own,
    # never averaged in at the same δ; runs in no sweep (no scores by length) are a line through them run by run.
    other = pd.DataFrame(sweep("KGW", {1.0: 0.6, 2.0: 0.9})).assign(sweep="KGW gamma=0.25", run_id=["g1", "g2"])
    chart = pd.concat([chart, pd.DataFrame({"run_id": ["g1", "g2", "imported-1", "imported-2"], "auroc": [0.7, 0.9, 0.6, 0.95],
                                            "fws": [0.1, 0.0, 0.9, 0.8]})]).assign(method="KGW", model="m", task="qa")
    lines = {name: line for name, line in sweep_lines(chart, pd.concat([points, other]), "auroc", "fws").groupby("line")}
    assert set(lines) == {"KGW", "KGW gamma=0.25", "KGW · m · qa"}
    assert lines["KGW"].strength.tolist() == [1.0, 2.0] and lines["KGW"].auroc.tolist() == pytest.approx([0.85, 1.0])
    assert lines["KGW"].fws.tolist() == pytest.approx([0.6, 0.3]) and lines["KGW gamma=0.25"].fws.tolist() == [0.1, 0.0]
    assert lines["KGW · m · qa"].auroc.tolist() == [0.6, 0.95]
    on_line = 0.6 + (placed.auroc - 0.85) / (1.0 - 0.85) * (0.3 - 0.6)
    assert placed.fws == pytest.approx(on_line)


def test_runs_keep_their_scores_by_length_and_the_commands_read_them(qa_run, tmp_path, capsys):
    store, config, run_id = qa_run
    curves = store.prefix_curves(run_id, "KGW")
    scores = store.detections([run_id]).set_index(["sample_idx", "text_kind"]).score
    for row in curves.itertuples():
        assert row.prefix_statistics[-1] == pytest.approx(scores[(row.sample_idx, row.text_kind)])
    assert main(["detect", "--run", run_id, "--by-length", "--db", str(store.path)]) == 0
    printed = capsys.readouterr().out
    assert f"{run_id} (KGW; its own detection); verdicts at z > 2.33 (nominal 1% FPR)" in printed
    assert "tokens to detect: median" in printed and "never detected" in printed
    from fwsapp.results.report import build_report

    from fwsapp.results.tables import length_table

    report = build_report(store)
    block = next(entry for entry in report["runs"] if entry["run_id"] == run_id)["detection"]
    assert block["tokens_to_detect"]["n"] == 4 and set(block["tpr_at_length"]) == {"16", "32", "64", "full"}
    from fwsapp.detection.verdicts import MinimumLength
    from fwsapp.watermark import methods

    # A service under another key reads the run's lengths (`serve-detection --lengths-from`): their median, as here.
    minimum = MinimumLength.from_run(store, run_id, "KGW", methods.info("KGW").checked_params({"hash_key": 7}))
    assert minimum.tokens == block["tokens_to_detect"]["median"] == 16
    # The report's table says why four texts give no TPR, as the command does; "–" read as not computed yet.
    row = length_table(report).iloc[0]
    assert {row[f"TPR after {size}"] for size in ("16", "32", "64", "full")} == {"not enough data (n = 4)"}
    assert main(["compare", "--runs", run_id, "--tokens", "32", "--db", str(store.path)]) == 1
    printed = " ".join(capsys.readouterr().out.split())  # one run of 4 texts: no TPR at any T, and the reason beside it
    assert "No swept run has a TPR after 32 tokens" in printed
    assert "Runs of more prompts give one: a TPR needs 10 watermarked answers" in printed
    assert "not enough data (n = 4): watermarked texts of 32 tokens or more" in printed


def test_detect_scores_each_texts_best_window_and_refuses_a_method_without_evidence(qa_run, tmp_path, capsys):
    from fwsapp.store import Store
    from tests.conftest import copy_store

    copy_store(qa_run[0], tmp_path / "copy.duckdb")
    db = str(tmp_path / "copy.duckdb")
    run_id = qa_run[2]
    assert main(["detect", "--run", run_id, "--window", "32", "--db", db]) == 0
    printed = capsys.readouterr().out
    assert "best 32-token window past its 1% threshold: watermarked " in printed and "unwatermarked " in printed
    store = Store(db)
    windowed = store.detection_sets([run_id])
    assert list(windowed.window_tokens) == [32]
    scores = store.redetections(list(windowed.set_id))
    assert scores.p.between(1 / 2001, 1).all() and len(scores) == 12  # watermarked, unwatermarked, reference
    assert main(["detect", "--run", run_id, "--method", "EXP-edit", "--window", "32", "--db", db]) == 2
    assert "EXP-edit's score has none" in capsys.readouterr().err
    assert len(store.detection_sets([run_id])) == 1  # refused before any work


def test_a_set_scored_before_curves_were_kept_gets_them_without_rescoring(qa_run, tmp_path, lm):
    from fwsapp.detection.redetect import redetect
    from fwsapp.models.tokenizers import from_huggingface
    from fwsapp.store import Store
    from tests.conftest import copy_store

    copy_store(qa_run[0], tmp_path / "copy.duckdb")
    store = Store(tmp_path / "copy.duckdb")
    run_id = qa_run[2]
    tokenizer = from_huggingface(lm.name, lm.tokenizer)
    set_id = redetect(store, run_id, "EXP-edit", {"n_runs": 20}, tokenizer)
    before = store.redetections([set_id])
    assert store.redetections([set_id], curves=True).prefix_statistics.isna().all()  # no per-token evidence
    assert redetect(store, run_id, "EXP-edit", {"n_runs": 20}, tokenizer, by_length=True) == set_id
    after = store.redetections([set_id], curves=True)
    assert len(after) == len(before) and (after.score.to_numpy() == before.score.to_numpy()).all()
    for row in after.itertuples():
        assert row.prefix_statistics[-1] == row.score and not np.isnan(row.prefix_statistics[15])


@pytest.fixture(scope="module")
def kgw_sweep(lm, tmp_path_factory):
    """KGW at δ 0.5 and 4 on the same 10 qa prompts, 24 new tokens: a sweep the weak end cannot reach 0.75 TPR with."""
    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.store import Store

    store = Store(tmp_path_factory.mktemp("sweep") / "sweep.duckdb")
    run_ids = [run_generation(RunConfig(task="qa", method="KGW", n=10, max_new_tokens=24, batch_size=10, seed=7,
                                        params={"delta": delta}), store, lm) for delta in (0.5, 4.0)]
    return store, run_ids


def test_compare_matches_a_generated_sweep_and_the_fws_page_shows_it(kgw_sweep, capsys, app_db):
    from streamlit.testing.v1 import AppTest

    from fwsapp.results.report import build_report
    from fwsapp.detection.strength import equal_strength
    from tests.conftest import copy_store

    store, run_ids = kgw_sweep
    points, table = equal_strength(store, build_report(store), 0.75, 0.01, 16)
    assert list(points.value) == [0.5, 4.0] and set(points.basis) == {"nominal"}  # 10 negatives: no empirical 1 %
    weak, strong = points.tpr
    assert weak < 0.75 <= strong
    row = table.iloc[0]
    assert row.method == "KGW" and row.strength == "delta" and 0.5 < row.value <= 4.0
    assert main(["compare", "--target-tpr", "0.75", "--tokens", "16", "--db", str(store.path)]) == 0
    printed = capsys.readouterr().out
    assert "Equal strength: TPR 0.75 at 1% FPR after 16 tokens" in printed and row.setting in printed
    assert " Question answering " in printed and " qa " not in printed  # the task as people read it
    assert "TPR after 16 tokens at 1% FPR Threshold" in printed and "run_id" not in printed
    assert main(["compare", "--tokens", "16", "--fpr", "0.001", "--db", str(store.path)]) == 0
    assert "at 0.1% FPR after 16 tokens" in capsys.readouterr().out  # it read "at 0% FPR"
    with pytest.raises(ValueError, match="target TPR must be in"):
        equal_strength(store, build_report(store), 1.5, 0.01, 16)

    copy_store(store, app_db)
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    app.switch_page("pages/fws.py").run()
    app.number_input(key="strength-tpr").set_value(0.75).run()
    app.number_input(key="strength-tokens").set_value(16).run()
    assert not app.exception
    shown = next(frame.value for frame in app.dataframe if "Setting" in frame.value.columns)
    assert shown.loc[0, "Method"] == "KGW" and shown.loc[0, "Setting"] == row.setting
    assert shown.loc[0, "Task"] == "Question answering"  # it read "qa" (seen in Chromium)
    # Headed as read, the TPR with its length and FPR (it read "tpr", beside "run_id" and "value")
    swept = next(frame.value for frame in app.dataframe if "Threshold" in frame.value.columns)
    assert list(swept.columns[:8]) == ["Method", "Model", "Task", "Strength parameter", "Value", "Run",
                                       "TPR after 16 tokens at 1% FPR", "Threshold"]
    assert list(swept.Run) == run_ids
    app.switch_page("pages/detect.py").run()  # the Length tab's TPR after T: 0.700 beside 1.000 (it read 0.7 beside 1)
    rates = next(frame for frame in app.dataframe if {"T", "TPR", "FPR"} <= set(frame.value.columns))
    assert rates.value.TPR.notna().any()
    assert json.loads(rates.proto.columns)["TPR"]["type_config"]["format"] == "%.3f"


def test_equal_strength_opens_at_a_length_every_swept_runs_answers_reach(kgw_sweep, capsys, app_db):
    """T opened at 64 tokens, longer than these 24-token answers: the FWS page opened on "No swept run has a TPR after
    64 tokens ... Choose a smaller T", and `compare` without --tokens found nothing. T is now the longest multiple of 8
    that ten answers of every swept run reach (64 at most), and past that the advice names the T that gives one."""
    from streamlit.testing.v1 import AppTest

    from fwsapp.detection.length import run_curves
    from fwsapp.detection.strength import default_tokens, reached_tokens
    from tests.conftest import copy_store

    store, run_ids = kgw_sweep
    tenth_longest = [sorted(map(len, run_curves(store, run_id).positives))[-10] for run_id in run_ids]
    reached = reached_tokens(store)
    tokens = default_tokens(reached)
    assert reached == min(tenth_longest) and tokens == reached // 8 * 8 and 8 <= tokens < 64
    assert reached_tokens(store, run_ids=[]) is None and default_tokens(None) == 64  # no sweep: the default stands
    assert main(["compare", "--target-tpr", "0.75", "--db", str(store.path)]) == 0
    assert f"after {tokens} tokens" in capsys.readouterr().out

    copy_store(store, app_db)
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    app.switch_page("pages/fws.py").run()
    assert app.number_input(key="strength-tokens").value == tokens
    assert not app.warning and any("Setting" in frame.value.columns for frame in app.dataframe)
    app.number_input(key="strength-tokens").set_value(64).run()  # past what the answers reach: the advice names a T
    assert f"Choose a T of {reached} or fewer" in " ".join(warning.value for warning in app.warning)


def test_runs_that_pair_but_share_no_setting_say_what_each_setting_lacks(kgw_sweep, lm, tmp_path, capsys):
    """A SynthID run on the sweep's prompts and seed pairs with a KGW run, but SynthID has no δ and 24-token texts no
    TPR after 64 tokens: the reason said "No runs pair ... differ in nothing but a TPR after the tokens asked"."""
    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.store import Store
    from tests.conftest import copy_store

    copy_store(kgw_sweep[0], tmp_path / "copy.duckdb")
    store = Store(tmp_path / "copy.duckdb")
    synthid = run_generation(RunConfig(task="qa", method="SynthID", n=10, max_new_tokens=24, batch_size=10, seed=7),
                             store, lm)
    assert main(["paired", "--method", "SynthID", "--against", "KGW", "--tokens", "64", "--db", str(store.path)]) == 1
    printed = " ".join(capsys.readouterr().out.split())
    assert any(f"Runs {synthid} (SynthID) and {kgw} (KGW) pair, but neither setting compares them" in printed
               for kgw in kgw_sweep[1])
    assert "equal δ needs one strength parameter, and SynthID's is depth, KGW's delta" in printed
    assert (f"TPR after 64 tokens at 1% FPR ({synthid}: not enough data (n = 0): watermarked texts of 64 tokens or "
            "more;") in printed
    assert "Choose a T of 24 or fewer" in printed  # what gives one, where it said "A smaller T, or ..."


def test_a_run_without_stored_curves_gets_them_from_its_text_once(qa_run, tmp_path):
    from fwsapp.orchestration import pipeline
    from fwsapp.detection.length import run_curves
    from fwsapp.store import Store
    from tests.conftest import copy_store

    copy_store(qa_run[0], tmp_path / "copy.duckdb")
    store = Store(tmp_path / "copy.duckdb")
    run_id = qa_run[2]
    with store.transaction() as cursor:  # as a run stored before curves were kept
        cursor.execute("UPDATE detections SET prefix_statistics = NULL WHERE run_id = ?", [run_id])
    assert run_curves(store, run_id) is None
    no_model = lambda name: None  # noqa: E731  (KGW detects from the text alone)
    [made] = pipeline.lengths(store, [run_id], no_model)
    found = run_curves(store, run_id)
    assert found.source == made.set_id and len(found.positives) == 4 and found.negative_kind == "unwatermarked"
    assert pipeline.lengths(store, [run_id], no_model) == []  # a repeated command changes nothing
    assert len(store.detection_sets([run_id])) == 1


def test_a_method_detected_again_at_some_lengths_only_reads_nothing_between_them(lm, tmp_path):
    """DuckDB gives a curve's unscored lengths back masked, which read as 0: a p-value of 0, so an EXP-edit answer known
    at 16 tokens and at its end was "detected after 1 token", and one not detected at 16 "after 17"."""
    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store

    store = Store(tmp_path / "edit.duckdb")
    run_id = run_generation(RunConfig(task="qa", method="EXP-edit", n=4, max_new_tokens=20, batch_size=4, seed=7,
                                      params={"n_runs": 20}), store, lm)
    pipeline.lengths(store, [run_id], lambda name: lm)
    curves = length.run_curves(store, run_id)
    threshold = length.length_threshold("EXP-edit", curves.params, 0.01)
    for curve in curves.positives + curves.negatives:
        assert np.isnan(curve[:15]).all() and not np.isnan(curve[15]) and not np.isnan(curve[-1])
        assert length.tokens_to_detect(curve, threshold) in (16, len(curve), math.inf)
