"""Issue 15: what a newcomer or a clinician tripped over, page by page, each pinned by an AppTest."""
import time

import pytest
from streamlit.testing.v1 import AppTest

from fwsapp.generate import RunConfig, run_generation
from tests.conftest import PROJECT

APP = str(PROJECT / "app.py")


@pytest.fixture
def app_db(tmp_path, monkeypatch):
    monkeypatch.setenv("FWSAPP_DB", str(tmp_path / "app.duckdb"))
    return tmp_path / "app.duckdb"


def open_page(page: str) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    if page != "generate":
        app.switch_page(f"pages/{page}.py").run()
    assert not app.exception, app.exception
    return app


def by_label(widgets, label):
    return next(widget for widget in widgets if widget.label == label)


# Generate and jobs

def test_generation_progress_moves_inside_a_batch_as_large_as_the_run(lm, store):
    calls = []
    config = RunConfig(task="qa", method="KGW", n=2, max_new_tokens=8, batch_size=2, seed=1)
    run_generation(config, store, lm, progress=lambda done, total, note="": calls.append((done, total, note)))
    before_the_batch_ends = [note for done, _, note in calls if done == 0 and note]
    assert "batch 1 of 1: unwatermarked text, token 4 of 8" in before_the_batch_ends
    assert "batch 1 of 1: watermarked text, token 8 of 8" in before_the_batch_ends
    assert calls[-1][:2] == (2, 2)


def test_generate_form_keeps_the_running_job_and_names_it(app_db):
    app = open_page("generate")
    by_label(app.selectbox, "Task").select("qa").run()
    by_label(app.selectbox, "Watermark").select("SWEET").run()
    by_label(app.number_input, "Samples").set_value(1).run()
    by_label(app.number_input, "New tokens").set_value(8).run()
    by_label(app.button, "Run").click().run()
    app.switch_page("pages/detect.py").run()
    app.switch_page("pages/generate.py").run()
    assert by_label(app.selectbox, "Task").value == "qa"
    assert by_label(app.selectbox, "Watermark").value == "SWEET"
    assert by_label(app.number_input, "New tokens").value == 8
    deadline = time.time() + 180
    while time.time() < deadline and not any("Latest samples of" in c.value for c in app.caption):
        time.sleep(1)
        app.run()
    caption = next(c.value for c in app.caption if "Latest samples of" in c.value)
    assert "SWEET" in caption and "Question" in caption


def test_parameter_labels_break_between_words(app_db):
    app = open_page("generate")
    by_label(app.selectbox, "Watermark").select("EXP-edit").run()
    labels = [widget.label for widget in app.number_input]
    assert "pseudo length" in labels and not any("_" in label for label in labels)


# Detect

def copy_store(store, target):
    import shutil

    store.cursor().execute("CHECKPOINT")
    shutil.copy(store.path, target)


@pytest.fixture
def detect_app(app_db, qa_run):
    """The Detect page over the session's 4-sample KGW run plus a run whose generation has stored nothing yet."""
    from fwsapp.store import Store

    store, config, run_id = qa_run
    copy_store(store, app_db)
    db = Store(app_db)
    starting = RunConfig(task="qa", method="SWEET", n=4, max_new_tokens=8, seed=3)
    db.ensure_run(starting.run_id(), starting.identity(), model=starting.model, task="qa", method="SWEET",
                  params=starting.params, seed=3, n=4, score_direction="higher")
    db.close()
    app = open_page("detect")
    return app, run_id, starting.run_id()


def test_detect_page_waits_for_a_run_with_no_samples_yet(detect_app):
    app, run_id, starting = detect_app
    app.multiselect(key="detect-runs").set_value([starting]).run()
    assert not app.exception
    app.multiselect(key="detect-runs").set_value([run_id, starting]).run()
    assert not app.exception
    [offered] = app.selectbox(key="token-run").options  # the run with samples only
    assert run_id in offered


def test_detect_page_warns_about_small_samples_and_draws_readable_charts(detect_app):
    import json

    app, run_id, _ = detect_app
    warning = next(w.value for w in app.warning if "Too few negatives" in w.value)
    assert f"{run_id}: 4 negatives, so TPR@FPR=0.01, 0.05 is unresolved" in warning
    roc, histogram = (json.loads(chart.proto.spec) for chart in app.get("plotly_chart"))
    assert all("{" not in trace["name"] for trace in roc["data"])  # no raw parameter JSON in the legend
    assert any(trace["name"].startswith("KGW · qa · defaults · ") for trace in roc["data"])
    axes = [value for key, value in histogram["layout"].items() if key.startswith("xaxis")]
    assert axes and all("matches" not in axis for axis in axes)  # one score scale per panel
    comparison = app.dataframe[0].value
    assert comparison.loc[0, "params"] == "defaults" and comparison.loc[0, "n negatives"] == 4


def test_pasted_text_too_short_for_a_verdict_is_flagged_and_exp_edit_says_it_has_no_token_colours(detect_app):
    app, _, _ = detect_app
    detect = lambda: by_label(app.button, "Detect")  # noqa: E731
    app.text_area[0].set_value("Hi.").run()
    detect().click().run()
    assert any("tokens were scored. A verdict needs about 25" in w.value for w in app.warning)
    app.selectbox(key="paste-method").set_value("EXP-edit").run()
    app.text_area[0].set_value("Diabetes is a chronic disease in which the body cannot use insulin well, "
                               "so blood sugar stays high and damages the eyes, kidneys and nerves.").run()
    detect().click().run()
    assert not app.exception
    assert any("scores the text as a whole" in info.value for info in app.info)


# Quality

def test_perplexity_progress_counts_samples_and_writes_each_chunk(qa_run, lm, tmp_path, monkeypatch):
    from fwsapp.metrics import quality
    from fwsapp.store import Store

    source, _, run_id = qa_run
    copy_store(source, tmp_path / "score.duckdb")
    store = Store(tmp_path / "score.duckdb")
    monkeypatch.setattr(quality, "PPL_CHUNK", 2)
    calls, stored = [], []
    resources = quality.QualityResources(model_loader=lambda name: lm)
    original = store.write_rows
    monkeypatch.setattr(store, "write_rows", lambda *args: (stored.append(len(args[2])), original(*args)))
    quality.score_run(store, run_id, resources, metrics=("ppl", "rouge"),
                      progress=lambda done, total, note="": calls.append((done, total, note)))
    assert (2, 8, "ppl") in calls and (4, 8, "ppl") in calls and calls[-1][:2] == (8, 8)
    assert stored[:2] == [4, 4]  # two samples × two texts per chunk, written as they finish


def test_imported_runs_get_perplexity_only_from_a_named_oracle_with_consent(app_db):
    from tests.conftest import judged_rating_db

    run_id = judged_rating_db(app_db)
    app = open_page("quality")
    plan = app.dataframe[0].value
    assert plan.loc[0, "oracle"] == "none (name one)" and plan.loc[0, "samples to score"] == 0
    assert any(run_id in info.value and "no perplexity until an oracle is named" in info.value for info in app.info)
    app.text_input(key="score-oracle").set_value("smollm2-135m-instruct").run()
    plan = app.dataframe[0].value
    assert plan.loc[0, "samples to score"] == 3 and not plan.loc[0, "own generator"]
    compute = by_label(app.button, "Compute")
    assert compute.disabled
    consent = app.checkbox(key="score-consent")
    assert "not comparable" in consent.label and "meditron" in consent.label
    consent.check().run()
    assert not by_label(app.button, "Compute").disabled
    assert any("min" in caption.value and "tokens to read" in caption.value for caption in app.caption)


def test_quality_table_names_the_oracle_and_never_bolds_a_self_similarity(app_db, qa_run, lm):
    import json

    from fwsapp.metrics.quality import QualityResources, score_run
    from fwsapp.store import Store

    store, _, run_id = qa_run
    copy_store(store, app_db)
    with_metrics = Store(app_db)
    score_run(with_metrics, run_id, QualityResources(model_loader=lambda name: lm), metrics=("ppl", "simcse", "simcse_reference"))
    with_metrics.close()
    app = open_page("quality")
    table = next(frame.value for frame in app.dataframe if "PPL oracle" in frame.value.columns)
    plain = table[table.Method == "Unwatermarked"].iloc[0]
    assert plain["PPL oracle"] == "smollm2-135m-instruct" and plain["n"] == 4 and plain["source"] == "generated"
    assert plain["SimCSE"] is None or plain["SimCSE"] != plain["SimCSE"]  # none of its own
    assert -1 <= plain["SimCSE to ref."] <= 1
    box = json.loads(app.get("plotly_chart")[0].proto.spec)
    assert {trace["x"][0] for trace in box["data"]} == {"smollm2-135m-instruct · KGW"}
