"""The pages in streamlit's AppTest: the Generate page runs a job, the Detect page shows its scores."""
import base64
import html
import json
import re
import time

import numpy as np
import pandas as pd

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import PROJECT, copy_store, imported_qa_db, shown, written_cells

APP = str(PROJECT / "app.py")


def page_app(page: str) -> AppTest:
    """The app opened, then switched to one of its pages (`pages/{page}.py`), on the test's database."""
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    app.switch_page(f"pages/{page}.py").run()
    return app


def run_until(app: AppTest, condition, timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        app.run(timeout=60)
        if condition(app):
            return
        time.sleep(1)
    raise AssertionError("condition not reached; page shows: " + " | ".join(m.value for m in app.markdown))


def test_generate_page_runs_a_job_and_shows_both_texts(app_db):
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert not app.exception
    assert app.title[0].value == "fwsapp"  # the Home page opens first
    app.switch_page("pages/generate.py").run()
    assert app.title[0].value == "Generate"
    app.selectbox[0].select("qa").run()
    inputs = {widget.label: widget for widget in app.number_input}
    inputs["Samples"].set_value(2)
    inputs["New tokens"].set_value(16)
    inputs["Batch size"].set_value(2)
    app.button[0].click().run()
    assert not app.exception
    run_until(app, lambda a: any("Watermarked" in m.value for m in a.markdown))
    texts = [m.value for m in app.markdown]
    assert any(text.startswith("**Watermarked** · z = ") for text in texts)
    assert any(text.startswith("**Unwatermarked** · z = ") for text in texts)


def test_detect_page_shows_metrics_and_detects_pasted_text(app_db, qa_run):
    import shutil

    store, config, run_id = qa_run
    store.row("CHECKPOINT")
    shutil.copy(store.path, app_db)
    app = page_app("detect")
    assert not app.exception
    assert app.title[0].value == "Detect"
    metrics = app.dataframe[0].value
    assert metrics.loc[0, "AUROC"] == 1.0
    assert metrics.loc[0, "statistic"] == "mean z" and metrics.loc[0, "positives' typical score"] > 4
    assert metrics.loc[0, "negatives"] == "unwatermarked"
    assert {"TPR@FPR=0", "TPR@FPR=0.01", "TPR@FPR=0.05", "AUROC 95% CI", "tokens scored"} <= set(metrics.columns)
    assert list(metrics.columns[:5]) == ["method", "settings", "task", "n positives", "AUROC"]  # who, then the answer
    assert metrics.loc[0, "settings"] == "delta=2 (defaults)"
    stored = store.detections([run_id])
    passed = int((stored.loc[stored.text_kind == "watermarked", "score"] > 4).sum())  # KGW's own verdict, z > 4
    assert metrics.loc[0, "detected at its threshold"] == f"{passed / 4:.2f} ({passed} of 4; z > 4)"
    lengths = app.dataframe[1].value  # the Length tab: 4 watermarked texts of 64 tokens, their own detection's curves
    assert lengths.loc[0, "verdict at"] == "z > 2.33 (nominal 1% FPR)" and lengths.loc[0, "watermarked texts"] == 4
    assert lengths.loc[0, "scores from"] == "generation" and lengths.loc[0, "never detected"] < 4
    rates = app.dataframe[2].value  # 4 texts: too few for a rate (sample_size), so no TPR and no curve of it
    assert list(rates["T"]) == ["16", "32", "64", "full"] and (rates.texts == 4).all()
    assert (rates.TPR == "not enough data (n = 4)").all()  # as `detect --by-length` prints it, where it read "None"
    steps = json.loads(app.get("plotly_chart")[0].proto.spec)["data"][0]  # share detected by T, never detected kept
    tokens, shares = (np.frombuffer(base64.b64decode(steps[axis]["bdata"]), steps[axis]["dtype"]) for axis in "xy")
    assert tokens[0] == 0 and shares[-1] == pytest.approx(1 - lengths.loc[0, "never detected"] / 4)
    assert tokens[-1] == 64  # held to the texts' end
    lengths_by_answer = app.dataframe[3].value  # measured, and predicted once `detect --predict` has read them
    assert lengths_by_answer.loc[0, "answers"] == 4 and lengths_by_answer.loc[0, "answers under 200 tokens"] == 4
    assert lengths_by_answer.loc[0, "predicted median"] == "not predicted yet"  # it read None
    assert lengths_by_answer.loc[0, "measured median"] is not None
    calibration = app.dataframe[4].value  # 4 negatives: the rates are stated, the empirical thresholds are not
    assert calibration.loc[0, "tokens scored"] == "all" and calibration.loc[0, "theoretical threshold"] == "z > 4"
    assert calibration.loc[0, "false positives"] == "0 of 4" and calibration.loc[0, "achieved FPR"] == 0
    assert calibration.loc[0, "threshold at 1% FPR"] == "not enough data (n = 4)"
    coverage = app.dataframe[5].value  # KGW acts on every token it generated: nothing flagged
    assert coverage.loc[0, "watermarked share"] == 1.0 and coverage.loc[0, "flags"] == ""
    per_text = app.dataframe[6].value
    assert len(per_text) == 8
    # KGW's score is its z, shown once (a z column repeated it), and the columns are named as read ("run id" was one)
    assert list(per_text.columns[:6]) == ["run", "method", "sample", "text", "score is", "score"]
    assert "z" not in per_text.columns and set(per_text["score is"]) == {"z"}
    assert per_text.score.str.fullmatch(r"-?\d+\.\d{3}").all()  # KGW's z, three decimals, as everywhere
    assert len(app.get("plotly_chart")) == 3  # tokens to detect, the ROC overlay, the score distributions
    assert "span" in next(m.value for m in app.markdown if "background:" in m.value)  # the token view

    detect = lambda: next(b for b in app.button if b.label == "Detect")  # noqa: E731
    app.text_area[0].set_value("").run()
    detect().click().run()
    assert "The text is empty" in app.error[0].value

    watermarked = store.generations(run_id).watermarked_text[0]
    app.text_area[0].set_value(watermarked).run()
    detect().click().run()
    assert not app.exception
    z = float(app.metric[0].value)
    assert z > 2
    assert any("Verdict at z > 4:" in m.value for m in app.markdown)

    from fwsapp.ui.render import WINDOW_STYLE

    app.number_input(key="paste-window").set_value(32).run()
    detect().click().run()
    windowed = next(m.value for m in app.markdown if m.value.startswith("WinMax over 32-token windows: z "))
    assert "threshold for this length at 1% FPR" in windowed and "p = " in windowed
    first, end = map(int, re.search(r"at tokens (\d+)–(\d+) \(underlined below\)", windowed).groups())
    view = next(m.value for m in app.markdown if WINDOW_STYLE in m.value)
    assert view.count(WINDOW_STYLE) == end - first + 1  # the best window's tokens, and only those, are underlined
    assert f"underlined in purple = the best window (WinMax), tokens {first}–{end}" in "".join(
        c.value for c in app.caption)


def test_a_64_bit_key_is_typed_as_text_and_a_wrong_one_is_named(app_db):
    """A browser's number input holds whole numbers up to 2^53 − 1; vLLM's keys go to 2^64 − 1 (issue 47)."""
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    app.switch_page("pages/detect.py").run()
    app.selectbox(key="paste-method").set_value("vLLM-Gumbel").run()
    assert not app.exception
    app.text_input(key="paste-vLLM-Gumbel-key").set_value(str(2**64 - 1)).run()
    app.text_area[0].set_value("Type 2 diabetes is managed with diet, exercise and metformin.").run()
    detect = next(button for button in app.button if button.label == "Detect")
    detect.click().run()
    assert not app.exception and not app.error and app.metric[0].label == "p"
    app.text_input(key="paste-vLLM-Gumbel-key").set_value("twelve").run()
    next(button for button in app.button if button.label == "Detect").click().run()
    # The parameter is named and what is wrong said; the value, a key, is not shown.
    assert "key" in app.error[0].value and "not a number" in app.error[0].value and "twelve" not in app.error[0].value


def test_detect_page_runs_a_sweep_and_overlays_its_roc_curves(app_db):
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    app.switch_page("pages/detect.py").run()
    app.multiselect(key="sweep-KGW-delta").set_value([1.0, 2.0]).run()
    app.multiselect(key="sweep-KGW-gamma").set_value([0.5]).run()
    app.number_input(key="sweep-n").set_value(2).run()
    app.number_input(key="sweep-tokens").set_value(8).run()
    next(b for b in app.button if b.label == "Run sweep").click().run()
    run_until(app, lambda a: any("Sweep finished: 2 runs" in shown(s.value) for s in a.success), timeout=240)
    app.run()
    comparison = app.dataframe[0].value
    assert len(comparison) == 2 and set(comparison.method) == {"KGW"}
    assert set(comparison.settings) == {"delta=1", "delta=2 (defaults)"}  # delta 2 is KGW's default
    assert len(app.get("plotly_chart")) == 3  # the share detected by T (none, perhaps, in 8 tokens), ROC, the scores


def test_detect_page_without_runs_says_what_to_do_and_loads_the_example_data_in_place(app_db):
    app = page_app("detect")
    assert "No runs yet" in app.info[0].value
    next(button for button in app.button if button.label == "Load the example data").click().run()
    assert not app.exception and len(app.multiselect[0].value) == 4  # four of the six example runs, compared at once


def wait_for_judge(app: AppTest) -> None:
    """Until the judge job ends: a success, or an error when no verdict came back at all."""
    run_until(app, lambda a: any("Judged" in shown(s.value) for s in a.success)
              or any("could be read" in e.value for e in a.error), timeout=240)


def test_judge_page_runs_the_local_backend_on_a_demo_run(app_db, lm):
    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.store import Store

    demo = Store(app_db)
    run_generation(RunConfig(task="qa", method="KGW", n=2, max_new_tokens=16, batch_size=2), demo, lm)
    demo.close()
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    app.switch_page("pages/judge.py").run()
    assert not app.exception
    assert app.radio(key="judge-backend").value == "local"
    assert "2 pairs to judge (0 already judged)" in " ".join(m.value for m in app.markdown)
    next(b for b in app.button if b.label == "Judge").click().run()
    wait_for_judge(app)
    verdicts = app.dataframe[-1].value
    assert len(verdicts) == 2 and set(verdicts.status) <= {"ok", "failed"}
    assert all(verdicts.loc[verdicts.status == "failed", "reason"].str.len() > 0)
    # The demo-only judge rarely gives a parsable verdict: when none came back, the page says so in red.
    if (verdicts.status == "failed").all():
        assert not app.success and "could be read" in app.error[0].value


def test_judge_page_uses_a_compatible_server(app_db, tmp_path):
    from tests.openai_stub import StubServer

    imported_qa_db(app_db, n=5)
    with StubServer(latency=0.05) as stub:
        stub.plan = {"condition 2?": ["500", "valid"]}
        app = page_app("judge")
        app.radio(key="judge-backend").set_value("compatible").run()
        app.text_input(key="judge-base-url").set_value(stub.base_url).run()
        app.text_input(key="judge-model-compatible").set_value("stub-judge").run()
        # No price is known for stub-judge: a cap on its spend could never be reached.
        assert next(box for box in app.checkbox if box.label == "Budget cap").disabled
        key = "sk-typed-on-the-page-7731"
        app.text_input(key="judge-api-key-compatible").set_value(key).run()
        next(b for b in app.button if b.label == "Test connection").click().run()
        assert "compatible backend answered with model stub-judge" in shown(app.success[0].value)
        next(b for b in app.button if b.label == "Judge").click().run()
        wait_for_judge(app)
    assert not app.exception
    verdicts = app.dataframe[-1].value
    assert len(verdicts) == 5 and set(verdicts.status) == {"ok"}
    assert len(app.get("plotly_chart")) == 1
    # The typed key went to the server with every request, and into nothing stored.
    assert {headers.get("authorization") for headers in stub.headers_seen} == {f"Bearer {key}"}
    from fwsapp.store import Store

    db = Store(app_db)
    for (table,) in db.rows("SELECT table_name FROM information_schema.tables"):
        assert key not in db.frame(f'SELECT * FROM "{table}"').to_csv(), table


def test_quality_page_computes_model_free_metrics_on_open_and_perplexity_on_request(app_db, qa_run):
    store, config, run_id = qa_run
    copy_store(store, app_db)
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    app.switch_page("pages/quality.py").run()
    assert not app.exception
    run_until(app, lambda a: any("Computed" in shown(s.value) for s in a.success), timeout=240)  # nothing pressed
    said = " ".join(shown(s.value) for s in app.success)
    assert "SimCSE" in said and "Perplexity" not in said
    tables = [frame.value.data if hasattr(frame.value, "data") else frame.value for frame in app.dataframe]  # Stylers
    table = next(t for t in tables if "Method" in t.columns)
    assert table["PPL"].isna().all() and table["SimCSE to ref."].between(0, 1).all()
    next(b for b in app.button if b.label == "Compute").click().run()
    run_until(app, lambda a: any("Perplexity" in shown(s.value) for s in a.success), timeout=240)
    tables = [frame.value.data if hasattr(frame.value, "data") else frame.value for frame in app.dataframe]
    plan = next(t for t in tables if "samples to score" in t.columns)
    assert plan["samples to score"].tolist() == [0]  # the perplexity plan, redrawn after the job: nothing left
    table = next(t for t in tables if "Method" in t.columns)
    assert list(table.Method) == ["Unwatermarked", "KGW"]
    assert {"PPL", "SimCSE", "ROUGE-2", "F1", "Disease-entity support (offline stand-in)"} <= set(table.columns)
    assert "AlignScore" not in " ".join(table.columns)
    # The unwatermarked text is the baseline SimCSE compares with, so it has no SimCSE of its own.
    assert pd.isna(table.loc[table.Method == "Unwatermarked", "SimCSE"].item())
    assert 0 < table.loc[table.Method == "KGW", "SimCSE"].item() < 1
    assert table["SimCSE to ref."].between(0, 1).all()
    assert table.loc[table.Method == "KGW", "PPL"].item() > 1
    # The distributions name metrics as the table does, in the registry's order.
    assert app.selectbox(key="dist-metric").options[:4] == ["PPL", "SimCSE", "SimCSE to ref.", "ROUGE-2"]


def test_the_quality_distributions_draw_the_tasks_in_their_order(app_db):
    """A summarization run stored before a completion run drew Summarization's panel first; every table and the Judge
    page's chart have completion, then QA, then summarization."""
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store

    store = Store(app_db)
    for task in ("summarization", "completion"):
        rows = [{"prompt": f"Prompt {i}.", "watermarked_text": f"Rest and fluids for case {i}.",
                 "unwatermarked_text": f"Rest for case {i}.", "natural_text": f"Fluids for case {i}."} for i in range(3)]
        import_logs(store, method="KGW", model="meditron", task_name=task,
                    generations=LogFile("g.json", json.dumps(rows).encode()))
    store.close()
    app = page_app("quality")
    app.selectbox(key="dist-metric").select("rougeL").run()  # an import's own: stored for both runs
    assert not app.exception
    boxes = json.loads(app.get("plotly_chart")[-1].proto.spec)
    panels = sorted(boxes["layout"]["annotations"], key=lambda note: note["x"])
    assert [note["text"] for note in panels] == ["Text completion", "Summarization"]


def test_the_quality_distributions_draw_the_runs_in_the_tables_order(app_db):
    """The boxes stood in the order the runs' values were stored (SWEET before KGW), the table above in its own."""
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store

    store = Store(app_db)
    for method in ("SWEET", "KGW"):
        rows = [{"prompt": f"Prompt {i}.", "watermarked_text": f"Rest and fluids for case {i} ({method}).",
                 "unwatermarked_text": f"Rest for case {i}.", "natural_text": f"Fluids for case {i}."} for i in range(3)]
        import_logs(store, method=method, model="meditron", task_name="qa",
                    generations=LogFile("g.json", json.dumps(rows).encode()))
    store.close()
    app = page_app("quality")
    app.selectbox(key="dist-metric").select("rougeL").run()
    boxes = json.loads(app.get("plotly_chart")[-1].proto.spec)
    tables = [frame.value.data if hasattr(frame.value, "data") else frame.value for frame in app.dataframe]  # Stylers
    table = next(t for t in tables if "Method" in t.columns)
    assert boxes["layout"]["xaxis"]["categoryarray"] == [
        f"meditron · {row.Method} · {row.Settings}" for row in table[table.Method != "Unwatermarked"].itertuples()]


def test_quality_and_fws_open_while_a_run_has_no_sample_yet(app_db):
    """A run that is generating its first batch has 0 stored samples: the pages open, and its missing work is none."""
    from fwsapp.quality.scoring import missing_work
    from fwsapp.store import Store

    imported_qa_db(app_db, n=2)
    store = Store(app_db)
    store.ensure_run("gen-running", {"task": "qa"}, model="smollm2", task="qa", method="KGW", params={"delta": 2.0},
                     seed=0, n=4)
    work = missing_work(store, ["gen-running"])
    from fwsapp.results.report import build_report
    from fwsapp.results.tables import runs_table

    assert runs_table(build_report(store)).set_index("Run").Status["gen-running"] == "generating: 0 of 4 samples so far"
    store.close()
    assert (work.run_ids, work.metrics, work.values, work.seconds) == ([], [], 0, 0.0)
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    for page in ("pages/quality.py", "pages/fws.py"):
        app.switch_page(page).run()
        assert not app.exception, page
    app.switch_page("pages/robustness.py").run()  # a run still generating is no job's input
    offered = app.multiselect(key="attack-runs")
    assert offered.options and not any("gen-running" in option for option in offered.options)
    assert any("Left out until their texts are stored: gen-running" in caption.value for caption in app.caption)


def biomistral_then_meditron(path) -> tuple[str, str]:
    """A BioMistral run (its tokenizer shipped), then a meditron one (its tokenizer not), both imported; their ids."""
    import json

    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store

    rows = [{"prompt": "What is gout?", "watermarked_text": "Gout is arthritis.", "unwatermarked_text": "Gout hurts.",
             "natural_text": "Gout is a form of arthritis."}]
    store = Store(path)
    biomistral = import_logs(store, method="KGW", model="biomistral", task_name="qa",
                             generations=LogFile("g.json", json.dumps(rows).encode()))
    store.close()
    return biomistral, imported_qa_db(path, n=2)


def test_the_attack_form_opens_on_a_run_it_can_attack(app_db):
    """After a meditron run (whose tokenizer is not shipped) was imported over a BioMistral run, the form chose the
    newest run and opened on a red error: it chooses the newest run whose tokenizer is had here."""
    attackable, meditron = biomistral_then_meditron(app_db)
    app = page_app("robustness")
    assert list(app.multiselect(key="attack-runs").options)[0].endswith(meditron)  # newest first, as every form
    assert app.multiselect(key="attack-runs").value == [attackable] and not app.error
    app.multiselect(key="attack-runs").set_value([meditron]).run()
    assert any("is not on this machine" in error.value for error in app.error)  # still said when chosen


def test_the_redetect_form_opens_on_a_run_it_can_detect_and_says_a_missing_tokenizer_before_the_click(app_db):
    """The Re-detect form chose the newest run, meditron, with its tokenizer (not on this machine) filled in, and the
    job failed after the click: the form opens on a run whose tokenizer is here, and says at once why another cannot."""
    biomistral, meditron = biomistral_then_meditron(app_db)
    app = page_app("detect")
    redetect = next(button for button in app.button if button.label == "Re-detect")
    assert app.selectbox(key="redetect-run").value == biomistral and not redetect.disabled
    errors = len(app.error)  # the Length tab's, on the runs it cannot score by length
    app.selectbox(key="redetect-run").set_value(meditron).run()
    assert len(app.error) == errors + 1 and "is not on this machine" in app.error[-1].value
    assert next(button for button in app.button if button.label == "Re-detect").disabled
    app.text_input(key=f"redetect-tokenizer-{meditron}").set_value("llama-3").run()
    assert len(app.error) == errors and not next(button for button in app.button if button.label == "Re-detect").disabled


def test_values_computed_again_under_a_new_version_say_so_before_and_while_they_are(app_db):
    """After a recognizer's upgrade the Quality page computed, with a progress bar and no word of why, values the user
    had seen: the work says how many of its values replace ones of an earlier version, and the page says it."""
    from fwsapp.quality.base import metric_row
    from fwsapp.quality.scoring import QualityResources, missing_work, stored_as
    from fwsapp.store import Store

    run_id = imported_qa_db(app_db, n=2)
    store = Store(app_db)
    name, config, kinds = stored_as("factuality", store.run(run_id), QualityResources(model_loader=None))
    before = missing_work(store, [run_id])
    assert before.replaces == 0
    store.write_rows("metrics", run_id, [metric_row(sample, kind, name, config.replace(" v", " v0."), 0.5)
                                         for sample in range(2) for kind in kinds])
    after = missing_work(store, [run_id])
    store.close()
    assert (after.values, after.replaces) == (before.values, 2)  # both samples' disease support, once each
    assert "factuality" in after.metrics and "rouge" not in after.metrics  # an import brings ROUGE: not offered
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    app.switch_page("pages/fws.py").run()  # the page that offers the work on a button, so its line stays
    assert not app.exception
    assert any(f"{after.values:,} values (2 of them in place of values computed under an earlier version of a "
               "recognizer or of the facts)" in block.value for block in app.info), [block.value for block in app.info]


def test_why_values_are_computed_again_is_said_to_everyone_who_has_the_page_open(app_db, monkeypatch):
    """The line saying why a job computes values again was kept in the session that started it: a second viewer saw
    the progress bar alone. It goes with the job."""
    import threading

    from fwsapp.orchestration.jobs import JobManager
    from fwsapp.quality.base import metric_row
    from fwsapp.quality.scoring import QualityResources, stored_as
    from fwsapp.store import Store

    run_id = imported_qa_db(app_db, n=2)
    store = Store(app_db)
    name, config, kinds = stored_as("factuality", store.run(run_id), QualityResources(model_loader=None))
    store.write_rows("metrics", run_id, [metric_row(sample, kind, name, config.replace(" v", " v0."), 0.5)
                                         for sample in range(2) for kind in kinds])
    store.close()
    release = threading.Event()
    monkeypatch.setattr(JobManager, "start_scoring", lambda self, run_ids, *args: self.start(
        "score", "held", "Scoring", lambda progress, cancel: release.wait(60) and "done"))
    try:
        starter = AppTest.from_file(APP, default_timeout=120)
        starter.run()
        starter.switch_page("pages/fws.py").run()
        starter.button(key="model-free-compute").click().run()
        viewer = AppTest.from_file(APP, default_timeout=120)  # another person's session, while the job runs
        viewer.run()
        viewer.switch_page("pages/quality.py").run()
        assert not viewer.exception
        said = [shown(caption.value) for caption in viewer.caption]
        assert any(caption.startswith("Computing 6 values of SimCSE") and ", Factuality, 2 of them in place of values "
                   "computed under an earlier version" in caption for caption in said), said
    finally:
        release.set()


def test_fws_sliders_change_the_table_to_hand_computed_values(app_db):
    from fwsapp.ui.render import message
    from tests.conftest import judged_rating_db

    judged_rating_db(app_db, n=2)  # watermarked judge scores [4,2,3] and [2,2,2]; unwatermarked [5,5,5], [3,3,3]
    app = page_app("fws")
    assert not app.exception
    table = app.dataframe[0].value.set_index("Method")
    assert table.loc["KGW", "Question answering"] == pytest.approx((0.56 + 0.40) / 2, abs=5e-4)
    columns = json.loads(app.dataframe[0].proto.columns)  # 0.540 beside 0.595, not 0.54
    assert columns["Question answering"]["type_config"]["format"] == "%.3f"
    assert table.loc["Unwatermarked", "Question answering"] == pytest.approx((1.0 + 0.6) / 2, abs=5e-4)
    app.radio(key="fws-mode").set_value("Free α and β").run()
    app.slider(key="fws-alpha").set_value(0.3).run()
    app.slider(key="fws-beta").set_value(0.4).run()
    table = app.dataframe[0].value.set_index("Method")
    assert table.loc["KGW", "Question answering"] == pytest.approx((0.62 + 0.40) / 2, abs=5e-4)
    # One place for α and β: the Report page opens with the FWS page's weights, and its Table 4 names them.
    app.switch_page("pages/report.py").run()
    assert [widget.value for widget in app.number_input] == [0.3, 0.4]
    assert any(header.value == message("Table 4: FWS (Auto and judge: gpt-4o), α = 0.3, β = 0.4") for header in app.subheader)
    app.number_input[0].set_value(0.25).run()
    app.switch_page("pages/fws.py").run()
    assert app.radio(key="fws-mode").value == "Free α and β"  # (0.25, 0.4) is no preset
    assert (app.slider(key="fws-alpha").value, app.slider(key="fws-beta").value) == (0.25, 0.4)
    app.radio(key="fws-mode").set_value("Factuality : coherence ratio").run()
    app.slider(key="fws-ratio").set_value(4.0).run()
    alpha, beta = 4 / 9, 1 / 9
    expected = np.mean([alpha * (2 + 3) / 5 + beta * 4 / 5, alpha * (2 + 2) / 5 + beta * 2 / 5])
    shown = app.dataframe[0].value.set_index("Method").loc["KGW", "Question answering"]
    assert shown == pytest.approx(expected, abs=5e-4)  # shown to 3 decimals


def import_detected_qa_run(path) -> None:
    """An imported KGW QA run with detection scores and no verdict."""
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store

    rows = [{"prompt": f"What treats condition {i}?", "watermarked_text": f"Rest and fluids treat condition {i}, often.",
             "unwatermarked_text": f"Rest and fluids treat condition {i}.", "natural_text": f"Fluids treat condition {i}."}
            for i in range(4)]
    scores = {"watermarked_scores": [4.1, 3.5, 5.0, 2.2], "unwatermarked_scores": [0.3, -0.8, 2.5, 1.0]}
    store = Store(path)
    import_logs(store, method="KGW", model="meditron", task_name="qa",
                generations=LogFile("g.json", json.dumps(rows).encode()),
                detection=LogFile("d.json", json.dumps(scores).encode()))
    store.close()


def fws_page_on_metrics_only() -> AppTest:
    """The FWS page with Auto mapped to the metrics an import computes (no model): ROUGE-L, token F1 and ROUGE-2."""
    app = page_app("fws")
    app.selectbox(key="map-coherence").select("rougeL").run()
    app.selectbox(key="map-factual_accuracy").select("rouge2").run()
    assert not app.exception
    return app


def test_the_tradeoff_chart_opens_on_the_fws_that_exists(app_db):
    """With no verdict, the trade-off chart plots Auto's FWS (as the ranking does), not the judge's, which has no point;
    once a run is judged, the judge's."""
    from tests.conftest import judged_rating_db

    import_detected_qa_run(app_db)
    app = fws_page_on_metrics_only()
    assert app.radio(key="fws-source").value == "Auto"
    assert not any("Needs runs with both" in info.value for info in app.info)
    assert any('"FWS, Auto (metrics)"' in chart.proto.spec for chart in app.get("plotly_chart"))  # the trade-off's y axis
    judged_rating_db(app_db, n=2)
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert app.switch_page("pages/fws.py").run().radio(key="fws-source").value == "GPTJ"


def test_the_fws_page_counts_one_judge_chosen_where_several_judged(app_db):
    """A run judged by two judges: the FWS page's judge figures pooled both judges' verdicts per sample; now one judge's,
    by default the one with the most verdicts, another chosen."""
    from tests.conftest import add_verdicts, judged_rating_db

    run_id = judged_rating_db(app_db, n=3)  # gpt-4o: A's mean FWS 0.547, B's 0.800
    add_verdicts(app_db, run_id, "strict-judge", range(2), (1, 1, 1), (2, 2, 2))
    app = page_app("fws")
    chooser = app.selectbox(key="fws-judge")
    assert chooser.options == ["gpt-4o", "strict-judge"] and chooser.value == "gpt-4o"
    fws = app.dataframe[0].value.set_index("Method")["Question answering"]
    assert fws["KGW"] == pytest.approx(0.547, abs=1e-3) and fws["Unwatermarked"] == pytest.approx(0.8)
    chooser.select("strict-judge").run()
    assert not app.exception
    fws = app.dataframe[0].value.set_index("Method")["Question answering"]
    assert fws["KGW"] == pytest.approx(0.2) and fws["Unwatermarked"] == pytest.approx(0.4)
    assert "strict" in app.subheader[0].value
    app.switch_page("pages/report.py").run()  # the report's tables the same way
    assert any("Table 4" in header.value and "gpt&#45;4o" in header.value for header in app.subheader)
    app.selectbox(key="report-judge").select("strict-judge").run()
    assert any("Table 4" in header.value and "strict&#45;judge" in header.value for header in app.subheader)
    exported = app.selectbox(key="export-judge")  # the export holds one of the run's judges' verdicts too
    assert exported.options == ["gpt-4o", "strict-judge"] and exported.value == "gpt-4o"


def test_pages_name_tasks_and_metrics_as_people_read_them(app_db):
    """"Question answering", never the stored name "qa": in the FWS page's flip chart, trade-off and ranking, and in the
    Judge page's chart, verdicts, filter and run selector, as the quality tables already did; Auto-FWS's metrics by
    their labels."""
    from tests.conftest import judged_rating_db

    import_detected_qa_run(app_db)
    judged_rating_db(app_db, n=2)
    raw_name = re.compile(r"\bqa\b")
    app = fws_page_on_metrics_only()
    app.radio(key="fws-source").set_value("Auto").run()  # the judged run has no detection scores: Auto's trade-off
    charts = [chart.proto.spec for chart in app.get("plotly_chart")]
    assert len(charts) == 2 and all("Question answering" in spec and not raw_name.search(spec) for spec in charts)
    assert "Pareto front" not in charts[1]  # the trade-off: a front of one run is its point, no line in the legend
    ranking = next(frame.value for frame in app.dataframe if "Rank" in frame.value.columns)
    assert set(ranking.Task) == {"Question answering"}
    assert list(ranking.columns) == ["Model", "Task", "Rank", "Method", "Settings", "FWS"]  # it read "fws", "rank"
    assert app.selectbox(key="map-relevance").options[0] == "ROUGE-L (F1 for Question answering)"
    assert any(caption.value == "Metrics stored so far: ROUGE-2, ROUGE-L, F1." for caption in app.caption)
    drops = next(frame for frame in app.dataframe if "Factual accuracy drop %" in frame.value.columns)
    assert json.loads(drops.proto.columns)["Factual accuracy drop %"]["type_config"]["format"] == "%.1f"
    app.switch_page("pages/judge.py").run()
    assert not app.exception
    means_chart = app.get("plotly_chart")[0].proto.spec
    assert "Question answering" in means_chart and not raw_name.search(means_chart)
    facets = {note["text"] for note in json.loads(means_chart)["layout"]["annotations"]}
    assert facets == {"Coherence", "Relevance", "Factual accuracy", "Question answering"}  # no empty task row
    # The runs' long names along the bars, once per row of panels: under each panel they slanted across the next one
    layout = json.loads(means_chart)["layout"]
    assert {trace["orientation"] for trace in json.loads(means_chart)["data"]} == {"h"}
    assert layout["yaxis"]["categoryarray"][::-1] == sorted(layout["yaxis"]["categoryarray"])  # drawn from the bottom
    assert all(layout[axis]["matches"] == "y" for axis in ("yaxis2", "yaxis3"))  # one order in every panel
    drops = next(frame for frame in app.dataframe if "Factual accuracy" in frame.value.columns)
    formats = {column: spec["type_config"]["format"] for column, spec in json.loads(drops.proto.columns).items()}
    assert formats == dict.fromkeys(["Coherence", "Relevance", "Factual accuracy"], "%.1f")  # 11.0 beside 9.5, not 11
    assert drops.value.index.names == ["Task", "Run"]  # it read "task", "label"
    assert app.selectbox(key="verdict-task").options == ["all", "Question answering"]
    verdicts = next(frame.value for frame in app.dataframe if "sample" in frame.value.columns)
    assert set(verdicts.task) == {"Question answering"}
    runs = next(select for select in app.multiselect if select.label == "Runs to judge")  # every form's run labels
    assert runs.options and all(" · Question answering · " in option for option in runs.options)


def test_entities_and_entropy_pages_show_the_analysis(app_db, lm):
    from fwsapp.models.encoder import load_encoder
    from fwsapp.entities.introduced import analyze_run
    from fwsapp.entities.recognizers import load_recognizer
    from fwsapp.entities.entropy import compute_entropies
    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.store import Store

    demo = Store(app_db)
    run_id = run_generation(RunConfig(task="qa", method="KGW", n=2, max_new_tokens=16, batch_size=2), demo, lm)
    compute_entropies(demo, run_id, lm)
    analyze_run(demo, run_id, load_recognizer(), load_encoder(), lm.tokenizer)
    demo.close()
    app = page_app("entities")
    app.radio(key="entities-view").set_value("Disease entities (Table 7)").run()
    assert not app.exception
    summary = next(frame.value for frame in app.dataframe if "method" in frame.value.columns)
    assert list(summary.method) == ["KGW"] and "unsupported by the reference % (watermarked)" in summary.columns
    assert list(summary.task) == ["Question answering"]  # as every other table names it, not "qa"
    assert any("Reference" in m.value for m in app.markdown)
    app.switch_page("pages/entropy.py").run()
    assert not app.exception
    bins = app.dataframe[0].value.set_index("series")
    assert set(bins.index) == {"reference", "unwatermarked", "KGW · delta=2 (defaults)"}
    shares = ["low (< 1.5 nats) %", "mid (1.5–4.0 nats) %", "high (> 4.0 nats) %"]
    assert bins.loc["KGW · delta=2 (defaults)", shares].sum() == pytest.approx(100, abs=0.15)  # each to a tenth
    assert bins.loc["unwatermarked", "low shift vs unwatermarked (pp)"] == 0
    # Shares and their shifts in points to a tenth, as every percentage: the shifts read 17.75 beside shares of 31.0.
    formats = {column: setting["type_config"]["format"] for column, setting in json.loads(app.dataframe[0].proto.columns).items()
               if column in shares or column.endswith("(pp)")}
    assert len(formats) == 9 and set(formats.values()) == {"%.1f"}
    assert len(app.get("plotly_chart")) >= 1


def test_imported_runs_without_a_model_are_explained_not_failed(app_db):
    from tests.conftest import hostile_entity_db

    hostile_entity_db(app_db)
    app = page_app("entropy")
    assert not app.exception
    assert any("No entropies for this task yet" in info.value for info in app.info)
    app.switch_page("pages/detect.py").run()
    assert not app.exception


def test_the_entropy_form_asks_for_a_model_for_a_run_a_serving_engine_answered(app_db):
    """A served run's generator is not loaded here, as an imported run's is not: the form offered no model for it, and
    the job loaded the served model's name here and read its references alone."""
    from fwsapp.store import Store
    from tests.conftest import served_run_db

    served_run_db(app_db)
    store = Store(app_db)
    run_ids = list(store.runs().run_id)
    store.close()
    app = page_app("entropy")
    runs = app.multiselect(key="analyze-runs")
    runs.set_value(["served-run"]).run()
    assert not app.exception
    assert any(info.value.startswith("The served runs have no model here") for info in app.info)
    assert app.checkbox(key="analyze-embedded").label.endswith("for the served runs")  # not "imported and served"
    runs.set_value(run_ids).run()  # the imported run beside it
    assert app.checkbox(key="analyze-embedded").label.endswith("for the imported and served runs")


@pytest.mark.skipif(not (PROJECT.parent / "shared" / "data" / "paper").exists(), reason="needs ../shared/data/paper")
def test_detect_page_opens_on_paper_logs_and_redetects_them(app_db):
    """Imported scores have no token counts (the page used to crash on them); a re-detection job scores the
    texts again with the paper's tokenizer and agrees with the published scores."""
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store

    paper = PROJECT.parent / "shared" / "data" / "paper"
    store = Store(app_db)
    run_id = import_logs(store, method="KGW", model="biomistral", task_name="qa",
                         generations=LogFile.from_path(paper / "KGW-g0.5-d2-biomistral-HQA2.generations.json"),
                         detection=LogFile.from_path(paper / "KGW-g0.5-d2-biomistral-HQA2.detection.json"))
    store.close()
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    app.switch_page("pages/detect.py").run()
    assert not app.exception
    assert app.dataframe[0].value.loc[0, "AUROC"] == 1.0
    assert app.text_input(key=f"redetect-tokenizer-{run_id}").value == "mistral-v1"
    next(b for b in app.button if b.label == "Re-detect").click().run()
    run_until(app, lambda a: any("Detection set" in shown(s.value) for s in a.success), timeout=240)
    app.run()
    sets = next(frame.value for frame in app.dataframe if "max |Δ| vs imported" in frame.value.columns)
    assert sets.loc[0, "tokenizer"] == "mistral-v1" and sets.loc[0, "max |Δ| vs imported"] < 1e-6


def test_a_detection_set_with_too_few_negatives_shows_its_words_as_words(app_db):
    """A re-detection's TPR at 1 % FPR over 4 negatives is "not enough data (n = 4)"; its column was given a number
    format anyway, which the browser marks as a value it cannot read."""
    from fwsapp.detection.redetect import redetect
    from fwsapp.models.tokenizers import load_tokenizer
    from fwsapp.store import Store

    import_detected_qa_run(app_db)
    store = Store(app_db)
    redetect(store, store.runs().run_id[0], "KGW", {"gamma": 0.25}, load_tokenizer("mistral-v1"))
    store.close()
    app = page_app("detect")
    assert not app.exception
    sets = next(frame for frame in app.dataframe if "max |Δ| vs imported" in frame.value.columns)
    assert sets.value.loc[0, "TPR@FPR=0.01"] == "not enough data (n = 4)"
    columns = json.loads(sets.proto.columns)
    assert "format" not in columns.get("TPR@FPR=0.01", {}).get("type_config", {})
    assert columns["AUROC"]["type_config"]["format"] == "%.3f"  # a rate still reads 1.000 beside 0.997


@pytest.mark.parametrize("page", ["report", "detect"])
def test_the_calibration_tables_write_a_small_rate_as_the_reports_downloads_do(app_db, page):
    """z > 4's nominal FPR, 3.2e-05, read 0.000 on the Report page (three decimals) and 3.2e-05 in its Markdown; the
    Detect page's Calibration tab wrote it 0.00003 (Streamlit's own format)."""
    import_detected_qa_run(app_db)
    app = page_app(page)
    assert not app.exception
    nominal, achieved = ("Nominal FPR", "Achieved FPR") if page == "report" else ("nominal FPR", "achieved FPR")
    calibration = next(frame for frame in app.dataframe if nominal in frame.value.columns)
    written = written_cells(calibration)
    assert (written.loc[0, nominal], written.loc[0, achieved]) == ("3.2e-05", "0.000")
    assert nominal not in json.loads(calibration.proto.columns)  # no number format over the written one


def test_the_report_writes_a_judges_drop_to_a_tenth_as_the_fws_page_does(app_db):
    """A relevance drop of 41.667 % on the Report page (and in its downloads) beside 41.7 on the FWS page."""
    from tests.conftest import judged_rating_db

    judged_rating_db(app_db, n=3)  # relevance 2.333 against 4: a drop of 41.667 %
    app = page_app("report")
    assert not app.exception
    drops = next(frame for frame in app.dataframe if "Relevance drop %" in frame.value.columns)
    written = written_cells(drops)
    assert (written.loc[0, "Relevance drop %"], written.loc[0, "Coherence drop %"]) == ("41.7", "25.0")


def test_generate_page_refuses_out_of_range_parameters_before_any_work(app_db):
    app = page_app("generate")
    app.number_input(key="generate-KGW-gamma").set_value(0.0).run()
    assert not app.exception
    from fwsapp.ui.render import message

    assert message("gamma=0.0 is out of range; it must be in (0, 1)") in app.error[0].value


def test_pages_that_show_texts_render_a_hostile_file_inertly(app_db):
    """Judge, Rate and Entities on an imported file whose texts carry HTML, links, images and Streamlit syntax."""
    import json

    from fwsapp.models.encoder import load_encoder
    from fwsapp.entities.introduced import analyze_run
    from fwsapp.entities.recognizers import load_recognizer
    from fwsapp.human.ratings import sample_items
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store
    from tests.conftest import HOSTILE

    rows = [{"prompt": "Is gout [bad](http://evil.example/q)?", "watermarked_text": HOSTILE,
             "unwatermarked_text": "Gout :material/warning: is common ![i](http://evil.example/u.png).",
             "natural_text": "Gout and diabetes mellitus $y$."}]
    judged = [{"sample_id": "0", "w_output": HOSTILE, "uw_output": "x", "randomized": "False",
               "judge_output": "[[A]]: [3, 3, 3] ![j](http://evil.example/j.png)\n[[B]]: [4, 4, 4]"}]
    store = Store(app_db)
    run_id = import_logs(store, method="KGW", model="m", task_name="qa",
                         generations=LogFile("g.json", json.dumps(rows).encode()),
                         judged=LogFile("j.json", json.dumps(judged).encode()))
    analyze_run(store, run_id, load_recognizer("mesh"), load_encoder())
    sample_items(store, run_id, fraction=1.0)
    store.close()
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    for page in ("pages/judge.py", "pages/rate.py", "pages/entities.py"):
        app.switch_page(page).run()
        if page == "pages/rate.py":
            app.text_input[0].set_value("Dr Ann").run()
        assert not app.exception, page
        shown = [element.value for element in list(app.markdown) + list(app.caption)]
        assert any("evil&#46;example" in text for text in shown), page  # the hostile text is on the page…
        for text in shown:  # …and nothing of it is live
            assert "](" not in text and "<script" not in text and ":red[" not in text and "http://" not in text, (page, text)


def test_names_typed_or_read_from_files_are_literal_in_notices_radios_and_charts(app_db):
    """A model and a judge named with markup (an import's names are typed, a spec's are read from a file) show as
    text: in the Detect page's notice, the FWS and Report pages' titles, the FWS page's radio, and every chart's
    legend, ticks and hover (the Report page's Table 4 title rendered the judge's name as Markdown).
    Plotly draws a chart's text as HTML of its own: `<a href>` in a legend was a live link."""
    from fwsapp.store import Store
    from tests.conftest import import_example_summaries

    model, judge = "m<a href='http://evil.example/m'>x</a> **b** [l](http://evil.example/l)", "j<a href='x'>y</a> **jb**"
    store = Store(app_db)
    import_example_summaries(store, model=model, judge_model=judge)
    store.close()
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    # Each page, what of the names its notices and radios show, and how many of its charts show the model's.
    for page, named, charts in (("pages/detect.py", "evil&#46;example&#47;l", 1), ("pages/fws.py", "jb&#42;&#42;", 2),
                                ("pages/judge.py", None, 1), ("pages/quality.py", None, 1),
                                ("pages/report.py", "jb&#42;&#42;", 0)):
        app.switch_page(page).run()
        assert not app.exception, page
        shown = [element.value for kind in ("markdown", "caption", "info", "warning", "success", "subheader")
                 for element in getattr(app, kind)] + [option for radio in app.radio for option in radio.options]
        assert named is None or any(named in text for text in shown), page
        assert not [text for text in shown if "](http" in text or "<a " in text or "**b**" in text or "**jb**" in text], page
        strings = [json.dumps(json.loads(chart.proto.spec), ensure_ascii=False) for chart in app.get("plotly_chart")]
        assert sum("&lt;a href=" in spec for spec in strings) == charts and not any("<a " in spec for spec in strings), page


def test_the_quality_pages_numbers_are_written_as_its_downloads_write_them(app_db):
    """-0.25 beside 0.069 and a bare 0: the difference table alone was written as its numbers fell; then three decimals
    wrote a difference of -0.00025 as -0.000 (a watermark that cost one bigram in 2,000)."""
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store
    from tests.conftest import import_example_summaries

    store = Store(app_db)
    import_example_summaries(store, kinds=("generations", "detection"))
    words = [f"w{index}" for index in range(2000)]
    rows = [{"prompt": "Q?", "natural_text": " ".join(words), "unwatermarked_text": " ".join(words),
             "watermarked_text": " ".join(words[:-1])}]
    import_logs(store, method="KGW", model="m", task_name="qa",
                generations=LogFile("g.json", json.dumps(rows).encode()))
    store.close()
    app = page_app("quality")

    def written(frame) -> pd.DataFrame:
        assert "ROUGE-2" not in json.loads(frame.proto.columns)  # no number format over the written one
        return written_cells(frame)

    differences = [written(frame) for frame in app.dataframe if "Method" in frame.value.columns
                   and "Unwatermarked" not in set(frame.value.Method)]
    assert [frame.loc[0, "ROUGE-2"] for frame in differences] == ["-0.00025", "-0.022"]  # Table 2: 0.025 - 0.046
    tables = [written(frame) for frame in app.dataframe if "Unwatermarked" in set(frame.value.get("Method", []))]
    assert tables[0]["ROUGE-2"].tolist() == ["1.000", "1.000"]  # 0.99975 rounds to 1.000, as the LaTeX writes it


def test_experiments_page_shows_a_specs_dry_run_and_runs_it(app_db, tmp_path, monkeypatch):
    import html

    import fwsapp.paths

    monkeypatch.setattr(fwsapp.paths, "EXPERIMENTS_DIR", tmp_path)
    (tmp_path / "tiny.toml").write_text(
        '[grid]\nmodels = ["smollm2-135m-instruct"]\ntasks = ["qa"]\nn = 2\nmax_new_tokens = 8\nbatch_size = 1\n\n'
        '[[method]]\nname = "KGW"\n')
    (tmp_path / "broken.toml").write_text('[grid]\nmodels = ["smollm2-135m-instruct"]\ntasks = ["qa"]\nsamples = 2\n')
    app = page_app("experiments")
    assert not app.exception and app.title[0].value == "Experiments"
    assert "[grid] has no key 'samples'" in html.unescape(app.error[0].value)  # broken.toml sorts first
    app.selectbox[0].select(tmp_path / "tiny.toml").run()
    plan = app.dataframe[0].value
    assert len(plan) == 1 and plan.loc[0, "units missing"] == 2 and plan.loc[0, "method"] == "KGW"
    assert plan.loc[0, "settings"] == "delta=2 (defaults)" and "run_id" not in plan  # it read '{"delta": 2.0, ...}'
    next(button for button in app.button if button.label == "Launch").click().run()
    run_until(app, lambda a: any("1 of 1 runs done" in shown(s.value) for s in a.success))
    assert app.dataframe[0].value.loc[0, "units missing"] == 0
    assert any("runs are complete" in caption.value for caption in app.caption)


def test_home_page_says_the_next_step_and_loads_the_example_data_once(app_db):
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    assert not app.exception and app.title[0].value == "fwsapp"
    assert [metric.value for metric in app.metric][0] == "0"
    assert "The database is empty." in [m.value for m in app.markdown]
    next(button for button in app.button if button.label == "Load the example data").click().run()
    assert not app.exception
    # runs, scored, analysed (meditron's analysis is shipped), judged (the paper published meditron's judge logs)
    assert [metric.value for metric in app.metric][:4] == ["6", "0", "3", "3"]
    # An import brings ROUGE and F1 (Table 2 shows them): the runs lack what opening the Quality page computes.
    assert ("6 runs lack SimCSE (to the unwatermarked output), SimCSE (to the reference), Factuality."
            in [m.value for m in app.markdown])
    next(button for button in app.button if button.label == "Load the example data").click().run()
    assert [metric.value for metric in app.metric][0] == "6"  # loading again changes nothing


def test_the_next_step_counts_runs_in_agreement_with_its_noun_and_verb():
    from fwsapp.ui.queries import next_step

    from fwsapp.quality.registry import lacking_model_free

    assert lacking_model_free("qa", {"rouge2", "rougeL", "f1"}) == [
        "SimCSE (to the unwatermarked output)", "SimCSE (to the reference)", "Factuality"]
    assert lacking_model_free("completion", {"simcse", "simcse_reference", "rouge2", "factuality"}) == []  # F1: QA's
    state = {"runs": 3, "scored": 2, "lacking": ["Factuality"], "analysed": 3, "judged": 3}
    assert next_step(state)[2] == "1 run lacks Factuality."
    assert next_step({**state, "scored": 3, "analysed": 1})[2] == "2 runs are not analysed yet."
    assert next_step({**state, "scored": 3, "judged": 2})[2] == (
        "1 run has no verdicts yet (the embedded model's smoke-test verdicts do not count).")


def test_playground_answers_a_typed_prompt_with_token_colours_and_keeps_a_history(app_db):
    app = AppTest.from_file(APP, default_timeout=180)
    app.run()
    app.switch_page("pages/playground.py").run()
    assert not app.exception and app.title[0].value == "Playground"
    app.text_area[0].set_value("What lowers blood pressure?")
    inputs = {widget.label: widget for widget in app.number_input}
    inputs["New tokens"].set_value(16)
    app.button[0].click().run()
    assert not app.exception
    shown = [m.value for m in app.markdown]
    assert any(text.startswith("**Watermarked** · z = ") for text in shown)
    assert any(text.startswith("**Unwatermarked** · z = ") for text in shown)
    assert sum("background:rgba(200, 247, 197" in text for text in shown) == 2  # both answers coloured token by token
    # Issue 58, item 6: the colours are said once under each answer, in the method's terms, not again for both.
    legends = [caption.value for caption in app.caption if "a dashed outline = not scored" in caption.value]
    assert len(legends) == 2 and all(legend.startswith("KGW: green") for legend in legends)
    keep = next(button for button in app.button if button.label == "Keep as a run")
    assert keep.disabled  # no reference answer typed
    app.number_input(key="playground-KGW-delta").set_value(4.0)
    app.button[0].click().run()
    history = app.dataframe[0].value
    assert len(history) == 2 and list(history.params.str.contains("delta=4.0")) == [True, False]
    assert history["score watermarked"].str.fullmatch(r"-?\d+\.\d{3}").all()  # z, as the answers above write it


def test_the_sidebar_names_the_model_the_page_has_just_loaded(app_db, monkeypatch):
    """The sidebar was drawn before the page: the Playground's first answer stood beside "Model in use: none loaded
    yet". The model's first load is played here, as the cached loader records it."""
    from fwsapp.ui import resources

    held = {}
    monkeypatch.setattr(resources, "_loaded_models", held)
    cached = resources.model

    def first_load(name):
        loaded = cached(name)
        held[name] = loaded.description
        return loaded

    monkeypatch.setattr(resources, "model", first_load)
    app = AppTest.from_file(APP, default_timeout=180)
    app.run()
    app.switch_page("pages/playground.py").run()

    def in_use():
        return [shown(m.value) for m in app.sidebar.markdown if "loaded" in shown(m.value) or " on cpu" in shown(m.value)]

    assert in_use() == ["none loaded yet (loads on the first run)"]
    app.text_area[0].set_value("What lowers blood pressure?")
    {widget.label: widget for widget in app.number_input}["New tokens"].set_value(8)
    app.button[0].click().run()
    assert not app.exception and any(m.value.startswith("**Watermarked** · z = ") for m in app.markdown)
    assert in_use() == [next(iter(held.values()))] and " on cpu" in in_use()[0]


def test_report_page_deletes_a_run_only_once_its_id_is_typed(app_db):
    from fwsapp.store import Store
    from tests.conftest import import_example_summaries

    store = Store(app_db)  # two of the example runs, one judged (the six took a fifth of the page tests' time)
    run_ids = [import_example_summaries(store), import_example_summaries(store, "biomistral", ("generations", "detection"))]
    assert not store.judgments([run_ids[0]]).empty
    store.close()
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    app.switch_page("pages/report.py").run()
    doomed = app.selectbox(key="delete-run").select(run_ids[0]).run().selectbox(key="delete-run").value  # judged
    delete = next(button for button in app.button if button.label == "Delete this run")
    assert delete.disabled
    app.text_input(key="delete-confirm").set_value(doomed).run()
    next(button for button in app.button if button.label == "Delete this run").click().run()
    assert not app.exception
    # said on the page the deletion reran (it was said, then wiped by the rerun before anyone read it)
    said = [html.unescape(note.value).replace("\u2060", "") for note in app.success]
    assert len(said) == 1 and said[0].startswith(f"Deleted run {doomed}: generations 200, "), said
    app.run()
    assert not app.success  # once
    store = Store(app_db)  # the app holds the file open: the same configuration shares it
    assert sorted(store.runs().run_id) == sorted(set(run_ids) - {doomed})
    assert store.judgments([doomed]).empty and store.generations(doomed).empty


def test_fws_weights_live_in_the_url_so_a_reload_or_a_shared_link_keeps_them(app_db):
    from tests.conftest import judged_rating_db

    judged_rating_db(app_db, n=2)
    shared = AppTest.from_file(APP, default_timeout=60)
    shared.query_params["alpha"], shared.query_params["beta"] = "0.3", "0.4"
    shared.run()
    shared.switch_page("pages/fws.py").run()
    assert shared.radio(key="fws-mode").value == "Free α and β"
    assert (shared.slider(key="fws-alpha").value, shared.slider(key="fws-beta").value) == (0.3, 0.4)
    shared.slider(key="fws-alpha").set_value(0.25).run()
    assert dict(shared.query_params) == {"alpha": "0.25", "beta": "0.4"}
    broken = AppTest.from_file(APP, default_timeout=60)
    broken.query_params["alpha"] = "lots"
    broken.run()
    broken.switch_page("pages/fws.py").run()
    assert not broken.exception and broken.selectbox(key="fws-preset").value == "Current"  # the paper's 0.4, 0.2


def test_experiments_page_with_an_unreachable_ray_address_fails_at_once_and_can_launch_again(app_db, tmp_path,
                                                                                             monkeypatch):
    """Issue 38: with Ray at 127.0.0.1:1 the job stayed 'starting' past 120 s, Cancel did nothing, and Launch stayed
    disabled until the app restarted."""
    import html

    import fwsapp.paths

    monkeypatch.setattr(fwsapp.paths, "EXPERIMENTS_DIR", tmp_path)
    (tmp_path / "tiny.toml").write_text(
        '[grid]\nmodels = ["smollm2-135m-instruct"]\ntasks = ["qa"]\nn = 1\nmax_new_tokens = 4\n\n[[method]]\nname = "KGW"\n')
    app = page_app("experiments")
    app.text_input[0].set_value("127.0.0.1:1").run()
    next(button for button in app.button if button.label == "Launch").click().run()
    run_until(app, lambda a: bool(a.error), timeout=30)
    assert "Nothing answers at 127.0.0.1:1" in html.unescape(app.error[0].value).replace("\u2060", "")
    assert not next(button for button in app.button if button.label == "Launch").disabled


@pytest.mark.parametrize("page", sorted(path.name for path in (PROJECT / "pages").glob("*.py")))
def test_each_page_is_a_render_function_called_once(page):
    """A page's body is its `render()`, so its parts can be called from a test or another page; the script calls it
    once, last."""
    import ast

    tree = ast.parse((PROJECT / "pages" / page).read_text())
    assert any(isinstance(node, ast.FunctionDef) and node.name == "render" for node in tree.body)
    last = tree.body[-1]
    assert isinstance(last, ast.Expr) and ast.unparse(last) == "render()"


def test_rate_page_keeps_every_answer_when_one_is_missing_and_numbers_an_item_the_same_going_back(app_db):
    from tests.conftest import judged_rating_db

    judged_rating_db(app_db, n=3)
    app = page_app("rate")
    app.text_input(key="rater-name").set_value("Dr A").run()

    def number() -> str:
        return app.get("progress")[0].proto.text

    def press(label: str) -> None:
        next(button for button in app.button if button.label == label).click().run()

    assert number() == "1 of 3"
    for radio in app.radio[:5]:
        radio.set_value(4)
    app.text_area[0].set_value("B misses the dose")
    press("Submit")
    assert any("Rate all three questions for both answers" in error.value for error in app.error)
    # Issue 58, item 17: the one question left open is named.
    assert any("still open: Answer B: Factual accuracy" in html.unescape(error.value).replace("\u2060", "")
               for error in app.error), [error.value for error in app.error]
    assert [radio.value for radio in app.radio[:5]] == [4] * 5 and app.radio[5].value is None  # nothing wiped
    assert app.text_area[0].value == "B misses the dose"
    app.radio[5].set_value(2)
    press("Submit")
    assert not app.error and number() == "2 of 3"
    press("Previous")
    assert number() == "1 of 3" and [radio.value for radio in app.radio] == [4, 4, 4, 4, 4, 2]
    press("Next")
    assert number() == "2 of 3" and not app.exception


def test_the_first_paint_loads_no_model_library_and_the_setup_check_runs_when_opened(tmp_path):
    """Home's first paint imports neither torch nor transformers (1.2 of its 3.5 CPU-s went to them), in a process of
    its own as a served app is, nor do the Detect and Quality pages to paint (a model library is imported when a text
    is detected or a metric computed); the sidebar's setup check, which needs torch for the device, runs once opened."""
    import json
    import os
    import subprocess
    import sys

    script = f"""
import json, sys
from streamlit.testing.v1 import AppTest
app = AppTest.from_file({APP!r}, default_timeout=60)
app.run()
painted = {{"exception": bool(app.exception), "torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules,
           "checks": [text.value for text in app.sidebar.text], "pages": {{}}}}
for page in ("pages/detect.py", "pages/quality.py"):
    app.switch_page(page).run()
    painted["pages"][page] = [bool(app.exception), "torch" in sys.modules or "transformers" in sys.modules]
app.session_state["setup-check"] = True  # what opening the expander sets
app.run()
print(json.dumps({{**painted, "opened": [text.value for text in app.sidebar.text]}}))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "FWSAPP_DB": str(tmp_path / "paint.duckdb")})
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["exception"] is False and found["torch"] is False and found["transformers"] is False
    assert found["pages"] == {"pages/detect.py": [False, False], "pages/quality.py": [False, False]}
    assert found["checks"] == [] and any(text.startswith("ok: device cpu") for text in found["opened"])


def test_the_served_app_imports_transformers_before_two_script_runs_can_race_on_it():
    """transformers 5's package is visible to other threads before its import has finished: a second thread importing
    from it meanwhile fails (without the settling below, one of these two threads did, every time). The served app
    imports it whole first (`serve.settle_lazy_imports`), so two overlapping script runs that each load a model
    library do not race (the facts browser's taggers failed so)."""
    import subprocess
    import sys

    script = """
import threading, time
from fwsapp.ui.serve import settle_lazy_imports
settle_lazy_imports()
failures = []
def load(delay):
    time.sleep(delay)
    try:
        from transformers import AutoTokenizer  # noqa: F401
    except ImportError as error:
        failures.append(str(error))
threads = [threading.Thread(target=load, args=(delay,)) for delay in (0, 0.05)]
[thread.start() for thread in threads]
[thread.join() for thread in threads]
print(len(failures))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "0"


def test_no_table_on_a_page_shows_a_task_by_its_stored_name(app_db, qa_run):
    """Tables read "Question answering", not "qa": the Detect page's method comparison, the Import page's runs and the
    Experiments page's dry run showed the stored names (seen in Chromium; a table's cells are not in its text); so did
    the Detect page's coverage and predicted lengths, which only a generated run fills (its run is here too)."""
    import shutil

    from fwsapp.data.tasks import TASKS
    from fwsapp.orchestration.examples import load_examples
    from fwsapp.store import Store

    generated, _, generated_id = qa_run
    generated.row("CHECKPOINT")
    shutil.copy(generated.path, app_db)
    store = Store(app_db)
    load_examples(store)
    store.close()
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    for page in ("detect", "import", "experiments", "report", "quality", "fws"):
        app.switch_page(f"pages/{page}.py").run()
        assert not app.exception, page
        assert app.dataframe, page
        if page == "detect":  # the generated run too: the first four runs shown are the examples
            runs = app.multiselect(key="detect-runs")
            runs.set_value([generated_id, *runs.value]).run()
            assert any("watermarked share" in frame.value.columns for frame in app.dataframe)  # its coverage
        for frame in app.dataframe:
            table = frame.value.data if hasattr(frame.value, "data") else frame.value
            cells = {str(value) for column in table.columns for value in table[column].dropna().unique()}
            assert not cells & set(TASKS), (page, list(table.columns))


def test_the_friedman_test_of_the_aspects_writes_its_p_value_in_significant_digits(app_db):
    """Ratings whose aspects differ every time: p is about 1e-05, which "p = {p:.4f}" wrote as "p = 0.0000"."""
    from fwsapp.store import Store
    from tests.conftest import judged_rating_db

    run_id = judged_rating_db(app_db, n=4)
    store = Store(app_db)
    for rater in ("Dr A", "Dr B", "Dr C"):
        for sample_idx in range(4):
            assert store.add_human_rating(rater, run_id, sample_idx, [1, 3, 5], [1, 3, 5], None, None) is None
    store.close()
    app = fws_page_on_metrics_only()
    said = next(markdown.value for markdown in app.markdown if markdown.value.startswith("Friedman χ²"))
    assert re.fullmatch(r"Friedman χ² = [\d.]+, p = \d\.\d+e-\d+\. Nemenyi p-values between aspects:", said), said
    nemenyi = next(frame.value for frame in app.dataframe if list(frame.value.index) == list(frame.value.columns))
    assert not (nemenyi.astype(str) == "0.0").any().any(), nemenyi  # each p in significant digits, none rounded to 0


def test_the_correlations_p_values_are_written_in_significant_digits(app_db):
    """Raters who agree exactly with the judge: r = 1 and p below 1e-300, which the table rounded to 0."""
    from fwsapp.human.ratings import sample_items
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store

    judge = [([4, 2, 3], [5, 5, 5]), ([2, 2, 2], [3, 3, 3]), ([3, 3, 4], [4, 4, 4]), ([5, 4, 4], [5, 5, 4]),
             ([1, 2, 1], [2, 3, 2]), ([3, 1, 2], [4, 2, 5])]
    rows = [{"prompt": f"Is condition {i} serious?", "watermarked_text": f"Watermarked answer {i}.",
             "unwatermarked_text": f"Plain answer {i}.", "natural_text": f"Reference answer {i}."} for i in range(6)]
    judged = [{"sample_id": str(i), "prompt": rows[i]["prompt"], "w_output": rows[i]["watermarked_text"],
               "uw_output": rows[i]["unwatermarked_text"], "judge_output": "", "randomized": "False",
               "judge_choice": "Watermarked", "scores_W": watermarked, "scores_U": unwatermarked}
              for i, (watermarked, unwatermarked) in enumerate(judge)]
    store = Store(app_db)
    run_id = import_logs(store, method="KGW", model="meditron", task_name="qa",
                         generations=LogFile("g.json", json.dumps(rows).encode()),
                         judged=LogFile("j.json", json.dumps(judged).encode()))
    sample_items(store, run_id, fraction=1.0)
    for rater in ("Dr A", "Dr B"):
        for sample_idx, (watermarked, unwatermarked) in enumerate(judge):
            assert store.add_human_rating(rater, run_id, sample_idx, watermarked, unwatermarked, None, None) is None
    store.close()
    app = fws_page_on_metrics_only()
    table = next(frame.value for frame in app.dataframe if {"Source", "r", "p", "n"} <= set(frame.value.columns))
    judged_rows = table[table.Source.str.startswith("judge") & (table.Aspect != "FWS")]
    assert (judged_rows.r == 1).all() and set(judged_rows.p) == {"< 1e-300"}, judged_rows


def test_the_method_comparison_writes_a_typical_p_value_in_significant_digits(app_db):
    """A strong watermark's median p (1e-20) read 0.000 in the Detect page's comparison; a z stays at three decimals."""
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store

    rows = [{"prompt": f"What treats condition {i}?", "watermarked_text": f"Rest treats condition {i}, often.",
             "unwatermarked_text": f"Rest treats condition {i}.", "natural_text": f"Fluids treat condition {i}."}
            for i in range(4)]
    scores = {"watermarked_scores": [1e-20, 3e-22, 2e-19, 5e-21], "unwatermarked_scores": [0.4, 0.7, 0.2, 0.9]}
    store = Store(app_db)
    import_logs(store, method="vLLM-Gumbel", model="meditron", task_name="qa",
                generations=LogFile("g.json", json.dumps(rows).encode()),
                detection=LogFile("d.json", json.dumps(scores).encode()))
    store.close()
    import_detected_qa_run(app_db)  # a KGW run: z-scores
    app = page_app("detect")
    assert not app.exception
    comparison = app.dataframe[0].value.set_index("method")
    assert comparison.loc["vLLM-Gumbel", "positives' typical score"] == "7.5e-21"  # the median of the four
    assert comparison.loc["KGW", "positives' typical score"] == "3.700"
    # ...and the browser shows that text: a number format on the column wrote "7.5e-21" as 0.000.
    assert "format" not in json.loads(app.dataframe[0].proto.columns).get("positives' typical score", {}).get(
        "type_config", {})
    # The score distributions bin each run's panel on its own range: the p-values' panel had the z-scores' bins (0-0.5
    # and 0.5-1), and a panel beside the first had no counts on its axis.
    histogram = next(json.loads(chart.proto.spec) for chart in app.get("plotly_chart")
                     if '"texts"' in chart.proto.spec)
    panels = {trace["xaxis"]: set() for trace in histogram["data"]}
    for trace in histogram["data"]:
        panels[trace["xaxis"]].add(trace["bingroup"])
    assert len(panels) == 2 and all(groups == {axis} for axis, groups in panels.items())
    assert all(axis.get("showticklabels") for name, axis in histogram["layout"].items() if name.startswith("yaxis"))


def test_the_import_page_records_the_settings_the_file_names_do_not_say(app_db):
    """A log made on a smaller GPU needs its generator said: the page's settings reach the run, as `import --param`'s,
    pre-filled with what the names say (γ = 0.25 here)."""
    from fwsapp.store import Store

    rows = [{"prompt": "What is gout?", "watermarked_text": "Gout is arthritis.", "unwatermarked_text": "Gout hurts.",
             "natural_text": "Gout is a form of arthritis."}]
    app = page_app("import")
    app.get("file_uploader")[0].set_value(("KGW-g0.25-d2-jsl-MEQS.generations.json", json.dumps(rows).encode(),
                                           "application/json"))
    app.run()
    inputs = {widget.label: widget for widget in app.number_input}
    assert inputs["gamma"].value == 0.25
    inputs["cuda blocks"].set_value(492)
    app.button[0].click().run()  # Import
    assert not app.exception and app.success[0].value.startswith("Imported as run")
    run = Store(app_db, read_only=True).runs().iloc[0]
    assert (run.model, run.task, json.loads(run.params)) == ("jsl", "summarization",
                                                            {"gamma": 0.25, "delta": 2.0, "cuda_blocks": 492})
