"""Issue 15: what a newcomer or a clinician tripped over, page by page, each pinned by an AppTest."""
import json
import re
import time

import pytest
from streamlit.testing.v1 import AppTest

from fwsapp.generation.generate import run_generation
from fwsapp.generation.run_config import RunConfig
from tests.conftest import PROJECT, copy_store, imported_qa_db, shown

APP = str(PROJECT / "app.py")


def open_page(page: str) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    app.switch_page(f"pages/{page}.py").run()
    assert not app.exception, app.exception
    return app


def by_label(widgets, label):
    return next(widget for widget in widgets if widget.label == label)


def until(app: AppTest, condition, timeout: float = 180) -> AppTest:
    """Rerun the page every second until `condition(app)` holds."""
    deadline = time.time() + timeout
    while not condition(app):
        assert time.time() < deadline, "condition not reached"
        time.sleep(1)
        app.run()
    return app


def computed(app: AppTest) -> bool:
    return any(success.value.startswith("Computed") for success in app.success)


# Generate and jobs

def test_generation_progress_moves_inside_a_batch_as_large_as_the_run(lm, store):
    calls = []
    config = RunConfig(task="qa", method="KGW", n=2, max_new_tokens=8, batch_size=2, seed=1)
    run_generation(config, store, lm, progress=lambda done, total, note="": calls.append((done, total, note)))
    before_the_batch_ends = [note for done, _, note in calls if done == 0 and note]
    assert "batch 1 of 1: unwatermarked text, token 4 of 8" in before_the_batch_ends
    assert "batch 1 of 1: watermarked text, token 8 of 8" in before_the_batch_ends
    assert calls[-1][:2] == (2, 2)


def test_an_expected_job_failure_is_one_line_in_the_server_log_and_a_bug_keeps_its_traceback(store, capsys):
    from fwsapp.orchestration.jobs import JobManager
    from fwsapp.judge.backends import JudgeError

    manager = JobManager(store, model_loader=lambda name: None)

    def wait(job):
        deadline = time.time() + 10
        while not job.finished and time.time() < deadline:
            time.sleep(0.05)
        return job

    def no_verdict(progress, cancel):
        raise JudgeError("no verdict came back")

    def bug(progress, cancel):
        return {}["missing"]

    expected = wait(manager.start("judge", "judge:x", "Judging 1 run", no_verdict))
    log = capsys.readouterr().err
    assert expected.status == "failed" and expected.message == "JudgeError: no verdict came back"
    assert "Traceback" not in log and "Judging 1 run failed: JudgeError: no verdict came back" in log
    assert wait(manager.start("score", "score:x", "Scoring", bug)).status == "failed"
    assert "Traceback" in capsys.readouterr().err


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
    while time.time() < deadline and not any("samples of" in c.value for c in app.caption):
        time.sleep(1)
        app.run()
    caption = next(c.value for c in app.caption if "samples of" in c.value)
    assert "SWEET" in caption and "Question" in caption


def test_parameter_labels_break_between_words(app_db):
    app = open_page("generate")
    by_label(app.selectbox, "Watermark").select("EXP-edit").run()
    labels = [widget.label for widget in app.number_input]
    assert "pseudo length" in labels and not any("_" in label for label in labels)


# Detect

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
    warning = next(shown(w.value) for w in app.warning if "Too few negatives" in shown(w.value))
    assert f"{run_id}: 4 negatives, so TPR@FPR=0.01, 0.05 are unresolved" in warning
    *_, roc, histogram = (json.loads(chart.proto.spec) for chart in app.get("plotly_chart"))  # after the Length tab's
    assert all("{" not in trace["name"] for trace in roc["data"])  # no raw parameter JSON in the legend
    # Each run as every form names it, its model and size included: two QA runs of two models never read alike.
    assert any(trace["name"].startswith("KGW · delta=2 (defaults) · Question answering · ") and " · n=" in trace["name"]
               and trace["name"].endswith(run_id) for trace in roc["data"])
    axes = [value for key, value in histogram["layout"].items() if key.startswith("xaxis")]
    assert axes and all("matches" not in axis for axis in axes)  # one score scale per panel
    comparison = app.dataframe[0].value
    assert comparison.loc[0, "settings"] == "delta=2 (defaults)" and comparison.loc[0, "n negatives"] == 4


def test_pasted_text_too_short_for_a_verdict_is_flagged_and_exp_edit_says_it_has_no_token_colours(detect_app):
    app, _, _ = detect_app
    detect = lambda: by_label(app.button, "Detect")  # noqa: E731
    app.text_area[0].set_value("Hi.").run()
    detect().click().run()
    assert any(re.search(r"Only (1 token was|(0|[2-9]|\d{2,}) tokens were) scored\. A verdict needs about 25", w.value)
               for w in app.warning), [w.value for w in app.warning]  # "1 tokens were" before
    app.selectbox(key="paste-method").set_value("EXP-edit").run()
    app.text_area[0].set_value("Diabetes is a chronic disease in which the body cannot use insulin well, "
                               "so blood sugar stays high and damages the eyes, kidneys and nerves.").run()
    detect().click().run()
    assert not app.exception
    assert any("scores the text as a whole" in info.value for info in app.info)



def test_an_its_edit_p_of_zero_reads_below_its_step_on_the_detect_page(app_db):
    """ITS-Edit's p counts null keys (MarkLLM's k / n_runs): five of eight answers of a 500-key run read p = 0, and the
    per-text table and the comparison's typical score wrote "< 1e-300", an underflow; they read "< 0.002"."""
    from fwsapp.store import Store, detection_record

    store = Store(app_db)
    scores = {"watermarked": [0.0] * 5 + [0.004, 0.05, 0.3], "unwatermarked": [0.2, 0.5, 0.7, 0.9, 0.1, 0.6, 0.8, 0.4]}
    store.add_run("its1", {"config": {}, "model": "m", "task": "qa", "method": "ITS-Edit", "params": {"n_runs": 500},
                           "seed": 0, "n": 8, "imported": False, "score_direction": "lower"},
                  {"detections": [detection_record(i, kind, "ITS-Edit", score, p=score, num_tokens_scored=32)
                                  for kind, values in scores.items() for i, score in enumerate(values)]})
    store.close()
    app = open_page("detect")
    app.multiselect(key="detect-runs").set_value(["its1"]).run()
    assert not app.exception, app.exception
    per_text = next(frame.value for frame in app.dataframe if "sample" in frame.value.columns)
    assert (per_text.score == "< 0.002").sum() == 5 and "0.004" in set(per_text.score)
    assert "p" not in per_text.columns  # its score is its p, once
    assert not any("1e-300" in str(frame.value.to_dict()) for frame in app.dataframe)
    assert "< 0.002" in str(app.dataframe[0].value.to_dict())  # the comparison: the positives' median p


def test_a_p_that_is_the_score_reads_so_beside_a_method_that_has_both(app_db):
    """With a KGW run (z, and its p) beside an EXP-edit run (the score is the p), the per-text table's p column read
    "None" on every EXP-edit row, as if its p were missing; it reads "= score"."""
    from fwsapp.store import Store, detection_record

    store = Store(app_db)
    for run_id, method, direction, records in (
            ("kgw1", "KGW", "higher", [dict(score=5.0, z=5.0, p=2.9e-7), dict(score=0.1, z=0.1, p=0.46)]),
            ("exp1", "EXP-edit", "lower", [dict(score=0.01, p=0.01), dict(score=0.6, p=0.6)])):
        store.add_run(run_id, {"config": {}, "model": "m", "task": "qa", "method": method, "params": {}, "seed": 0,
                               "n": 1, "imported": False, "score_direction": direction},
                      {"detections": [detection_record(0, kind, method, num_tokens_scored=32, **record)
                                      for kind, record in zip(("watermarked", "unwatermarked"), records)]})
    store.close()
    app = open_page("detect")
    app.multiselect(key="detect-runs").set_value(["kgw1", "exp1"]).run()
    assert not app.exception, app.exception
    per_text = next(frame.value for frame in app.dataframe if "sample" in frame.value.columns).set_index("method")
    assert list(per_text.loc["EXP-edit", "p"]) == ["= score"] * 2 and list(per_text.loc["EXP-edit", "score"]) == ["0.01", "0.6"]
    assert list(per_text.loc["KGW", "p"]) == ["2.9e-07", "0.46"] and "z" not in per_text.columns


# Quality

def test_perplexity_progress_counts_samples_and_writes_each_chunk(qa_run, lm, tmp_path, monkeypatch):
    from fwsapp.quality import perplexity, scoring
    from fwsapp.store import Store

    source, _, run_id = qa_run
    copy_store(source, tmp_path / "score.duckdb")
    store = Store(tmp_path / "score.duckdb")
    monkeypatch.setattr(perplexity, "PPL_CHUNK", 2)
    calls, stored = [], []
    resources = scoring.QualityResources(model_loader=lambda name: lm)
    original = store.write_rows
    monkeypatch.setattr(store, "write_rows", lambda *args: (stored.append(len(args[2])), original(*args)))
    scoring.score_run(store, run_id, resources, metrics=("ppl", "rouge"),
                      progress=lambda done, total, note="": calls.append((done, total, note)))
    assert (2, 8, "ppl") in calls and (4, 8, "ppl") in calls and calls[-1][:2] == (8, 8)
    assert stored[:2] == [4, 4]  # two samples × two texts per chunk, written as they finish


def test_scoring_several_runs_keeps_one_progress_total_from_start_to_end(tmp_path):
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store

    path = tmp_path / "two.duckdb"
    small, large = imported_qa_db(path, n=2), imported_qa_db(path, n=5)  # two runs of one database
    store = Store(path)
    store.row("DELETE FROM metrics")  # the imports computed these at once: here they are work again
    calls = []
    pipeline.score(store, [small, large], lambda name: None, lambda done, total, note="": calls.append((done, total)),
                   metrics=("rouge", "f1"))
    assert calls[:2] == [(0, 0)] * 2  # the plan's phases, before the work is counted
    assert {total for _, total in calls[2:]} == {(2 + 5) * 2}  # samples × metrics, known before the first run starts
    dones = [done for done, _ in calls]
    assert dones == sorted(dones) and dones[-1] == 14


def test_imported_runs_get_perplexity_only_from_a_named_oracle_with_consent(app_db):
    from tests.conftest import judged_rating_db

    run_id = judged_rating_db(app_db)
    app = until(open_page("quality"), computed)  # the model-free metrics first, on their own
    plan = app.dataframe[0].value
    assert plan.loc[0, "oracle"] == "none (name one)" and plan.loc[0, "samples to score"] == 0
    assert any(run_id in info.value and "no perplexity until an oracle is named" in info.value for info in app.info)
    assert not any("tokens to read" in caption.value for caption in app.caption)  # it said "About 0 tokens", "0 s"
    app.text_input(key="score-oracle").set_value("smollm2-135m-instruct").run()
    plan = app.dataframe[0].value
    assert plan.loc[0, "samples to score"] == 3 and not plan.loc[0, "own generator"]
    compute = by_label(app.button, "Compute")
    assert compute.disabled
    consent = app.checkbox(key="score-consent")
    assert "not comparable" in consent.label and "meditron" in consent.label
    consent.check().run()
    assert not by_label(app.button, "Compute").disabled
    # Issue 58, item 15: a duration people read ("roughly 40 s", "roughly 2 min 5 s"), never "0.0 min".
    assert any(re.search(r"tokens to read: roughly \d+ (s|min)", caption.value) for caption in app.caption)
    # An oracle no metric asked for reads is said, not computed around; no metric asked for computes nothing.
    app.multiselect(key="score-metrics").set_value(["rouge"]).run()
    assert any("reads a perplexity oracle: add ppl to the metrics, or drop 'smollm2-135m-instruct'" in error.value
               for error in app.error)
    assert by_label(app.button, "Compute").disabled
    app.text_input(key="score-oracle").set_value("").run()
    assert not app.error and not by_label(app.button, "Compute").disabled
    app.multiselect(key="score-metrics").set_value([]).run()
    assert by_label(app.button, "Compute").disabled


def test_quality_table_names_the_oracle_and_never_bolds_a_self_similarity(app_db, qa_run, lm):
    import json

    from fwsapp.quality.scoring import QualityResources, score_run
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
    assert {trace["x"][0] for trace in box["data"]} == {"smollm2-135m-instruct · KGW · delta=2 (defaults)"}


# Judge

def test_failed_verdicts_show_no_empty_means_and_can_be_asked_again(app_db, tmp_path):
    from tests.openai_stub import StubServer

    imported_qa_db(app_db, n=3)
    with StubServer(default="noscores", structured=False) as stub:
        app = open_page("judge")
        app.radio(key="judge-backend").set_value("compatible").run()
        app.text_input(key="judge-base-url").set_value(stub.base_url).run()
        app.text_input(key="judge-model-compatible").set_value("").run()
        by_label(app.button, "Test connection").click().run()
        assert "or the Judge model field" in shown(app.error[0].value)
        app.text_input(key="judge-model-compatible").set_value("stub-judge").run()
        by_label(app.button, "Judge").click().run()
        deadline = time.time() + 120
        while time.time() < deadline and not app.error:
            time.sleep(1)
            app.run()
        assert "no verdict of the 3 pairs could be read" in shown(app.error[0].value) and ".." not in shown(app.error[0].value)
        assert not any("Mean scores" in header.value for header in app.subheader)
        assert "0 pairs to judge (3 already judged)" in " ".join(m.value for m in app.markdown)
        assert by_label(app.button, "Judge").disabled  # nothing to send
        stub.default = "valid"
        app.checkbox(key="judge-retry-failed").check().run()
        assert "3 pairs to judge (0 already judged)" in " ".join(m.value for m in app.markdown)
        by_label(app.button, "Judge").click().run()
        deadline = time.time() + 120
        while time.time() < deadline and not any("Mean scores" in header.value for header in app.subheader):
            time.sleep(1)
            app.run()
    assert set(app.dataframe[-1].value.status) == {"ok"}


# Entities, for clinicians

def test_synonyms_share_a_mesh_heading_and_symptoms_have_their_branch():
    import pandas as pd

    from fwsapp.entities.introduced import with_mesh_headings
    from fwsapp.entities.recognizers.base import mesh_branch, mesh_heading

    assert mesh_heading("type 2 diabetes") == mesh_heading("type 2 diabetes mellitus") == "diabetes mellitus type 2"
    assert mesh_branch("cough") == mesh_branch("weight loss") == "sign or symptom"
    assert mesh_branch("asthma") == mesh_branch("gout") == "disease"
    rows = pd.DataFrame({"run_id": "r", "sample_idx": 0, "config": "c",
                         "text_kind": ["reference", "watermarked", "watermarked"],
                         "normalized": ["type 2 diabetes mellitus", "type 2 diabetes", "gout"],
                         "introduced": [False, True, True], "hallucinated": [False, True, True]})
    marked = with_mesh_headings(rows).set_index("normalized")
    assert not marked.at["type 2 diabetes", "introduced"] and not marked.at["type 2 diabetes", "hallucinated"]
    assert marked.at["gout", "introduced"]


@pytest.fixture
def entity_app(app_db):
    import json

    from fwsapp.models.encoder import load_encoder
    from fwsapp.entities.introduced import analyze_run
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.entities.recognizers import load_recognizer
    from fwsapp.store import Store

    rows = [{"prompt": "What is this?", "natural_text": "Type 2 diabetes mellitus and asthma are common.",
             "unwatermarked_text": "Asthma is common.",
             "watermarked_text": "Tuberculosis, type 2 diabetes and gout, with a cough."}]
    store = Store(app_db)
    run_id = import_logs(store, method="KGW", model="m", task_name="qa", generations=LogFile("g.json", json.dumps(rows).encode()))
    analyze_run(store, run_id, load_recognizer("mesh"), load_encoder())  # a fixed lexicon: known entities
    store.close()
    return run_id


def disease_view(app: AppTest) -> AppTest:
    """The Entities page switched to its disease-entities view (it opens on the clinical facts)."""
    return app.radio(key="entities-view").set_value("Disease entities (Table 7)").run()


def test_table_7_writes_a_percentage_to_a_tenth_as_the_fws_and_judge_pages_do(app_db):
    """7 of 11 mentions unsupported read 63.636 % on the Entities page (and 36.364 % of 11 on the paper's logs),
    where the FWS and Judge pages write their drops to a tenth; its shorter headings stay, the full one as help."""
    import json

    from fwsapp.models.encoder import load_encoder
    from fwsapp.entities.introduced import analyze_run
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.entities.recognizers import load_recognizer
    from fwsapp.store import Store
    from tests.conftest import written_cells

    rows = [{"prompt": "Which diseases?", "natural_text": "Asthma, gout, tuberculosis and measles are common.",
             "unwatermarked_text": "Asthma is common.",
             "watermarked_text": "Asthma, gout, tuberculosis, measles, malaria, cholera, leprosy, rabies, tetanus, "
                                 "typhoid fever and influenza."}]
    store = Store(app_db)
    run_id = import_logs(store, method="KGW", model="m", task_name="qa",
                         generations=LogFile("g.json", json.dumps(rows).encode()))
    analyze_run(store, run_id, load_recognizer("mesh"), load_encoder())  # a fixed lexicon: 7 of the 11 not in the reference
    store.close()
    table = disease_view(open_page("entities")).dataframe[0]
    written = written_cells(table).iloc[0]
    assert written["unsupported by the reference % (watermarked)"] == "63.6"
    assert written["introduced per text (watermarked)"] == "7.000"  # a mean, not a percentage: three decimals
    headings = json.loads(table.proto.columns)["unsupported by the reference % (watermarked)"]
    assert (headings["label"], headings["help"]) == ("unsupported % (watermarked)",
                                                     "unsupported by the reference % (watermarked)")


def test_entity_page_counts_by_branch_and_lists_introduced_entities_in_reading_order(entity_app):
    app = disease_view(open_page("entities"))
    table = app.dataframe[0].value
    assert table.loc[0, "introduced per text (watermarked)"] == 3  # tuberculosis, gout, cough; not the synonym
    assert "unsupported by the reference % (watermarked)" in table.columns
    app.radio(key="entity-branch").set_value("disease").run()
    assert app.dataframe[0].value.loc[0, "introduced per text (watermarked)"] == 2
    app.radio(key="entity-branch").set_value("all").run()
    listed = [m.value for m in app.markdown if "· character" in m.value]
    starts = [int(text.split("· character ")[1].split(" ")[0]) for text in listed]
    assert len(listed) == 3 and starts == sorted(starts)
    assert any("introduced and unsupported by the reference" in m.value for m in app.markdown)  # the legend
    app.slider(key="entity-similarity").set_value((0.99, 1.0)).run()
    assert any("No sample matches" in info.value for info in app.info)


def test_entity_verdicts_show_what_was_recorded_and_can_be_undone(entity_app):
    from fwsapp.store import Store

    app = AppTest.from_file(APP, default_timeout=120)
    app.session_state["rater"] = "Dr Rate"  # the Rate page's name must not carry over
    app.run()
    disease_view(app.switch_page("pages/entities.py").run())
    assert app.text_input(key="entity-rater").value == ""
    assert all(radio.disabled for radio in app.radio if radio.label == "Verdict")
    app.text_input(key="entity-rater").set_value("Dr Entity").run()
    verdict = next(radio for radio in app.radio if radio.label == "Verdict")
    assert len(verdict.options) == 4 and "Not a disease" in verdict.options
    verdict.set_value("Correct, not in the reference").run()
    assert any("Recorded for Dr Entity: Correct, not in the reference" in c.value for c in app.caption)
    import os

    store = Store(os.environ["FWSAPP_DB"])  # the app's own database, alongside its connection
    assert store.entity_verdicts().verdict.tolist() == ["correct_not_in_reference"]
    by_label(app.button, "Undo").click().run()
    assert not any("Recorded for" in c.value for c in app.caption)
    assert next(radio for radio in app.radio if radio.label == "Verdict").value is None
    assert store.entity_verdicts().empty


def test_one_verdict_covers_every_mention_of_a_name_and_next_sample_counts_what_is_reviewed(app_db):
    import json
    import os

    from fwsapp.models.encoder import load_encoder
    from fwsapp.entities.introduced import analyze_run
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.entities.recognizers import load_recognizer
    from fwsapp.store import Store

    rows = [{"prompt": "What is this?", "natural_text": "Asthma is common.", "unwatermarked_text": "Asthma is common.",
             "watermarked_text": "Gout, then gout again, and tuberculosis."},
            {"prompt": "And this?", "natural_text": "Asthma is common.", "unwatermarked_text": "Asthma.",
             "watermarked_text": "Obesity is common."}]
    store = Store(app_db)
    run_id = import_logs(store, method="KGW", model="m", task_name="qa", generations=LogFile("g.json", json.dumps(rows).encode()))
    analyze_run(store, run_id, load_recognizer("mesh"), load_encoder())
    store.close()
    app = disease_view(open_page("entities"))
    app.text_input(key="entity-rater").set_value("Dr Repeat").run()
    sample = app.selectbox(key="entity-sample")
    assert "sample 0 ·" in sample.format_func(sample.value) and by_label(app.button, "Previous").disabled
    assert any("Reviewed by Dr Repeat: 0 of the 2 samples" in shown(caption.value) for caption in app.caption)
    names = [m.value for m in app.markdown if "· rule:" in m.value]
    assert len(names) == 2 and "2 mentions, characters 0, 11" in names[0]  # gout once, for both mentions
    radios = [radio for radio in app.radio if radio.label == "Verdict"]
    radios[0].set_value("Wrong (hallucinated)").run()
    [radio for radio in app.radio if radio.label == "Verdict"][1].set_value("Correct, not in the reference").run()
    verdicts = Store(os.environ["FWSAPP_DB"]).entity_verdicts()
    assert sorted(verdicts.entity) == ["Gout", "gout", "tuberculosis"]
    assert any("Reviewed by Dr Repeat: 1 of the 2 samples" in shown(caption.value) for caption in app.caption)
    by_label(app.button, "Next sample").click().run()
    sample = app.selectbox(key="entity-sample")
    assert "sample 1 ·" in sample.format_func(sample.value) and by_label(app.button, "Next sample").disabled
    assert [m.value for m in app.markdown if "· rule:" in m.value][0].startswith("Obesity")


# Entropy

def test_shared_unwatermarked_and_reference_texts_are_counted_once():
    import pandas as pd

    from fwsapp.results.entropy_shift import series_values

    runs = pd.DataFrame({"run_id": ["a", "b"], "method": ["KGW", "SWEET"], "task": "qa", "model": "m",
                         "params": ['{"delta": 1.0}', "{}"], "imported": False})
    values = pd.DataFrame({"run_id": ["a"] * 6 + ["b"] * 6, "sample_idx": 0,
                           "text_kind": ["unwatermarked", "unwatermarked", "reference", "reference", "watermarked",
                                         "watermarked"] * 2,
                           "entropy": [1.0, 2.0, 0.5, 0.7, 3.0, 3.1, 1.0, 2.0, 0.5, 0.7, 2.5, 2.6]})
    counts = series_values(values, runs, "qa").series.value_counts()
    assert counts.to_dict() == {"unwatermarked": 2, "reference": 2, "KGW · delta=1": 2, "SWEET · delta=2 (defaults)": 2}


def test_a_runs_entropy_shift_is_against_its_own_unwatermarked_texts_and_references():
    """A sweep: a long run (its texts' tokens all high) and a short one (all low), each watermark leaving its own run's
    shares as they were. Against the pooled unwatermarked texts the short run read a shift of +50 points into the low
    bin; against its own texts, none. Its references have no entropies: its shift from them is None, not the long run's."""
    import pandas as pd

    from fwsapp.results.entropy_shift import bin_table

    runs = pd.DataFrame({"run_id": ["long", "short"], "method": "KGW", "task": "qa", "model": "m",
                         "params": ['{"delta": 1.0}', '{"delta": 4.0}'], "imported": False})
    values = pd.DataFrame({"run_id": ["long"] * 6 + ["short"] * 4, "sample_idx": [0, 0, 1, 1, 0, 1, 0, 0, 1, 1],
                           "text_kind": ["unwatermarked", "watermarked"] * 2 + ["reference"] * 2
                           + ["unwatermarked", "watermarked"] * 2,
                           "entropy": [5.0, 5.5, 6.0, 6.5, 2.0, 3.0, 0.5, 0.6, 0.7, 0.8]})
    table = bin_table(values, runs, "qa").set_index("series")
    assert table.loc["unwatermarked", ["low", "high"]].tolist() == [50, 50]  # the pooled row: both runs' texts
    for series in ("KGW · delta=1", "KGW · delta=4"):
        assert table.loc[series, ["low shift vs unwatermarked (pp)", "mid shift vs unwatermarked (pp)",
                                  "high shift vs unwatermarked (pp)"]].tolist() == [0, 0, 0]
    assert table.loc["KGW · delta=1", "high shift vs reference (pp)"] == 100
    assert table.loc["KGW · delta=4", ["low shift vs reference (pp)"]].isna().all()


def test_the_entropy_pages_series_keep_one_order_the_baselines_first():
    """Sorted as text, the baselines fell among the runs (SynthID, reference, unwatermarked, vLLM-Gumbel) in the
    densities' legend and the bins' table, and the entities' chart listed its series as its rows came."""
    import pandas as pd

    from fwsapp.results.entropy_shift import bin_table, density_frame, series_order

    runs = pd.DataFrame({"run_id": ["s", "v", "e"], "method": ["SynthID", "vLLM-Gumbel", "EXP-edit"], "task": "qa",
                         "model": "m", "params": "{}", "imported": False})
    values = pd.DataFrame({"run_id": [run for run in "sve" for _ in range(6)], "sample_idx": 0,
                           "text_kind": ["unwatermarked", "unwatermarked", "reference", "reference", "watermarked",
                                         "watermarked"] * 3, "entropy": [1.0, 2.0, 0.5, 0.7, 3.0, 3.5] * 3})
    expected = ["unwatermarked", "reference", "EXP-edit · defaults", "SynthID · depth=9 (defaults)", "vLLM-Gumbel · defaults"]
    assert bin_table(values, runs, "qa").series.tolist() == expected
    assert density_frame(values, runs, "qa").series.unique().tolist() == expected
    assert series_order(["vLLM-Gumbel · defaults", "reference", "EXP-edit · defaults", "unwatermarked"]) == [
        "unwatermarked", "reference", "EXP-edit · defaults", "vLLM-Gumbel · defaults"]


def test_the_entropy_density_holds_its_mass_at_0_where_entropies_pile_up():
    """Entropies of rate 1 (an exponential, density 1 at 0, falling): the plain KDE read about 0.5 at 0 and peaked
    beside it, as the Entropy page's curves did; reflected at 0 it comes close to the density there and keeps all
    its mass on the axis."""
    import numpy as np

    from fwsapp.results.entropy_shift import density

    values = np.random.default_rng(0).exponential(1.0, 20_000)
    grid = np.linspace(0, 10, 2001)
    curve = density(values, grid)
    # Reflection still smooths the slope at 0 a little (0.89 here, at scipy's bandwidth): not the plain KDE's 0.5.
    assert curve[0] > 0.85 and curve.argmax() == 0  # the mode at 0, not a bump beside it
    assert np.trapezoid(curve, grid) == pytest.approx(1.0, abs=0.01)
    assert np.abs(curve - np.exp(-grid)).max() < 0.12


def test_entropy_page_opens_on_a_task_with_data_keeps_colours_and_dismisses_old_results(app_db, qa_run):
    import json

    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.orchestration.pipeline import analyze
    from fwsapp.store import Store
    from fwsapp.ui.widgets import series_colours

    store, _, _ = qa_run
    copy_store(store, app_db)
    db = Store(app_db)
    rows = [{"prompt": "Complete:", "natural_text": "Gout is painful.", "unwatermarked_text": "Gout hurts.",
             "watermarked_text": "Gout aches."}]
    imported = import_logs(db, method="KGW", model="m", task_name="completion",
                           generations=LogFile("g.json", json.dumps(rows).encode()))
    analyze(db, [imported], model_loader=lambda name: None)  # entities without entropies: nothing to draw
    assert not db.entities([imported]).empty
    db.close()
    app = open_page("entropy")
    assert app.radio(key="entropy-task").value == "qa"
    density = json.loads(app.get("plotly_chart")[0].proto.spec)
    colours = {trace["name"]: trace["line"]["color"] for trace in density["data"]}
    assert colours["unwatermarked"] == series_colours()["unwatermarked"]
    assert colours["KGW · delta=2 (defaults)"] == series_colours()["KGW"]
    by_label(app.button, "Analyse").click().run()
    deadline = time.time() + 240
    while time.time() < deadline and not app.success:
        time.sleep(1)
        app.run()
    assert "(finished " in shown(app.success[0].value)
    by_label(app.button, "Dismiss").click().run()
    assert not app.success
    # Nothing of the finished job comes back: no stale progress bar, no live Cancel.
    assert not app.get("progress") and "Cancel" not in [button.label for button in app.button]


def test_a_runs_entropies_are_read_under_one_model_for_every_text_kind(tmp_path):
    """Chosen per text kind by most tokens, a run's watermarked densities came from one stand-in and its unwatermarked
    ones from another (its watermarked texts longer in one's tokens, its unwatermarked in the other's), and the Entropy
    page and the report set the two against each other."""
    import json

    from fwsapp.entities.entropy import read_entropy_model, token_values
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.results.report import collect
    from fwsapp.store import Store

    db = Store(tmp_path / "two-stand-ins.duckdb")
    rows = [{"prompt": "Is gout painful?", "natural_text": "Gout is painful.", "unwatermarked_text": "Gout aches.",
             "watermarked_text": "Gout hurts; rest helps."}]
    run_id = import_logs(db, method="KGW", model="meditron", task_name="qa",
                         generations=LogFile("meditron.json", json.dumps(rows).encode()))
    for model, lengths, value in (("stand-in-a", {"watermarked": 6, "unwatermarked": 2}, 1.0),
                                  ("stand-in-b", {"watermarked": 3, "unwatermarked": 3, "reference": 1}, 5.0)):
        db.write_rows("entropies", run_id, [
            {"sample_idx": 0, "text_kind": kind, "model": model, "token_ids": list(range(length)),
             "token_spans": [[index, index + 1] for index in range(length)], "entropy": [value] * length}
            for kind, length in lengths.items()])
    values = token_values(db)
    assert set(values.entropy_model) == {"stand-in-a"}  # 8 tokens against 7, for every kind
    assert values.groupby("text_kind").size().to_dict() == {"unwatermarked": 2, "watermarked": 6}
    assert collect(db)["runs"][0]["entities"]["entropy_model"] == "stand-in-a"
    # A new entity analysis with no model named reads the same one (it read the model with most texts: b's 3 against 2).
    assert read_entropy_model(db, run_id) == "stand-in-a"
    db.close()


def test_the_entropy_page_draws_one_entropy_models_runs_where_a_generators_runs_were_read_under_two(app_db):
    """Two imports of one generator analysed with two stand-ins: their unwatermarked texts were one curve of both
    stand-ins' entropies, each watermarked run set against it."""
    from fwsapp.store import Store
    from tests.conftest import imported_qa_db

    ids = [imported_qa_db(app_db, n=n) for n in (3, 4)]
    db = Store(app_db)
    for run_id, model, value in ((ids[0], "stand-in-a", 1.0), (ids[1], "stand-in-b", 5.0)):
        db.write_rows("entropies", run_id, [
            {"sample_idx": index, "text_kind": kind, "model": model, "token_ids": [1, 2, 3],
             "token_spans": [[0, 1], [1, 2], [2, 3]], "entropy": [value, value + 0.5, value + 1.0]}
            for index in range(3) for kind in ("watermarked", "unwatermarked", "reference")])
    db.close()
    app = open_page("entropy")
    under = app.radio(key="entropy-under")
    assert [shown(option) for option in under.options] == ["stand-in-a", "stand-in-b"]
    for chosen, high in (("stand-in-a", 0.0), ("stand-in-b", 100.0)):  # a's entropies 1–2 nats, b's 5–6
        under.set_value(chosen).run()
        bins = app.dataframe[0].value.set_index("series")
        assert bins.at["unwatermarked", "tokens"] == 9  # one run's three texts of three tokens, not both runs'
        assert bins.at["unwatermarked", "high (> 4.0 nats) %"] == high
        assert len(bins) == 3  # reference, unwatermarked and the one run read under it
        assert any(f"under {chosen}, a model named" in shown(caption.value) for caption in app.caption)


def test_the_entropy_page_draws_one_models_runs_at_a_time_and_names_the_stand_in(app_db, lm):
    """Two models' imported KGW runs read alike ("KGW · imported"): their texts were one curve, pooled. And an
    import's entropies are under a stand-in model, which the page names; a second stand-in is never pooled in."""
    import json

    from fwsapp.entities.entropy import compute_entropies, token_values
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store

    db = Store(app_db)
    ids = {}
    for model, words in (("meditron", "Gout hurts a lot and the joint swells."), ("biomistral", "Gout aches.")):
        rows = [{"prompt": f"Is gout {i} painful?", "natural_text": "Gout is painful.", "unwatermarked_text": words,
                 "watermarked_text": f"{words} Rest helps."} for i in range(2)]
        ids[model] = import_logs(db, method="KGW", model=model, task_name="qa",
                                 generations=LogFile(f"{model}.json", json.dumps(rows).encode()))
        compute_entropies(db, ids[model], lm)
    db.write_rows("entropies", ids["meditron"], [{"sample_idx": 0, "text_kind": "reference", "model": "other-model",
                                                  "token_ids": [1], "token_spans": [[0, 1]], "entropy": [9.5]}])
    values = token_values(db)
    assert set(values.entropy_model) == {lm.name} and 9.5 not in set(values.entropy)  # the lesser stand-in left out
    db.close()
    app = open_page("entropy")
    model = app.radio(key="entropy-model")
    assert model.options == ["biomistral", "meditron"]
    for chosen in ("biomistral", "meditron"):
        model.set_value(chosen).run()
        bins = app.dataframe[0].value.set_index("series")
        own = values[values.run_id == ids[chosen]]
        assert bins.at["KGW · imported", "tokens"] == (own.text_kind == "watermarked").sum()
        assert bins.at["unwatermarked", "tokens"] == (own.text_kind == "unwatermarked").sum()
        assert any(f"under {lm.name}, a model named for their generator" in shown(caption.value) for caption in app.caption)


# Runs that differ only in their parameters

def two_kgw_runs_differing_in_delta(store):
    """Two generated KGW QA runs of one model that differ only in δ, with metrics and verdicts that set them apart. The
    metrics are stored under the configs `score` writes, as the Quality page, which computes what a run lacks when it
    opens, would store them: the tables read those."""
    from fwsapp.quality.registry import METRICS
    from fwsapp.quality.scoring import QualityResources, implementation_of

    def config(stored_name: str) -> str:
        entry = next(entry for entry in METRICS if stored_name in entry.stored_names)
        return implementation_of(entry.name).config({"model": "m", "imported": False, "config": {}},
                                                    QualityResources(model_loader=None))

    for run_id, delta, value, score in (("weak", 1.0, 0.9, 5), ("strong", 2.0, 0.3, 2)):
        store.add_run(run_id, {"config": {"delta": delta}, "model": "m", "task": "qa", "method": "KGW",
                               "params": {"delta": delta}, "n": 4, "status": "done"}, {
            "generations": [{"sample_idx": i, "prompt": f"Q{i}?", "reference": f"gout {i}",
                             "unwatermarked_text": f"gout u{i}", "watermarked_text": f"gout w{i}"} for i in range(4)],
            "metrics": [{"sample_idx": i, "text_kind": kind, "metric": metric, "config": config(metric),
                         "value": value if kind == "watermarked" else 0.5}
                        for i in range(4) for kind in ("watermarked", "unwatermarked")
                        for metric in ("simcse_reference", "simcse", "rouge2", "rougeL", "f1", "factuality")],
            "judgments": [{"sample_idx": i, "judge_model": "gpt-4o", "prompt_version": "v", "watermarked_first": True,
                           "texts_hash": str(i), "status": "ok", "scores_watermarked": [score] * 3,
                           "scores_unwatermarked": [4, 4, 4]} for i in range(4)],
        })


def test_two_runs_that_differ_only_in_delta_are_two_rows_on_quality_and_fws(app_db):
    import json

    from fwsapp.store import Store

    store = Store(app_db)
    two_kgw_runs_differing_in_delta(store)
    store.close()
    quality = open_page("quality")
    tables = [frame.value for frame in quality.dataframe if "Settings" in frame.value.columns]
    kgw = tables[0][tables[0].Method == "KGW"].set_index("Settings")
    assert kgw.F1.to_dict() == {"delta=1": pytest.approx(0.9), "delta=2 (defaults)": pytest.approx(0.3)}
    assert len(tables[1].query("Method == 'KGW'")) == 2  # the difference table too
    box = json.loads(quality.get("plotly_chart")[0].proto.spec)
    assert {"m · KGW · delta=1", "m · KGW · delta=2 (defaults)"} <= {x for trace in box["data"] for x in trace["x"]}

    fws_page = open_page("fws")
    for frame in fws_page.dataframe[:2]:  # GPTJ and Auto: one row per run, with different values
        rows = frame.value[frame.value.Method == "KGW"].set_index("Settings")
        assert set(rows.index) == {"delta=1", "delta=2 (defaults)"}
        assert rows.loc["delta=1", "Question answering"] > rows.loc["delta=2 (defaults)", "Question answering"]


# FWS

def test_fws_page_warns_off_scale_weights_and_draws_both_sources_on_readable_axes(app_db):
    import json

    from fwsapp.store import Store
    from tests.test_fws_human import judged_and_scored_store

    from fwsapp.store import detection_record

    store = Store(app_db)
    judged_and_scored_store(store)
    with store.transaction() as cursor:  # one detectable run, so the trade-off chart is drawn
        from fwsapp.store import insert_rows

        insert_rows(cursor, "detections", "a", [detection_record(i, kind, "KGW", score) for i in range(6)
                                                for kind, score in (("watermarked", 5.0 + i), ("unwatermarked", i / 6))])
    store.close()
    app = open_page("fws")
    tradeoff = next(json.loads(chart.proto.spec) for chart in app.get("plotly_chart")
                    if json.loads(chart.proto.spec)["layout"]["xaxis"]["title"]["text"] == "AUROC")
    assert tradeoff["layout"]["xaxis"]["range"] == [-0.02, 1.02]  # a rate's axis, not 0 to 2
    assert not any("not 1" in w.value for w in app.warning)
    app.radio(key="fws-mode").set_value("Free α and β").run()
    app.slider(key="fws-alpha").set_value(0.5).run()
    assert any("2α + β = 1.200, not 1" in w.value for w in app.warning)
    flip = next(json.loads(chart.proto.spec) for chart in app.get("plotly_chart")
                if "α/β" in json.dumps(json.loads(chart.proto.spec)["layout"], ensure_ascii=False))
    dashes = {trace["line"]["dash"] for trace in flip["data"]}
    assert dashes == {"solid", "dash"}  # the judge's and the metrics' curves, both shown
    assert flip["layout"]["xaxis"]["tickvals"] == [0.25, 0.5, 1, 2, 4, 8]
    assert not any("task=" in note["text"] for note in flip["layout"]["annotations"])


# Rate, Report and Import

def test_a_fourth_rater_is_told_why_nothing_is_left(app_db):
    from fwsapp.human.ratings import OpenRater
    from fwsapp.store import Store
    from tests.conftest import judged_rating_db

    app = open_page("rate")
    app.text_input(key="rater-name").set_value("Dr Four").run()
    assert any("No items to rate yet" in info.value for info in app.info)
    judged_rating_db(app_db, n=2)
    store = Store(app_db)
    for rater in ("R1", "R2", "R3"):
        while (item := OpenRater(rater).queue(store).upcoming) is not None:
            OpenRater(rater).submit(store, item, [3, 3, 3], [4, 4, 4])
    store.close()
    app = open_page("rate")
    app.text_input(key="rater-name").set_value("Dr Four").run()
    assert not app.success
    assert any("All 2 items already have their 3 ratings" in info.value for info in app.info)


def test_a_rater_goes_back_to_change_a_rating_and_a_skip(app_db):
    import os

    from fwsapp.store import Store
    from tests.conftest import judged_rating_db

    judged_rating_db(app_db, n=3)
    app = open_page("rate")
    app.text_input(key="rater-name").set_value("Dr Back").run()
    assert by_label(app.button, "Previous").disabled and by_label(app.button, "Next").disabled

    def rate(value, button="Submit"):
        for radio in app.radio:
            radio.set_value(value)
        return by_label(app.button, button).click().run()

    rate(2)
    by_label(app.button, "Skip").click().run()
    assert app.progress[0].proto.text == "3 of 3"
    by_label(app.button, "Previous").click().run()  # the skipped item, which can be rated now
    assert app.progress[0].proto.text == "2 of 3" and any("skipped this item" in c.value for c in app.caption)
    by_label(app.button, "Previous").click().run()
    assert app.progress[0].proto.text == "1 of 3" and by_label(app.button, "Previous").disabled
    assert {radio.value for radio in app.radio} == {2}  # the stored scores, as given
    app.radio[0].set_value(5)
    by_label(app.button, "Save changes").click().run()
    assert app.progress[0].proto.text == "2 of 3"  # on to the next one done
    rate(4, "Save changes")  # the skip becomes a rating
    store = Store(os.environ["FWSAPP_DB"])
    ratings = store.human_ratings()
    assert len(ratings) == 2 and set(ratings.rater) == {"Dr Back"}
    assert sorted(score for row in ratings.itertuples() for score in [*row.scores_watermarked, *row.scores_unwatermarked]
                  ) == [2] * 5 + [4] * 6 + [5]
    assert store.rater_progress("Dr Back") == (2, 3)  # the skip is gone with its rating in its place
    assert app.progress[0].proto.text == "3 of 3" and by_label(app.button, "Next").disabled


def test_a_column_of_numbers_with_words_gets_room_for_the_words():
    import pandas as pd

    from fwsapp.ui.widgets import uniform, worded_columns

    frame = pd.DataFrame({"Model": ["a", "b"], "AUROC": [1.0, 0.9], "TPR@1%": [1.0, "not enough data (n = 4)"]})
    config = worded_columns(frame)
    assert config["TPR@1%"]["width"] == 160  # the Report's Table 1 cut these words short
    assert config["AUROC"]["type_config"]["format"] == "%.3f" and list(config) == ["AUROC", "TPR@1%"]  # 1 reads 1.000
    # As the pages give it: written alike by `uniform`, a column of text (pandas 3's str) that still mixes the two.
    assert list(worded_columns(uniform(frame))) == ["AUROC", "TPR@1%"]
    assert worded_columns(uniform(frame))["TPR@1%"]["width"] == 160


def test_a_count_among_words_stays_a_whole_number_and_a_rate_among_words_gets_three_decimals():
    """The Detect page's Length tab read "median tokens to detect 7.000" beside "never": a count is written whole."""
    import numpy as np
    import pandas as pd

    from fwsapp.ui.widgets import uniform

    frame = pd.DataFrame({"median tokens to detect": [7, "never", np.int64(16), None],
                          "TPR": [1, 0.71, "not enough data (n = 4)", None], "texts": [4, 4, 4, 4]})
    shown = uniform(frame)
    assert shown["median tokens to detect"].tolist()[:3] == ["7", "never", "16"]
    assert shown["TPR"].tolist()[:3] == ["1.000", "0.710", "not enough data (n = 4)"]
    assert shown["texts"].tolist() == [4, 4, 4, 4]  # no words among them: left to the table


def test_report_shows_where_numbers_come_from_and_no_empty_rows(app_db):
    from tests.conftest import judged_rating_db

    judged_rating_db(app_db, n=3)
    app = open_page("report")
    assert any("None means not computed" in caption.value for caption in app.caption)
    runs = app.dataframe[0].value
    row = runs.iloc[0]
    assert row["Source"] == "imported" and row["n"] == 3 and row["Judged"] == 3 and row["Judge failed"] == 0
    table4 = next(frame.value for frame in app.dataframe if "Question answering Judge" in frame.value.columns)
    value_columns = [column for column in table4.columns if column not in ("Model", "Method", "Settings")]
    assert table4[value_columns].notna().any(axis=1).all()  # no combination that was never run


def test_import_page_says_what_the_paper_file_names_mean():
    from fwsapp.data.tasks import task_from_file_name

    assert task_from_file_name("KGW-g0.5-d2-meditron-HQA2.generations.json") == "qa"
    assert task_from_file_name("KGW-g0.5-d2-meditron-HQA.judged.json") == "completion"
    assert task_from_file_name("DIP-jsl-MEQS.detection.json") == "summarization"
    assert task_from_file_name("my-logs.json") is None
    app = open_page("import")
    assert "HQA = Text completion" in app.caption[0].value and "MEQS = Summarization" in app.caption[0].value


def test_pages_with_missing_data_offer_the_action_in_place(app_db):
    run_id = imported_qa_db(app_db, 3)
    app = open_page("rate")
    app.text_input(key="rater-name").set_value("Dr Here").run()
    assert any("No items to rate yet" in info.value for info in app.info)
    next(button for button in app.button if button.label.startswith("Add 10 % of every run")).click().run()
    assert not app.exception and app.progress  # an item to rate is shown at once
    assert [shown(note.value) for note in app.success] == ["Added 1 item."]  # wiped by the rerun before
    disease_view(app.switch_page("pages/entities.py").run())
    next(button for button in app.button if button.label == "Analyse every run now").click().run()
    deadline = time.time() + 120
    while time.time() < deadline and not app.dataframe:
        time.sleep(1)
        app.run()
    assert not app.exception and list(app.dataframe[0].value.run_id) == [run_id]
    app.switch_page("pages/fws.py").run()
    # Issue 58, item 15: a duration under a minute in seconds (3 short pairs: a few seconds), never "about 1 min" or
    # "0.0 min".
    assert any(re.fullmatch(r"Judge 3 pairs with the embedded model now \(about \d+ s\)", button.label)
               for button in app.button), [button.label for button in app.button]
    assert not any("Quality page" in info.value for info in app.info)
    until(app.run(), lambda a: not a.get("progress"))  # the analysis started above
    compute = next(button for button in app.button if button.label.startswith("Compute them now (about "))
    assert re.fullmatch(r"Compute them now \(about \d+ s\)", compute.label), compute.label
    compute.click().run()  # the Auto table's metrics, from here
    until(app, lambda a: any(list(frame.value.columns) == ["Model", "Method", "Settings", "Question answering"]
                             for frame in a.dataframe))  # the Auto table, the only FWS table of an unjudged run


def test_judge_page_offers_an_unjudged_run_and_hides_what_a_local_judge_ignores(app_db):
    from fwsapp.orchestration.examples import load_examples
    from fwsapp.store import Store

    store = Store(app_db)
    load_examples(store)  # meditron's judged by the paper's GPT-4o already, BioMistral's not
    store.close()
    fresh = imported_qa_db(app_db, 2)  # the newest run
    app = open_page("judge")
    assert app.multiselect[0].value == [fresh]
    assert "Concurrent requests" not in [widget.label for widget in app.number_input]
    assert any("one pair at a time" in caption.value for caption in app.caption)
    assert any("2 pairs to judge" in text.value and "no cost" in text.value for text in app.markdown)
    app.radio(key="judge-backend").set_value("openai").run()
    assert "Concurrent requests" in [widget.label for widget in app.number_input]
    app.switch_page("pages/detect.py").run()
    app.switch_page("pages/judge.py").run()
    assert app.multiselect[0].value == [fresh]  # the selection is remembered


def test_the_judge_chart_spans_every_run_and_judge(app_db):
    """With the mean's axis fixed at 0-5 across the aspects' panels, plotly.js drew the runs' axis at its default range
    (-1 to 4): a sixth row of bars (a run, or another judge of one) was off the chart, and a fifth half on it."""
    from fwsapp.store import Store
    from tests.test_judge_runner import judged_by

    store = Store(app_db)
    for judge in range(6):
        judged_by(store, f"judge-{judge}", same=False)
    store.close()
    spec = json.loads(open_page("judge").get("plotly_chart")[0].proto.spec)
    rows = {label for trace in spec["data"] for label in trace["y"]}
    assert len(rows) == 6
    for axis in (value for name, value in spec["layout"].items() if name.startswith("yaxis")):
        low, high = axis["range"]
        assert low <= -0.5 and high >= len(rows) - 0.5, axis


def test_a_smoke_test_judge_is_marked_and_counted_only_when_asked(app_db):
    """The embedded model's verdicts: marked on the Judge page, left out of the FWS page's judge figures until the
    user counts them, and then named as a smoke test."""
    from fwsapp.models import EMBEDDED_MODEL
    from fwsapp.store import Store
    from tests.test_judge_runner import judged_by

    store = Store(app_db)
    judged_by(store, EMBEDDED_MODEL, same=True)
    store.close()
    judge = open_page("judge")
    assert any("are a smoke test" in info.value for info in judge.info)
    assert any("gave both texts the same scores on 100.0% of its 4 verdicts" in shown(warning.value) for warning in judge.warning)
    fws = open_page("fws")
    assert not any(shown(header.value).startswith(f"FWS, judge ({EMBEDDED_MODEL}") for header in fws.subheader)
    assert "FWS, judge (no verdicts yet)" in [shown(header.value) for header in fws.subheader]
    fws.checkbox(key="fws-smoke").check().run()
    assert f"FWS, judge ({EMBEDDED_MODEL} (smoke test))" in [shown(header.value) for header in fws.subheader]
    # Nor does the Home page count the run as judged: it said "Every run is scored, analysed and judged."
    home = open_page("home")
    assert {metric.label: metric.value for metric in home.metric}["Judged"] == "0"


def test_a_run_analysed_by_an_earlier_recognizer_is_not_counted_analysed_on_the_home_page(app_db):
    """After an upgrade of the disease tagger the Home page counted the runs it had analysed as analysed, and said
    "Every run is … analysed", while Table 7 still read the analysis of the version before; that analysis is kept."""
    from fwsapp.entities.recognizers import recognizer_label
    from fwsapp.orchestration.examples import load_examples
    from fwsapp.store import Store

    store = Store(app_db)
    load_examples(store)  # meditron's three runs come analysed by the recognizer as it is now
    store.close()
    assert {metric.label: metric.value for metric in open_page("home").metric}["Analysed"] == "3"
    store = Store(app_db)
    with store.transaction() as cursor:
        cursor.execute("UPDATE entity_analyses SET config = replace(config, ?, ?)",
                       [recognizer_label(), "trained disease tagger v1 0123456789 on MeSH PhraseMatcher v1"])
    kept = len(store.entity_analyses())
    store.close()
    assert {metric.label: metric.value for metric in open_page("home").metric}["Analysed"] == "0"
    assert kept == 600


def test_a_chart_of_more_series_than_the_palettes_hold_colours_every_one():
    """A sweep of many settings (the EntityKGW study's runs) drew the FWS page's flip chart into StopIteration."""
    from fwsapp.ui.widgets import series_colours

    series = [f"KGW · delta={delta / 10:g}" for delta in range(1, 80)]
    colours = series_colours(series)
    assert all(colours[name].startswith("#") or colours[name].startswith("rgb") for name in series)
    assert colours[series[0]] == series_colours()["KGW"]  # the first run keeps its method's colour
    assert len(set(colours[name] for name in series[:20])) == 20  # distinct while the palettes last


def test_every_method_and_baseline_is_drawn_in_a_colour_of_its_own():
    """The Entropy page drew EWD in #EB663B beside the unwatermarked texts' #e76f51, and vLLM-Gumbel-DualKey in #778AAE
    beside the reference's #8d99ae: two curves a reader could not tell apart."""
    from itertools import combinations

    from fwsapp.ui.widgets import BASELINE_COLOURS, DISTINCT_RGB, _rgb_distance, series_colours
    from fwsapp.watermark.methods import METHODS

    colours = series_colours()
    named = [*BASELINE_COLOURS, *METHODS.names()]
    close = [(first, second) for first, second in combinations(named, 2)
             if _rgb_distance(colours[first], colours[second]) < DISTINCT_RGB]
    assert close == [], close
