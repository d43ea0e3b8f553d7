import json
import os
import subprocess
import sys

import duckdb
import pytest

from fwsapp.store import SCHEMA_VERSION, Store, StoreError
from fwsapp.store.database_file import DatabaseFile
from tests.conftest import PROJECT, database_at_schema


def make_run(store, run_id="r1"):
    store.ensure_run(run_id, {"x": 1}, model="m", task="qa", method="KGW", params={"delta": 2.0}, seed=1, n=2)


def test_round_trip(store):
    make_run(store)
    generation = {
        "sample_idx": 0, "prompt": "Q?", "reference": "A.", "unwatermarked_text": "u", "watermarked_text": "w",
        "unwatermarked_ids": [1, 2], "watermarked_ids": [3, 4, 5], "unwatermarked_entropy": [0.5, 1.5],
        "watermarked_entropy": [0.1, 0.2, 0.3], "unwatermarked_seconds": 0.1, "watermarked_seconds": 0.2,
    }
    detection = {"sample_idx": 0, "text_kind": "watermarked", "detector": "KGW", "score": 4.2, "z": 4.2,
                 "p": None, "num_tokens_scored": 3}
    store.write_batch("r1", [generation], [detection])
    rows = store.generations("r1")
    assert rows.watermarked_ids[0].tolist() == [3, 4, 5]
    assert rows.unwatermarked_entropy[0].tolist() == pytest.approx([0.5, 1.5])
    scores = store.detections(["r1"])
    assert scores.score.tolist() == [4.2] and scores.method.tolist() == ["KGW"]
    run = store.run("r1")
    assert run["params"] == {"delta": 2.0} and run["status"] == "running"
    # Writing the same batch again replaces it: no duplicates.
    store.write_batch("r1", [generation], [detection])
    assert store.count("generations", "r1") == 1 and store.count("detections", "r1") == 1


def test_a_failed_batch_writes_nothing(store):
    make_run(store)
    good = {"sample_idx": 0, "prompt": "Q?"}
    bad = {"sample_idx": 1, "prompt": None}  # NOT NULL violation inside the same transaction
    with pytest.raises(duckdb.Error):
        store.write_batch("r1", [good, bad], [])
    assert store.count("generations", "r1") == 0


def test_schema_version_is_recorded_and_reopened(tmp_path):
    path = tmp_path / "v.duckdb"
    Store(path).close()
    reopened = Store(path)
    assert reopened.schema_version() == SCHEMA_VERSION
    reopened.row("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    reopened.close()
    with pytest.raises(StoreError, match="newer than this app"):
        Store(path)


def test_a_second_process_works_on_the_file_between_this_ones_transactions(store):
    make_run(store)
    result = subprocess.run(
        [sys.executable, "-m", "fwsapp", "runs", "--db", str(store.path), "--format", "json"],
        cwd=PROJECT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert [run["run_id"] for run in json.loads(result.stdout)] == ["r1"]
    assert store.has_run("r1")  # and this one opens it again after


def test_a_process_that_keeps_the_file_past_the_wait_is_named(store):
    make_run(store)
    with store.cursor():  # held for the whole command
        result = subprocess.run(
            [sys.executable, "-m", "fwsapp", "runs", "--db", str(store.path)],
            cwd=PROJECT, capture_output=True, text=True, timeout=120, env={**os.environ, "FWSAPP_DB_WAIT_SECONDS": "1"},
        )
    assert result.returncode == 2
    assert f"in use by another process (PID {os.getpid()}) for more than 1 s" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_file_left_idle_is_closed_before_the_interpreter_ends_not_by_its_timer_during_teardown(store):
    """Two attacks under load printed their result, then aborted at exit (rc -6): the idle timer's daemon thread
    closed the connection while Python tore down (issue 48, item 17)."""
    from fwsapp.store import database_file

    make_run(store)
    held = database_file.DatabaseFile.of(store.path, read_only=False)
    assert held._closer is not None and held._connection is not None  # lingering after the last query
    database_file._close_files_at_exit()  # what atexit runs
    assert held._closer is None and held._connection is None


def test_unknown_run_is_a_clear_error(store):
    with pytest.raises(StoreError, match="No run 'nope'"):
        store.run("nope")


def test_revision_counts_write_transactions_even_when_row_counts_stay(store):
    make_run(store)
    metric = {"sample_idx": 0, "text_kind": "watermarked", "metric": "simcse", "config": "c", "value": 0.5}
    store.write_rows("metrics", "r1", [metric])
    before = store.revision()
    store.write_rows("metrics", "r1", [{**metric, "value": 0.9}])  # INSERT OR REPLACE: same row count
    assert store.revision() != before
    after = store.revision()
    make_run(store)  # the run exists: nothing written, nothing to invalidate
    store.write_rows("metrics", "r1", [])
    store.set_status("r1", "running")
    assert store.revision() == after
    failed_rows = [{"sample_idx": 1, "prompt": None}]
    with pytest.raises(duckdb.Error):
        store.write_batch("r1", failed_rows, [])
    assert store.revision() == after  # a rolled-back transaction counts for nothing


def test_old_entity_token_counts_migrate_to_named_columns(tmp_path):
    path = tmp_path / "old.duckdb"
    connection = database_at_schema(path, 5)
    connection.execute("INSERT INTO entity_analyses VALUES ('r', 0, 'c', [40, 31, NULL])")
    connection.close()
    row = Store(path).row(
        "SELECT reference_tokens, unwatermarked_tokens, watermarked_tokens FROM entity_analyses")
    assert row == (40, 31, None)


def test_the_writes_between_two_revisions_tell_this_threads_own_from_the_others(store):
    """What the app's watcher asks: were the writes since the page's revision the page's own (its thread's)?"""
    import threading

    make_run(store)
    metric = {"sample_idx": 0, "text_kind": "watermarked", "metric": "simcse", "config": "c", "value": 0.5}
    start, own = store.revision(), store.writes_by_this_thread()
    store.write_rows("metrics", "r1", [metric])
    assert store.writes_between(start, store.revision()) == store.writes_by_this_thread() - own == 1
    other = threading.Thread(target=store.write_rows, args=("metrics", "r1", [{**metric, "value": 0.7}]))
    other.start()
    other.join()
    assert store.writes_between(start, store.revision()) == 2 and store.writes_by_this_thread() - own == 1
    with pytest.raises(duckdb.Error):
        store.write_batch("r1", [{"sample_idx": 1, "prompt": None}], [])
    assert store.writes_by_this_thread() - own == 1  # a rolled-back transaction is no write


def test_the_unwatermarked_self_similarity_is_dropped_and_measured_metrics_stay(tmp_path):
    path = tmp_path / "old.duckdb"
    connection = database_at_schema(path, 6)
    for kind, metric, value in (("unwatermarked", "simcse", 1.0), ("watermarked", "simcse", 0.8),
                                ("unwatermarked", "rougeL", 0.3)):
        connection.execute("INSERT INTO metrics VALUES ('r', 0, ?, ?, 'c', ?)", [kind, metric, value])
    connection.close()
    rows = Store(path).rows("SELECT text_kind, metric, value FROM metrics ORDER BY metric, text_kind")
    assert rows == [("unwatermarked", "rougeL", 0.3), ("watermarked", "simcse", 0.8)]


def test_a_migration_that_fails_leaves_the_file_whole_at_its_old_version(tmp_path, monkeypatch):
    """All pending steps run in one transaction: a step that fails undoes the steps before it in that run."""
    from fwsapp.store import core

    path = tmp_path / "old.duckdb"
    connection = database_at_schema(path, 5)
    connection.execute("INSERT INTO entity_analyses VALUES ('r', 0, 'c', [40, 31, NULL])")
    connection.close()
    monkeypatch.setattr(core, "MIGRATIONS", [*core.MIGRATIONS[:-1], "SELECT * FROM no_such_table"])
    with pytest.raises(StoreError, match="cannot be opened"):
        Store(path)
    DatabaseFile.of(path, False).close()
    connection = duckdb.connect(str(path))
    assert connection.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("5",)
    assert connection.execute("SELECT * FROM entity_analyses").fetchall() == [("r", 0, "c", [40, 31, None])]
    assert not connection.execute("SELECT 1 FROM information_schema.tables WHERE table_name = 'facts'").fetchall()
    connection.close()
    monkeypatch.undo()
    assert Store(path).row("SELECT reference_tokens FROM entity_analyses") == (40,)  # and the real steps still apply


def test_two_threads_writing_at_once_both_finish(store):
    """Issue 38: two jobs in the app at once (Generate + Generate) failed one in 3 of 6 trials with
    'TransactionException: Conflict on update!' on the revision row every write bumps."""
    import threading

    from fwsapp.orchestration.importer import LogFile, import_logs

    rows = [{"prompt": "Q?", "natural_text": "r", "unwatermarked_text": "u", "watermarked_text": "w"}]
    run_id = import_logs(store, method="KGW", model="m", task_name="qa",
                         generations=LogFile("g.json", json.dumps(rows).encode()))
    start, failures = store.revision(), []

    def writer(kind: str) -> None:
        try:
            for index in range(40):
                store.write_rows("metrics", run_id, [{"sample_idx": 0, "text_kind": kind, "metric": f"m{index}",
                                                      "config": "c", "value": float(index)}])
        except Exception as error:  # what the job would have died of
            failures.append(error)

    threads = [threading.Thread(target=writer, args=(kind,)) for kind in ("watermarked", "unwatermarked")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [] and store.metrics([run_id]).metric.str.fullmatch(r"m\d+").sum() == 80
    assert int(store.revision().rsplit("|", 1)[1]) == int(start.rsplit("|", 1)[1]) + 80  # one bump per write
