"""Issue 47: generation through the user's own serving engine, against a server whose sampling step is vLLM's own
`GumbelWatermarker` (tests/served_engine.py); and a watermark key kept in an environment variable."""
from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from fwsapp.generation.run_config import RunConfig
from fwsapp.models import EMBEDDED_MODEL
from fwsapp.secret_keys import fingerprint
from fwsapp.watermark.factory import create

KEY = 2**64 - 7
KEY_VARIABLE = "FWSAPP_TEST_WATERMARK_KEY"


@pytest.fixture
def key_in_environment(monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, str(KEY))


# -- a key kept in an environment variable ----------------------------------------------------------------------------
def test_a_key_given_as_a_variable_is_recorded_as_its_fingerprint_and_read_again_to_detect(key_in_environment, monkeypatch):
    config = RunConfig(task="qa", method="vLLM-Gumbel", params={"key": f"${KEY_VARIABLE}"})
    assert config.params == {"key": f"${KEY_VARIABLE} {fingerprint(KEY)}"}
    assert str(KEY) not in json.dumps(config.identity())
    assert config.run_id() == RunConfig(task="qa", method="vLLM-Gumbel", params={"key": f"${KEY_VARIABLE}"}).run_id()
    tokens = list(range(40, 90))
    assert create(config.method, 1000, config.params).detect(tokens).p == create(config.method, 1000, {"key": KEY}).detect(tokens).p
    monkeypatch.setenv(KEY_VARIABLE, "5")  # another key under the same name: another run
    assert RunConfig(task="qa", method="vLLM-Gumbel", params={"key": f"${KEY_VARIABLE}"}).run_id() != config.run_id()
    with pytest.raises(ValueError, match=rf"^vLLM-Gumbel's key: \${KEY_VARIABLE} holds another key than the one recorded"):
        create(config.method, 1000, config.params)
    monkeypatch.delenv(KEY_VARIABLE)
    with pytest.raises(ValueError, match=rf"kept in \${KEY_VARIABLE}, which is not set here: set it to the key whose fingerprint"):
        create(config.method, 1000, config.params)
    with pytest.raises(ValueError, match=r"KGW's hash_key is kept in \$NOT_SET_ANYWHERE, which is not set here"):
        RunConfig(task="qa", method="KGW", params={"hash_key": "$NOT_SET_ANYWHERE"})


# -- what is asked of a server, and what is taken from its answer --------------------------------------------------------
def test_a_served_run_is_one_of_the_methods_the_engine_applies_at_an_address():
    with pytest.raises(ValueError, match=r"^KGW is not a watermark a serving engine applies.*vLLM-Gumbel or "
                                         r"vLLM-Gumbel-DualKey"):
        RunConfig(task="qa", method="KGW", server="http://localhost:8000/v1")
    with pytest.raises(ValueError, match=r"The server address 'localhost:8000' is not a server's address"):
        RunConfig(task="qa", method="gumbel", server="localhost:8000")
    served = RunConfig(task="qa", method="gumbel", server="http://localhost:8000/v1")
    assert "no_repeat_ngram_size" not in served.resolved_sampling()  # not something a request can ask
    assert "server" not in RunConfig(task="qa", method="gumbel").identity()  # in-process run ids are unchanged


def test_a_request_asks_in_vllms_terms_and_only_the_opted_out_one_says_so():
    from fwsapp.generation.serving import request_options

    sampling = {"do_sample": True, "temperature": 0.7, "top_k": 50, "top_p": 0.9, "min_new_tokens": 32}
    marked, plain = (request_options(sampling, 64, 11, watermarked) for watermarked in (True, False))
    assert marked == {"max_tokens": 64, "temperature": 0.7, "top_p": 0.9, "seed": 11,
                      "extra_body": {"return_token_ids": True, "min_tokens": 32, "top_k": 50}}
    assert plain["extra_body"] == {**marked["extra_body"], "watermarking": False}
    greedy = request_options({**sampling, "do_sample": False, "top_k": 0}, 64, 11, True)
    assert greedy["temperature"] == 0.0 and "top_k" not in greedy["extra_body"]


@pytest.mark.parametrize("choice, message", [
    ({}, "a reply without a completion"),
    ({"text": 5}, "a reply whose text is not text"),
    ({"text": "ok", "token_ids": [1, 2, 1000]}, "token_ids are not token ids of a 1,000-token vocabulary"),
    ({"text": "ok", "token_ids": ["1"]}, "token_ids are not token ids"),
    ({"text": "ok", "token_ids": [1], "prompt_token_ids": [-1]}, "prompt_token_ids are not token ids"),
])
def test_an_answer_of_another_shape_is_one_line(choice, message):
    from types import SimpleNamespace

    from fwsapp.generation.serving import ServingError, answer_of

    with pytest.raises(ServingError, match=message):
        answer_of(SimpleNamespace(choices=[SimpleNamespace(**choice)]), 1000)


# -- through a server whose sampler is vLLM's ---------------------------------------------------------------------------
def served_rows(db) -> tuple[pd.DataFrame, pd.DataFrame]:
    from fwsapp.store import Store

    store = Store(db)
    try:
        runs = store.runs()
        return runs, store.frame("SELECT * FROM generations ORDER BY sample_idx")
    finally:
        store.close()


@pytest.mark.model
def test_a_served_run_stores_the_servers_ids_asks_one_opt_out_per_answer_and_detects_with_vllms_p_values(
        lm, key_in_environment, tmp_path, capsys):
    from fwsapp.cli import main
    from fwsapp.results.export import export_run
    from fwsapp.store import Store
    from tests.served_engine import served
    from tests.vllm_oracle import vllm_watermarking

    db = tmp_path / "served.duckdb"
    with served(lm, KEY, EMBEDDED_MODEL) as (engine, url):
        command = ["generate", "--server", url, "--task", "qa", "--method", "gumbel", "--param", f"key=${KEY_VARIABLE}",
                   "--n", "3", "--max-new-tokens", "16", "--batch-size", "2", "--seed", "5", "--db", str(db)]
        assert main(command) == 0
        run_id = capsys.readouterr().out.strip()
        asked = [(request["prompt"], request.get("extra_body", request).get("watermarking", True))
                 for request in engine.requests]
        assert sorted(asked) == sorted([(prompt, flag) for prompt in {prompt for prompt, _ in asked}
                                        for flag in (True, False)]) and len(asked) == 6
        assert all(request["return_token_ids"] is True for request in engine.requests)
        assert main(command) == 0 and len(engine.requests) == 6  # a repeated command asks nothing
    sent = {(answer["request"]["prompt"], answer["request"].get("watermarking", True)): answer["token_ids"]
            for answer in engine.answered}
    runs, generations = served_rows(db)
    assert runs.set_index("run_id").loc[run_id, "params"].count(f"${KEY_VARIABLE} {fingerprint(KEY)}") == 1
    detector = vllm_watermarking().GumbelWatermarkDetector(KEY, 4)
    store = Store(db)
    stored = store.detections([run_id]).set_index(["sample_idx", "text_kind"]).score
    csv = export_run(store, run_id, "csv", tmp_path / "run.csv").read_text()
    store.close()
    for row in generations.itertuples():
        for kind, watermarked in (("watermarked", True), ("unwatermarked", False)):
            ids = [int(token) for token in getattr(row, f"{kind}_ids")]
            assert ids == sent[(row.prompt, watermarked)]  # exactly what the server returned
            theirs = detector.detect(ids)
            assert stored[(row.sample_idx, kind)] == pytest.approx(theirs.p_value, rel=1e-9, abs=1e-300)
            assert theirs.is_watermarked == watermarked
    for place in (db.read_bytes(), csv.encode()):
        assert str(KEY).encode() not in place
    # Its generator is not loaded here: analyze loaded the served model's name as if the run had been generated here,
    # and read its references alone (the server recorded no entropy of its answers).
    assert main(["analyze", "--run", run_id, "--recognizer", "mesh", "--entropy-model", EMBEDDED_MODEL, "--db",
                 str(db)]) == 0
    assert f"{run_id}: entropies of 9 texts stored" in capsys.readouterr().out
    store = Store(db)
    assert store.entropy_keys(run_id, EMBEDDED_MODEL) == {(index, kind) for index in range(3)
                                                         for kind in ("reference", "unwatermarked", "watermarked")}
    store.close()
    assert main(["analyze", "--run", run_id, "--recognizer", "mesh", "--db", str(db)]) == 0
    assert f"{run_id}: imported or served, so its generator is not loaded here" in capsys.readouterr().out


def test_the_report_names_a_served_run_as_served_as_runs_does(tmp_path):
    """The report's runs table and its provenance columns said "generated" of a run a serving engine answered."""
    from fwsapp.results.report import build_report
    from fwsapp.results.run_names import listing
    from fwsapp.results.tables import runs_table
    from fwsapp.store import Store
    from tests.conftest import served_run_db

    path = tmp_path / "served.duckdb"
    run_id = served_run_db(path)
    store = Store(path)
    table = runs_table(build_report(store)).set_index("Run")
    assert table.loc[run_id, "Source"] == "served" and set(table.Source) == {"served", "imported"}
    assert dict(zip(listing(store.runs()).run, listing(store.runs()).source))[run_id] == "served"
    store.close()


@pytest.mark.model
def test_a_served_runs_disease_mentions_read_the_entropies_teacher_forced_under_the_entropy_model(lm, tmp_path):
    """Analysed as if generated here, a served answer's mentions read the entropies recorded while generating, which a
    server leaves empty: every mention's entropy was None."""
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store
    from tests.conftest import served_run_db

    path = tmp_path / "served.duckdb"
    run_id = served_run_db(path, ["Diabetes mellitus and asthma are common.", "Gout is a painful arthritis."],
                           lm.tokenizer)
    store = Store(path)
    pipeline.analyze(store, [run_id], lambda name: lm, entropy_model=lm.name, recognizer="mesh")
    answers = store.entities([run_id]).query("text_kind != 'reference'")
    assert len(answers) >= 4 and answers.entropy.notna().all()
    store.close()


@pytest.mark.model
def test_mentions_analysed_before_their_entropies_read_them_once_stored(lm, tmp_path):
    """`analyze` without --entropy-model, then with it: the mentions found first had no entropy, and were not looked at
    again (every sample counted as analysed), so the Entropy page's entropy inside disease mentions missed the run."""
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store
    from tests.conftest import served_run_db

    path = tmp_path / "served.duckdb"
    run_id = served_run_db(path, ["Diabetes mellitus and asthma are common.", "Gout is a painful arthritis."],
                           lm.tokenizer)
    store = Store(path)
    first = pipeline.analyze(store, [run_id], lambda name: lm, recognizer="mesh")
    assert first.entropies[run_id] is None and store.entities([run_id]).entropy.isna().all()
    mentions = len(store.entities([run_id]))
    then = pipeline.analyze(store, [run_id], lambda name: lm, entropy_model=lm.name, recognizer="mesh")
    entities = store.entities([run_id])
    assert then.entities[run_id] == 2 and len(entities) == mentions and entities.entropy.notna().all()
    assert store.entity_analyses([run_id])[["reference_tokens", "unwatermarked_tokens"]].notna().all().all()
    again = pipeline.analyze(store, [run_id], lambda name: lm, entropy_model=lm.name, recognizer="mesh")
    assert again.entities[run_id] == 0 and store.entities([run_id]).equals(entities)  # a repeated command changes nothing
    store.close()


@pytest.mark.model
def test_a_samples_mentions_read_one_entropy_models_values(lm, tmp_path):
    """A run with entropies under two stand-in models (its unwatermarked answers under the second alone): a new analysis
    (another threshold) read each text kind's entropies from whichever model's row came last, the unwatermarked
    answer's mentions under one model and the watermarked one's under another; now under the model named for it."""
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store
    from tests.conftest import served_run_db

    path = tmp_path / "served.duckdb"
    run_id = served_run_db(path, ["Diabetes mellitus and asthma are common.", "Gout is a painful arthritis."],
                           lm.tokenizer)
    store = Store(path)
    pipeline.analyze(store, [run_id], lambda name: lm, entropy_model=lm.name, recognizer="mesh")
    first = store.entities([run_id]).set_index(["sample_idx", "text_kind", "start_char"]).entropy
    with store.transaction() as cursor:  # a second stand-in's entropies of the unwatermarked answers, all 9 nats
        cursor.execute("INSERT INTO entropies SELECT run_id, sample_idx, text_kind, 'other-model', token_ids, "
                       "token_spans, list_transform(entropy, lambda value: 9.0) FROM entropies WHERE text_kind = 'unwatermarked'")
    pipeline.analyze(store, [run_id], lambda name: lm, entropy_model=lm.name, recognizer="mesh", threshold=0.5)
    entities = store.entities([run_id])
    second = entities[entities.config.str.endswith("sim<0.5")].set_index(["sample_idx", "text_kind", "start_char"])
    assert (second.index.get_level_values("text_kind") == "unwatermarked").any()
    assert second.entropy.to_dict() == first.to_dict()
    store.close()


@pytest.mark.model
def test_a_run_stopped_by_a_failing_server_says_so_in_one_line_and_resumes_to_the_same_samples(lm, tmp_path):
    from fwsapp.generation.serving import ServingEngine, ServingError
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store
    from tests.served_engine import served

    store = Store(tmp_path / "resume.duckdb")
    config = RunConfig(task="qa", method="gumbel", model=EMBEDDED_MODEL, n=3, max_new_tokens=12, batch_size=2, seed=8,
                       params={"key": KEY}, server="http://127.0.0.1:1/v1")
    with served(lm, KEY, EMBEDDED_MODEL) as (engine, url):
        config = RunConfig(**{**config.__dict__, "server": url})
        engine.fail_with, engine.fail_after = 503, 4  # the first unit's four answers, then the engine is overloaded
        with pytest.raises(ServingError) as failed:
            pipeline.generate(store, [config], None, executor=ServingEngine(url, attempts=2, backoff_base=0.01))
        assert "\n" not in str(failed.value) and "503 server error" in str(failed.value) \
            and "run the same command again to resume" in str(failed.value)
        first = store.frame("SELECT sample_idx, watermarked_ids FROM generations ORDER BY sample_idx")
        assert first.sample_idx.tolist() == [0, 1] and store.run(config.run_id())["status"] == "failed"
        engine.fail_with = None
        before = len(engine.requests)
        pipeline.generate(store, [config], None, executor=ServingEngine(url))
        assert {request["prompt"] for request in engine.requests[before:]} == {config.samples()[2].prompt}
    done = store.frame("SELECT sample_idx, watermarked_ids FROM generations ORDER BY sample_idx")
    assert done.sample_idx.tolist() == [0, 1, 2] and store.run(config.run_id())["status"] == "done"
    assert [list(ids) for ids in done.watermarked_ids[:2]] == [list(ids) for ids in first.watermarked_ids]
    store.close()


@pytest.mark.model
@pytest.mark.parametrize("fault", ["not served", "timeout", "garbage", "no token ids", "ignores the opt-out"])
def test_a_bad_server_answer_gets_one_line_and_loses_nothing(lm, tmp_path, fault):
    from fwsapp.generation.serving import ServingEngine, ServingError
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store
    from tests.served_engine import served

    with served(lm, KEY, EMBEDDED_MODEL) as (engine, url):
        config = RunConfig(task="qa", method="gumbel", model="not-this-one" if fault == "not served" else EMBEDDED_MODEL,
                           n=4, max_new_tokens=12, batch_size=4, seed=2, params={"key": KEY}, server=url)
        executor = ServingEngine(url, attempts=2, backoff_base=0.01, timeout=0.5 if fault == "timeout" else 60)
        engine.delay = 2.0 if fault == "timeout" else 0.0
        engine.garbage = fault == "garbage"
        engine.without_token_ids = fault == "no token ids"
        engine.ignore_opt_out = fault == "ignores the opt-out"
        store = Store(tmp_path / "bad.duckdb")
        if fault in ("not served", "timeout", "garbage"):
            with pytest.raises(ServingError) as failed:
                pipeline.generate(store, [config], None, executor=executor)
            message = str(failed.value)
            assert "\n" not in message
            assert {"not served": f"does not serve 'not-this-one'; it serves {EMBEDDED_MODEL}",
                    "timeout": "timeout: no response in time", "garbage": "unreadable response"}[fault] in message
            assert store.frame("SELECT count(*) AS n FROM generations").n[0] == 0
            return
        pipeline.generate(store, [config], None, executor=executor)
        [note] = executor.notes
        if fault == "no token ids":
            assert note.startswith(f"The server at {url} returned no token ids") and EMBEDDED_MODEL in note
            rows = store.frame("SELECT watermarked_text, watermarked_ids FROM generations")
            assert all(list(ids) == lm.tokenizer(text, add_special_tokens=False)["input_ids"]
                       for text, ids in zip(rows.watermarked_text, rows.watermarked_ids))
        else:
            assert note == (f"Run {config.run_id()}: 4 of 4 answers asked for with \"watermarking\": false carry the "
                            f"watermark: the server at {url} seems to ignore the opt-out, so its unwatermarked answers "
                            "are not.")
        store.close()


def test_the_served_models_name_is_checked_before_the_database_is_opened(tmp_path, capsys):
    from fwsapp.cli import main

    db = tmp_path / "never.duckdb"
    assert main(["generate", "--server", "http://127.0.0.1:9/v1", "--task", "qa", "--method", "gumbel", "--n", "1",
                 "--db", str(db)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: The server at http://127.0.0.1:9/v1 did not list its models:") and "\n" not in error
    assert not db.exists()
    assert main(["generate", "--server", "http://127.0.0.1:9/v1", "--task", "qa", "--method", "KGW", "--db", str(db)]) == 2
    assert "KGW is not a watermark a serving engine applies" in capsys.readouterr().err and not db.exists()
    assert os.environ.get(KEY_VARIABLE) is None


@pytest.mark.model
def test_a_spec_with_a_server_generates_its_grid_through_it(lm, tmp_path, capsys):
    from fwsapp.cli import main
    from tests.served_engine import served

    with served(lm, KEY, EMBEDDED_MODEL) as (engine, url):
        spec = tmp_path / "served.toml"
        spec.write_text(f'[server]\nurl = "{url}"\nconcurrency = 2\n\n[grid]\nmodels = ["{EMBEDDED_MODEL}"]\n'
                        'tasks = ["qa"]\nn = 2\nmax_new_tokens = 8\nbatch_size = 2\n\n'
                        f'[[method]]\nname = "vLLM-Gumbel"\nparams = {{ key = "{KEY}" }}\n')
        assert main(["grid", str(spec), "--db", str(tmp_path / "grid.duckdb")]) == 0
        assert sorted(request.get("watermarking", True) for request in engine.requests) == [False, False, True, True]
    runs, generations = served_rows(tmp_path / "grid.duckdb")
    assert runs.status.tolist() == ["done"] and len(generations) == 2
    spec.write_text(spec.read_text().replace(url, "localhost:8000"))
    assert main(["grid", str(spec), "--db", str(tmp_path / "grid.duckdb")]) == 2
    assert "[server] url 'localhost:8000' is not a server's address" in capsys.readouterr().err


@pytest.mark.model
def test_the_generate_page_generates_through_a_server_with_the_key_from_the_environment(lm, app_db, key_in_environment):
    from streamlit.testing.v1 import AppTest

    from tests.served_engine import served
    from tests.test_pages import APP, run_until

    with served(lm, KEY, EMBEDDED_MODEL) as (engine, url):
        app = AppTest.from_file(APP, default_timeout=60)
        app.switch_page("pages/generate.py").run()
        next(radio for radio in app.radio if radio.label == "Generated by").set_value("A serving engine (vLLM)").run()
        texts = {widget.label: widget for widget in app.text_input}
        texts["Server URL"].set_value(url)
        texts["Served model"].set_value(EMBEDDED_MODEL).run()
        assert next(box for box in app.selectbox if box.label == "Watermark").options == ["vLLM-Gumbel",
                                                                                          "vLLM-Gumbel-DualKey"]
        next(widget for widget in app.text_input if widget.label == "key").set_value(f"${KEY_VARIABLE}")
        numbers = {widget.label: widget for widget in app.number_input}
        numbers["Samples"].set_value(2)
        numbers["New tokens"].set_value(8)
        numbers["Batch size"].set_value(2)
        next(button for button in app.button if button.label == "Run").click().run()
        assert not app.exception
        run_until(app, lambda a: any(m.value.startswith("**Watermarked** · p = ") for m in a.markdown))
        assert sorted(request.get("watermarking", True) for request in engine.requests) == [False, False, True, True]
    page = " ".join(element.value for kind in ("markdown", "caption", "success") for element in getattr(app, kind))
    assert str(KEY) not in page


def test_a_served_run_is_never_generated_by_a_model_here():
    from fwsapp.generation.generate import InProcess, Unit, UnitWork

    config = RunConfig(task="qa", method="gumbel", server="http://localhost:8000/v1")
    work = UnitWork(config, Unit(config.run_id(), 0, (0,)), config.samples()[:1])
    with pytest.raises(ValueError, match="is generated through the serving engine at http://localhost:8000/v1"):
        InProcess(lambda name: pytest.fail("a model was loaded")).run([work], lambda w: w, print, print)
