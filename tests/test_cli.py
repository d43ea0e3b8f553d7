import json
import shutil

import pandas as pd
import pytest

from fwsapp.cli import main
from fwsapp.store import Store
from tests.conftest import PROJECT


def test_runs_report_and_export(qa_run, tmp_path, capsys):
    store, config, run_id = qa_run
    # The CLI opens the file itself, as a separate user would: give it a checkpointed copy.
    store.row("CHECKPOINT")
    db = str(tmp_path / "copy.duckdb")
    shutil.copy(store.path, db)
    assert main(["runs", "--db", db, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [run["run_id"] for run in listed] == [run_id]
    assert main(["runs", "--db", db]) == 0  # for people: labels, not the stored columns with their None and <NA>
    header, row = capsys.readouterr().out.strip().splitlines()
    assert header.split() == ["run", "method", "settings", "model", "task", "source", "samples", "status", "created"]
    assert row.startswith(run_id) and "delta=2 (defaults)" in row and "Question answering" in row
    assert " generated " in row and " 4 of 4 " in row and "None" not in row and "<NA>" not in row

    assert main(["report", "--db", db, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    detection = report["runs"][0]["detection"]
    assert set(detection["tpr_at_fpr"]) == {"0", "0.01", "0.05"}
    assert set(detection["mean_score"]) == {"watermarked", "unwatermarked"}

    for fmt in ("csv", "parquet"):
        out = tmp_path / f"run.{fmt}"
        named = ["--format", fmt] if fmt == "csv" else []  # else by --out's suffix
        assert main(["export", "--run", run_id, *named, "--out", str(out), "--db", db]) == 0
        table = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
        assert len(table) == 4
        assert list(table.columns[:6]) == ["run_id", "method", "settings", "seed", "model", "task"]
        assert set(table.settings) == {"delta=2 (defaults)"} and set(table.seed) == {config.seed}
        assert pd.api.types.is_integer_dtype(table.num_tokens_scored_watermarked)  # a count, not 32.0
        assert {"prompt", "reference", "watermarked_text", "score_watermarked", "score_unwatermarked"} <= set(table.columns)
        # Token ids come back as the lists stored: JSON arrays in a CSV cell, lists in Parquet (issue 47).
        ids = table.watermarked_ids.map(json.loads) if fmt == "csv" else table.watermarked_ids.map(list)
        stored = store.generations(run_id).watermarked_ids
        assert [list(map(int, row)) for row in ids] == [list(map(int, row)) for row in stored]


def test_the_export_carries_each_samples_quality_values_and_judge_scores_as_the_report_reads_them(tmp_path, capsys):
    from fwsapp.orchestration.examples import load_examples
    from fwsapp.store import Store

    db = tmp_path / "examples.duckdb"
    store = Store(db)
    load_examples(store)  # an import stores ROUGE and token F1; Meditron's runs have GPT-4o's verdicts
    runs = store.runs().set_index(["model", "task"]).run_id
    store.close()
    assert main(["report", "--db", str(db), "--format", "json"]) == 0
    report = {run["run_id"]: run for run in json.loads(capsys.readouterr().out)["runs"]}
    judged, unjudged = runs["meditron", "qa"], runs["biomistral", "qa"]
    for run_id in (judged, unjudged):
        out = tmp_path / f"{run_id}.parquet"
        assert main(["export", "--run", run_id, "--out", str(out), "--db", str(db)]) == 0
        table = pd.read_parquet(out)
        assert len(table) == 200
        for metric in ("rouge2", "rougeL", "f1"):
            for kind in ("watermarked", "unwatermarked"):
                assert table[f"quality_{metric}_{kind}"].mean() == pytest.approx(report[run_id]["quality"][metric][kind])
    assert not any(column.startswith("judge_") for column in table.columns)  # BioMistral's runs were not judged
    table = pd.read_parquet(tmp_path / f"{judged}.parquet")
    judge = report[judged]["judge"]
    for aspect in ("coherence", "relevance", "factual_accuracy"):
        for kind in ("watermarked", "unwatermarked"):
            assert table[f"judge_{aspect}_{kind}"].mean() == pytest.approx(judge[aspect][kind])
    assert judge["coherence"]["watermarked"] == pytest.approx(2.17)  # the paper's log, as read before
    assert set(table.judge_model) == {"gpt-4o"} and set(table.judge_verdicts) == {1}


def test_detect_says_what_the_set_found_and_whether_it_reproduces_an_imports_scores(tmp_path, capsys):
    from fwsapp.orchestration.examples import load_examples
    from fwsapp.store import Store

    db = tmp_path / "examples.duckdb"
    store = Store(db)
    load_examples(store)
    run_id = store.runs().set_index(["model", "task"]).run_id["biomistral", "qa"]  # its tokenizer ships here
    store.close()
    assert main(["detect", "--run", run_id, "--db", str(db)]) == 0  # it printed the set's id alone
    said = capsys.readouterr().out.strip().splitlines()
    assert said[0].startswith(f"{run_id}: detection set det-") and said[0].endswith("(KGW, mistral-v1)")
    assert said[1] == ("  AUROC 1.000, TPR at 1% FPR 1.00 against the reference texts; 600 texts scored; the imported "
                       "scores of 400 texts reproduced exactly")  # MarkLLM's published scores, from text again


def test_analyze_says_what_it_stored_and_what_was_there_already(tmp_path, capsys, monkeypatch):
    from tests.conftest import imported_qa_db

    db = tmp_path / "imported.duckdb"
    run_id = imported_qa_db(db, 2)
    command = ["analyze", "--run", run_id, "--recognizer", "mesh", "--db", str(db)]
    assert main(command) == 0
    said = capsys.readouterr().out
    assert f"{run_id}: disease entities of 2 samples analysed (" in said
    assert f"{run_id}: clinical facts of 2 samples stored" in said

    def loaded_for_nothing(*args, **kwargs):
        raise AssertionError("a model loaded to find every sample analysed")

    monkeypatch.setattr("fwsapp.entities.recognizers.load_recognizer", loaded_for_nothing)
    monkeypatch.setattr("fwsapp.models.encoder.load_encoder", loaded_for_nothing)
    assert main(command) == 0  # it said "disease entities of 0 samples analysed", and loaded the models to say it
    said = capsys.readouterr().out
    assert f"{run_id}: disease entities already analysed (" in said and f"{run_id}: clinical facts already stored" in said


def test_analyze_refuses_an_entropy_model_none_of_its_runs_would_read(tmp_path, capsys):
    """A generated run's entropies are its own model's: --entropy-model was ignored without a word."""
    db = tmp_path / "generated.duckdb"
    store = Store(db)
    store.ensure_run("gen-1", {}, model="m", task="qa", method="KGW", params={}, seed=1, n=1)
    store.close()
    assert main(["analyze", "--run", "gen-1", "--entropy-model", "other-model", "--db", str(db)]) == 2
    assert "--entropy-model names the model that reads the texts of imported and served runs" in capsys.readouterr().err


def test_bad_input_is_one_clear_line(tmp_path, capsys):
    assert main(["generate", "--task", "qa", "--method", "KGW", "--dataset", str(tmp_path / "none.json"),
                 "--db", str(tmp_path / "x.duckdb")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["generate", "--task", "qa", "--method", "nope", "--db", str(tmp_path / "x.duckdb")]) == 2
    assert "Unknown watermark method" in capsys.readouterr().err
    assert main(["generate", "--task", "qa", "--method", "KGW", "--max-new-tokens", "0",
                 "--db", str(tmp_path / "x.duckdb")]) == 2  # it said "n, max_new_tokens and batch_size must be positive"
    assert "max_new_tokens must be at least 1, not 0 (--max-new-tokens on the command line)" in capsys.readouterr().err
    Store(tmp_path / "x.duckdb").close()
    assert main(["export", "--run", "missing", "--format", "csv", "--out", str(tmp_path / "o.csv"),
                 "--db", str(tmp_path / "x.duckdb")]) == 2
    assert "No run 'missing'" in capsys.readouterr().err
    assert main(["export", "--run", "missing", "--out", str(tmp_path / "o.xlsx"), "--db", str(tmp_path / "x.duckdb")]) == 2
    assert "Export to .csv or .parquet, not .xlsx" in capsys.readouterr().err and not (tmp_path / "o.xlsx").exists()
    # A Parquet file named .csv (it was written so, and opened as garbage).
    assert main(["export", "--run", "missing", "--out", str(tmp_path / "o.csv"), "--format", "parquet",
                 "--db", str(tmp_path / "x.duckdb")]) == 2
    assert "o.csv names a CSV file, but the format asked for is Parquet: name it ….parquet, or leave the format to the " \
           "name." in capsys.readouterr().err and not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("command", [["runs"], ["runs", "--delete", "imp-x", "--yes"], ["report"],
                                     ["export", "--run", "imp-x", "--out", "o.csv"], ["compare"],
                                     ["paired", "--method", "SWEET", "--against", "KGW"],
                                     ["detect", "--run", "imp-x"], ["attack", "--run", "imp-x", "--attack", "typo"],
                                     ["score", "--run", "imp-x"], ["analyze", "--run", "imp-x"],
                                     ["judge", "--run", "imp-x", "--backend", "local"], ["study", "status", "--study", "s"]])
def test_a_command_that_reads_a_database_that_does_not_exist_says_so_and_creates_none(tmp_path, capsys, command,
                                                                                         monkeypatch):
    """A mistyped --db made an empty database there, and `runs` said "No runs in ..." and `report` gave no runs."""
    monkeypatch.chdir(tmp_path)
    mistyped = tmp_path / "fwsap.duckdb"
    assert main([*command, "--db", str(mistyped)]) == 2
    assert f"No database at {mistyped}" in capsys.readouterr().err
    assert not mistyped.exists() and not (tmp_path / "o.csv").exists()


def test_an_output_in_a_folder_that_does_not_exist_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    """`export --out /no/such/folder/x.csv` read the whole run, then failed to write it."""
    from fwsapp.results import export

    def reading(*args, **kwargs):
        raise AssertionError("the run was read before its output was checked")

    monkeypatch.setattr(export, "export_bytes", reading)
    database = tmp_path / "x.duckdb"
    Store(database).close()
    assert main(["export", "--run", "imp-x", "--out", str(tmp_path / "no" / "x.csv"), "--db", str(database)]) == 2
    assert f"The folder {tmp_path / 'no'} does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["detect"], ["attack", "--attack", "typo"], ["score"], ["analyze"],
                                     ["judge", "--backend", "local"]])
def test_all_runs_of_a_database_without_runs_is_said_so(tmp_path, capsys, command):
    """`detect --all` on a database with no runs did nothing, printed nothing and exited 0."""
    empty = tmp_path / "empty.duckdb"
    Store(empty).close()
    assert main([*command, "--all", "--db", str(empty)]) == 2
    assert f"No runs in {empty}: --all has nothing to work on" in capsys.readouterr().err


@pytest.mark.parametrize("command, bad, message", [
    (["report", "--format", "json"], ["--alpha", "nan"], "The FWS weight α (--alpha) must be in [0, 1], not nan."),
    (["report"], ["--beta", "-0.2"], "The FWS weight β (--beta) must be in [0, 1], not -0.2."),
    (["paired", "--method", "SWEET", "--against", "KGW"], ["--alpha", "-1"], "α (--alpha) must be in [0, 1], not -1.0."),
    (["compare"], ["--target-tpr", "2"], "The target TPR must be in (0, 1], not 2.0."),
])
def test_a_weight_or_target_out_of_range_is_refused_before_anything_is_read(tmp_path, capsys, command, bad, message):
    """`report --alpha nan` printed a report with NaN in every FWS, as JSON no parser reads; a negative weight
    rewarded what it weighs."""
    assert main([*command, *bad, "--db", str(tmp_path / "x.duckdb")]) == 2
    printed = capsys.readouterr()
    assert message in printed.err and not printed.out


def test_a_progress_bar_is_first_drawn_with_its_total(capsys):
    """It was first drawn with none, "detect: 0text [00:00, ?text/s]", before the bar of 400 texts."""
    from fwsapp.cli.terminal import progress_bar

    with progress_bar("detect", "text") as progress:
        progress(0, 400)
        progress(400, 400)
    drawn = capsys.readouterr().err
    assert "detect: 0text" not in drawn and "0/400" in drawn and "400/400" in drawn
    with progress_bar("score", "sample × metric") as progress:  # everything stored already: nothing to do, no bar
        progress(0, 0, "rouge")
        progress(0, 0)
    assert capsys.readouterr().err == ""


def test_runs_delete_asks_first_and_removes_every_row_of_the_run(tmp_path, capsys, monkeypatch):
    from fwsapp.orchestration.examples import load_examples
    from fwsapp.store import Store

    db = tmp_path / "runs.duckdb"
    store = Store(db)
    first, *others = load_examples(store)
    store.close()
    # No terminal (a script, CI): refused in one line, nothing asked or deleted (it died with EOFError).
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert main(["runs", "--delete", first, "--db", str(db)]) == 2
    assert "no terminal to confirm on; add --yes" in capsys.readouterr().err
    assert main(["runs", "--delete", "  ", "--db", str(db)]) == 2  # it listed the runs and exited 0
    assert "--delete needs a run id" in capsys.readouterr().err
    # Options that belong to the other use are refused, not ignored (--yes alone listed the runs).
    assert main(["runs", "--yes", "--db", str(db)]) == 2
    assert "--yes confirms --delete: add --delete ID, or drop it." in capsys.readouterr().err
    assert main(["runs", "--delete", first, "--yes", "--format", "json", "--db", str(db)]) == 2
    assert "--format is the listing's" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "something else")
    assert main(["runs", "--delete", first, "--db", str(db)]) == 1
    assert "Not deleted." in capsys.readouterr().out
    assert main(["runs", "--delete", first, "--yes", "--db", str(db)]) == 0
    assert f"Deleted run {first}: generations 200, detections 400" in capsys.readouterr().out
    assert main(["runs", "--delete", first, "--yes", "--db", str(db)]) == 2  # gone: one clear line
    store = Store(db, read_only=True)
    assert sorted(store.runs().run_id) == sorted(others) and store.metrics([first]).empty


def test_help_lists_every_command_of_the_parser_and_the_command_line_page_shows_each(capsys):
    import re

    from fwsapp.cli import build_parser

    commands = list(build_parser()._subparsers._group_actions[0].choices)
    assert len(commands) == 18
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = capsys.readouterr().out
    listed = shown.split("Commands:", 1)[1].split(".", 1)[0]
    assert [name.strip() for name in listed.split(",")] == commands
    assert all(re.search(rf"^    {re.escape(name)}\b", shown, re.M) for name in commands)  # each with its help line
    summary = (PROJECT / "docs" / "cli.md").read_text()  # the hand-written summary; the site adds each --help
    assert [name for name in commands if f"fwsapp {name}" not in summary] == []


def test_every_commands_own_help_says_what_it_does_and_what_each_option_is(capsys):
    """`score --help` opened with its usage alone: argparse shows a command's one-line help only in the list. And
    `generate --help` listed `--n N` with no word of what N counts (prompts? samples per prompt?), as 21 other options."""
    import argparse

    from fwsapp.cli import build_parser

    def commands(parser, path=()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield (*path, name), sub
                    yield from commands(sub, (*path, name))

    every = dict(commands(build_parser()))
    assert ("score",) in every and ("study", "export") in every and len(every) == 18 + 6
    assert [" ".join(path) for path, parser in every.items() if not parser.description] == []
    unexplained = [f"{' '.join(path)} {action.option_strings[0]}" for path, parser in every.items()
                   for action in parser._actions if action.option_strings and not action.help]
    assert unexplained == []
    with pytest.raises(SystemExit):
        main(["score", "--help"])
    assert "Compute the quality metrics a run lacks." in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    assert "how many of the dataset's prompts" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["study", "create", "--name", "s", "--runs", "r", "--raters", "dr_a"],  # not --raters-per-item
    ["generate", "--task", "qa", "--method", "KGW", "--max-new", "8"],  # not --max-new-tokens
])
def test_an_abbreviated_option_is_refused_not_taken_for_another(argv, capsys, tmp_path):
    with pytest.raises(SystemExit) as ended:
        main([*argv, "--db", str(tmp_path / "none.duckdb")])
    assert ended.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err
    assert not (tmp_path / "none.duckdb").exists()


def test_the_parser_is_built_without_the_libraries_only_the_commands_need():
    """`--help` and an argument error answer at once: building the parser imports no scikit-learn, SciPy, FastAPI or
    torch (with scikit-learn, SciPy and FastAPI it took 1.4 s here, 0.46 s without)."""
    import subprocess
    import sys

    heavy = ("sklearn", "scipy", "fastapi", "torch", "transformers", "spacy")
    code = (f"import sys; from fwsapp.cli import build_parser; build_parser(); "
            f"print(sorted(name for name in {heavy!r} if name in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=PROJECT, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout


def test_score_says_what_it_computed_and_what_was_stored_already(tmp_path, capsys):
    from tests.conftest import imported_qa_db

    db = tmp_path / "imported.duckdb"
    run_id = imported_qa_db(db, 2)  # an import stores ROUGE and token F1 at once
    assert main(["score", "--run", run_id, "--metrics", "rouge", "f1", "ppl", "--db", str(db)]) == 0
    said = capsys.readouterr().out.strip()
    assert said.startswith(f"{run_id}: computed no value; rouge, f1 already stored; ppl skipped: the run is imported")
    from fwsapp.quality.scoring import computed_values

    assert computed_values({"simcse": 4, "rouge": 0, "ppl": None, "f1": 0}) == "computed 4 simcse values; rouge, f1 " \
                                                                              "already stored"
