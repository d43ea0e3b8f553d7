"""Issue 58, items 16, 27 and 29: commands that used to report work they did not do, or stop a whole job for one run.

A study whose Entities task would ask nothing is refused; `detect` on scores imported without texts stores no empty
set; a command over every run skips (and names) the runs it cannot detect here, and does the others."""
from __future__ import annotations

import json

from fwsapp.cli import main
from fwsapp.store import Store
from tests.test_malformed_inputs import DETECTION, GOOD, assert_refused, row_counts


def imported(db, *files: tuple[str, object], model: str = "biomistral") -> str:
    """Import the given logs as one run of `model` (biomistral: its tokenizer, mistral-v1, ships here)."""
    args = ["import", "--method", "KGW", "--model", model, "--task", "qa", "--db", str(db)]
    for option, content in files:
        path = db.parent / f"{option}-{model}.json"
        path.write_text(json.dumps(content))
        args += [f"--{option}", str(path)]
    assert main(args) == 0
    return Store(db, read_only=True).runs().run_id.iloc[0]


def test_an_entities_study_of_runs_without_an_entity_analysis_is_refused_naming_analyze(tmp_path, capsys):
    db = tmp_path / "study.duckdb"
    run_id = imported(db, ("generations", GOOD))
    assert_refused(["study", "create", "--name", "names", "--runs", run_id, "--entities", "--db", str(db)],
                   [f"Run {run_id} has no entity analysis", f"python -m fwsapp analyze --run {run_id}"], db, capsys)


def test_detect_on_scores_imported_alone_stores_nothing_and_says_why(tmp_path, capsys):
    db = tmp_path / "scores.duckdb"
    run_id = imported(db, ("detection", {key: values[:3] for key, values in DETECTION.items()}))
    assert_refused(["detect", "--run", run_id, "--tokenizer", "mistral-v1", "--db", str(db)],
                   [f"{run_id} holds no texts (its scores were imported alone)"], db, capsys)
    store = Store(db, read_only=True)
    assert store.detection_sets([run_id]).empty
    store.close()


def test_a_command_over_every_run_skips_and_names_the_runs_it_cannot_detect_and_does_the_others(tmp_path, capsys):
    db = tmp_path / "all.duckdb"
    scores_only = imported(db, ("detection", {key: values[:3] for key, values in DETECTION.items()}))
    no_tokenizer = imported(db, ("generations", GOOD), model="a-model-not-on-this-machine")
    detectable = imported(db, ("generations", GOOD), model="biomistral")
    before = row_counts(db)
    capsys.readouterr()
    assert main(["detect", "--all", "--db", str(db)]) == 0
    out = capsys.readouterr()
    assert f"{scores_only}: skipped (it holds no texts" in out.err
    assert f"{no_tokenizer}: skipped (the tokenizer 'a-model-not-on-this-machine' is not on this machine" in out.err
    assert f"{detectable}: detection set" in out.out and no_tokenizer not in out.out
    store = Store(db, read_only=True)
    assert list(store.detection_sets().run_id) == [detectable]
    store.close()
    assert row_counts(db)["detection_sets"] == before["detection_sets"] + 1


def test_an_llm_attack_without_its_servers_url_and_model_is_refused_in_its_own_parameter_names(tmp_path, capsys):
    from tests.conftest import tiny_spec

    db = tmp_path / "grid.duckdb"
    imported(db, ("generations", GOOD))
    spec = tmp_path / "paraphrase.toml"
    spec.write_text(tiny_spec(steps='attack = [{ name = "paraphrase", params = { backend = "compatible" } }]'))
    assert_refused(["grid", str(spec), "--dry-run", "--db", str(db)],
                   ["paraphrase through the compatible backend needs base_url and model", "base_url=http://"], db, capsys)
    assert_refused(["attack", "--attack", "paraphrase", "--param", "backend=compatible", "--param", "model=m", "--all",
                    "--db", str(db)], ["needs base_url:"], db, capsys)
    assert "--base-url" not in capsys.readouterr().err
    assert_refused(["attack", "--attack", "paraphrase", "--param", "backend=local", "--param",
                    "base_url=http://127.0.0.1:9/v1", "--all", "--db", str(db)],
                   ["paraphrase: The local judge backend takes no base URL"], db, capsys)


def test_inviting_a_rater_to_a_full_study_is_refused_and_no_link_is_printed(tmp_path, capsys):
    db = tmp_path / "full.duckdb"
    run_id = imported(db, ("generations", GOOD))
    assert main(["study", "create", "--name", "full", "--runs", run_id, "--items-per-run", "2", "--raters-per-item",
                 "1", "--rater", "Dr A", "--db", str(db)]) == 0
    capsys.readouterr()
    assert_refused(["study", "invite", "--study", "full", "--rater", "Dr B", "--db", str(db)],
                   ["Dr B would get no item to rate", "each already with its 1 rater."], db, capsys)
    assert "invite=" not in capsys.readouterr().out
    assert_refused(["study", "create", "--name", "crowded", "--runs", run_id, "--items-per-run", "1",
                    "--raters-per-item", "1", "--rater", "Dr C", "--rater", "Dr D", "--db", str(db)],
                   ["2 raters for 1 item rated 1 time each"], db, capsys)
