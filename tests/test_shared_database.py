"""The app and `python -m fwsapp` on one database file at once: each process holds the file only while it uses it."""
import subprocess
import sys
import time

from streamlit.testing.v1 import AppTest

from fwsapp.store import Store
from tests.conftest import PROJECT, shown

APP = str(PROJECT / "app.py")


def home_runs(app: AppTest) -> int:
    return int(next(metric.value for metric in app.metric if metric.label == "Runs"))


def stored_progress(app: AppTest) -> list[str]:
    bars = [shown(element.proto.text) for element in app.sidebar.get("progress")]
    return [text for text in bars if "another process" in text]


def test_the_app_watches_a_cli_generate_on_its_database_and_nothing_is_lost(app_db):
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert not app.exception and home_runs(app) == 0

    command = [sys.executable, "-m", "fwsapp", "generate", "--task", "qa", "--method", "KGW", "--n", "4",
               "--max-new-tokens", "12", "--batch-size", "1", "--seed", "21", "--db", str(app_db)]
    process = subprocess.Popen(command, cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    progress, deadline = set(), time.time() + 300
    while process.poll() is None and time.time() < deadline:
        app.run()  # the page, drawn again while the command writes: the app and the CLI take turns on the file
        assert not app.exception
        progress.update(stored_progress(app))
        time.sleep(0.5)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    run_id = out.strip().splitlines()[-1]

    assert any(f"({run_id}), written by another process" in line and "of 4 samples stored" in line for line in progress)
    app.run()
    assert home_runs(app) == 1  # the new run counted, with no restart
    assert not stored_progress(app)  # and, finished, no longer shown as under way
    store = Store(app_db)
    assert store.count("generations", run_id) == 4 and store.count("detections", run_id) == 8
    assert store.run(run_id)["status"] == "done"


def test_report_runs_while_the_app_holds_the_database(app_db):
    store = Store(app_db)
    store.ensure_run("r1", {"x": 1}, model="m", task="qa", method="KGW", params={}, seed=1, n=1)
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert home_runs(app) == 1
    for command in (["runs"], ["report", "--format", "json"]):
        result = subprocess.run([sys.executable, "-m", "fwsapp", *command, "--db", str(app_db)], cwd=PROJECT,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        app.run()
        assert not app.exception
