"""Shared fixtures: one model load per test session, small runs on the embedded model."""
from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parent.parent
SHARED_DATA = PROJECT.parent / "shared" / "data"
CHROMIUM = Path("/usr/bin/chromium")


# Test tiers. What a test needs beyond Python marks it: `model` (a language model loaded here or by a process it
# starts), `browser` (Chromium, or a served app), `ray` (a Ray cluster); each of these is also `slow`, as are the modules
# that start processes. `-m "not slow"` is the model-free tier.
MARKS_BY_FIXTURE = {"lm": "model", "qa_run": "model", "shape_folders": "model", "browser_page": "browser",
                    "chromium": "browser", "streamlit_server": "browser", "cluster": "ray", "token_cluster": "ray"}
MARKS_BY_MODULE = {"test_browser": "browser", "test_paper_shapes": "model", "test_ray_auth": "ray",
                   "test_shared_database": "model"}
SLOW_MODULES = {"test_grid", "test_shared_database"}
TIERS = ("model", "browser", "ray")
COLLECTED = pytest.StashKey[set]()


def pytest_configure(config):
    """With FWSAPP_TOY_PLUGINS=1, the five toy plug-ins are registered for the session, before any test module builds
    its parameters from a registry (tests/test_plugins.py collects the suite so and counts their cases)."""
    if os.environ.get("FWSAPP_TOY_PLUGINS") == "1":
        from tests.toy_plugins import all_registered

        config._toy_plugins = all_registered()
        config._toy_plugins.__enter__()


# Before pytest-xdist's own collection hook (`--dist loadgroup`), which reads the groups set here to choose each test's
# worker.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # Every test collected, before `-m` or `-k` deselects any: a session run on the whole suite knows it in full
    # (tests/test_plugins.py compares it with a collection that has the toy plug-ins).
    config.stash[COLLECTED] = {item.nodeid for item in items}
    for item in items:
        module = item.module.__name__.split(".")[-1]
        marks = {MARKS_BY_FIXTURE[name] for name in getattr(item, "fixturenames", ()) if name in MARKS_BY_FIXTURE}
        marks |= {MARKS_BY_MODULE[module]} if module in MARKS_BY_MODULE else set()
        for mark in marks:
            item.add_marker(getattr(pytest.mark, mark))
        if marks or module in SLOW_MODULES or any(item.get_closest_marker(tier) for tier in TIERS):
            item.add_marker(pytest.mark.slow)
            # The slow tier runs on two workers (`--dist loadgroup`, the Makefile). Every Ray test is in one group, so on
            # one worker: two Ray clusters started at once on one machine collide. The rest go to whichever worker is
            # free (but a module whose tests share a costly fixture, which names its own group: tests/test_paired.py),
            # each loading the model it needs once: that was quicker (slow tier 773 s) than keeping every test
            # that loads a model here on one worker and the browsers and processes on the other (846 s), whose first
            # worker had 830 s of work to the other's 635.
            if item.get_closest_marker("ray"):
                item.add_marker(pytest.mark.xdist_group("ray"))



def pytest_collection_finish(session):
    """Every test module is imported by now, and with them torch, transformers, spaCy and pandas: about 540,000 objects
    that live as long as the process. A full garbage collection scans every one (0.2 s here), and a worker of the slow
    tier ran one every 4-5 s (6 s of 90 s of tests). Frozen, they are left out of every collection (`gc.freeze`, as
    servers that fork do), and a full collection waits for 100 younger ones instead of 10: 2.6 s of the same 90 s."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*gc.get_threshold()[:2], 100)

@pytest.fixture(scope="session")
def lm():
    from fwsapp.models import load_model

    return load_model()


@pytest.fixture
def store(tmp_path):
    from fwsapp.store import Store

    db = Store(tmp_path / "test.duckdb")
    yield db
    db.close()


@pytest.fixture
def app_db(tmp_path, monkeypatch):
    """The database the app under test opens (FWSAPP_DB), empty until a test fills it."""
    monkeypatch.setenv("FWSAPP_DB", str(tmp_path / "app.duckdb"))
    return tmp_path / "app.duckdb"


@pytest.fixture(scope="session")
def qa_run(lm, tmp_path_factory):
    """The done-when run: 4 qa demo samples, KGW δ=2, 64 new tokens; shared by tests that only read it."""
    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.store import Store

    db = Store(tmp_path_factory.mktemp("qa") / "run.duckdb")
    config = RunConfig(task="qa", method="KGW", n=4, max_new_tokens=64, batch_size=4, seed=42)
    run_id = run_generation(config, db, lm)
    return db, config, run_id


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def start_streamlit(tmp_path, db, **environment):
    """The app as `make run` serves it (`python -m fwsapp.ui.serve`, which runs `streamlit run app.py`) on a free loopback
    port, with its own database and these extra environment variables."""
    port = free_port()
    env = {**os.environ, "FWSAPP_DB": str(db), "PYTHONPATH": str(PROJECT), **environment}
    log = open(tmp_path / "streamlit.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "fwsapp.ui.serve", "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1",
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.5)
    try:
        yield url
    except BaseException:  # the app's side of a failure, shown with the test's
        log.flush()
        print(f"The app's log ({log.name}), its end:\n" + Path(log.name).read_text(errors="replace")[-4000:])
        raise
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture
def streamlit_server(tmp_path):
    with start_streamlit(tmp_path, tmp_path / "browser.duckdb") as url:
        yield url


@pytest.fixture
def chromium():
    """Debian's Chromium under Playwright, headless: a browser to open pages or separate contexts in."""
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (make test installs it with apt when it can)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )
        yield browser
        browser.close()


@pytest.fixture
def browser_page(chromium):
    return chromium.new_page(viewport={"width": 1400, "height": 1600})


def shown(text: str) -> str:
    """Text as the browser shows it: inert rendering decoded (character references, word joiners)."""
    import html

    return html.unescape(text).replace("\u2060", "").replace("<span></span>", "")


def import_example_summaries(store, example: str = "meditron", kinds=("generations", "detection", "judged"),
                             **identity) -> str:
    """One shipped example run (the paper's KGW summaries of `example`'s model, data/examples) imported with the
    given logs; `identity` overrides the import's model name or judge (`import_logs`'s arguments). Returns its run id."""
    from fwsapp.orchestration.importer import LogFile, import_logs

    folder = PROJECT / "data" / "examples" / f"paper-{example}"
    return import_logs(store, **{"method": "KGW", "model": example, "task_name": "summarization", **identity},
                       **{kind: LogFile.from_path(folder / f"KGW-g0.5-d2-{example}-MEQS.{kind}.json") for kind in kinds})


def copy_store(store, target):
    """A checkpointed copy of a Store's file at target, for a page to open."""
    import shutil

    store.row("CHECKPOINT")
    shutil.copy(store.path, target)


def imported_qa_db(path, n):
    """An imported meditron KGW qa run of n short samples ("What is condition i?") at path; returns the run id."""
    import json

    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store

    rows = [{"prompt": f"What is condition {i}?", "watermarked_text": f"It is w{i}.", "unwatermarked_text": f"It is u{i}.",
             "natural_text": f"Ref {i}."} for i in range(n)]
    store = Store(path)
    run_id = import_logs(store, method="KGW", model="meditron", task_name="qa",
                         generations=LogFile("g.json", json.dumps(rows).encode()))
    store.close()
    return run_id


def served_run_db(path, texts=None, tokenizer=None) -> str:
    """A run a serving engine answered ("served-run", vLLM-Gumbel through a server at a closed port) over the samples
    of an imported qa run; `texts` replace both answers, their ids `tokenizer`'s. No entropies: a server records none."""
    from fwsapp.store import Store

    imported = imported_qa_db(path, len(texts) if texts else 2)
    store = Store(path)
    store.ensure_run("served-run", {"server": "http://127.0.0.1:9/v1"}, model="served-7b", task="qa",
                     method="vLLM-Gumbel", params={}, seed=1, n=len(texts) if texts else 2)
    rows = store.generation_rows(imported, list(range(len(texts) if texts else 2)))
    for index, row in enumerate(rows):
        row["run_id"] = "served-run"
        for kind in ("watermarked", "unwatermarked"):
            if texts:
                row[f"{kind}_text"], row[f"{kind}_ids"] = texts[index], tokenizer(texts[index])["input_ids"]
            row[f"{kind}_entropy"] = []
    store.write_batch("served-run", rows, [])
    store.set_status("served-run", "done")
    store.close()
    return "served-run"


def database_at_schema(path, version):
    """An empty DuckDB file migrated only up to an old schema version, to test the migrations after it."""
    import duckdb

    from fwsapp.store import MIGRATIONS

    connection = duckdb.connect(str(path))
    connection.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    for migration in MIGRATIONS[:version]:
        connection.execute(migration)
    connection.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(version)])
    return connection


def written_cells(table):
    """A page table's cells as the browser shows them: the text its Styler wrote (`widgets.exported_table`), not the
    numbers behind them."""
    import pyarrow as pa

    return pa.ipc.open_stream(table.proto.arrow_data.styler.display_values).read_all().to_pandas()


def judged_rating_db(path, n=3):
    """An imported qa run with judge verdicts and every sample up for human rating; returns the run id."""
    import json

    from fwsapp.human.ratings import sample_items
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store

    rows = [{"prompt": f"Is condition {i} serious?", "watermarked_text": f"Watermarked answer {i} <b>bold</b>.",
             "unwatermarked_text": f"Plain answer {i}.", "natural_text": f"Reference answer {i}."} for i in range(n)]
    scores_w = [[4, 2, 3], [2, 2, 2], [3, 3, 4], [5, 4, 4]][:n]
    scores_u = [[5, 5, 5], [3, 3, 3], [4, 4, 4], [5, 5, 4]][:n]
    judged = [{"sample_id": str(i), "prompt": rows[i]["prompt"], "w_output": rows[i]["watermarked_text"],
               "uw_output": rows[i]["unwatermarked_text"], "judge_output": "[[A]]: [1, 1, 1]\n[[B]]: [1, 1, 1]",
               "randomized": "False", "judge_choice": "Watermarked", "scores_W": scores_w[i], "scores_U": scores_u[i]}
              for i in range(n)]
    store = Store(path)
    run_id = import_logs(store, method="KGW", model="meditron", task_name="qa",
                         generations=LogFile("g.json", json.dumps(rows).encode()),
                         judged=LogFile("j.json", json.dumps(judged).encode()))
    sample_items(store, run_id, fraction=1.0)
    store.close()
    return run_id


def add_verdicts(path, run_id: str, judge_model: str, samples, watermarked, unwatermarked) -> None:
    """Parsed verdicts of another judge on some of a run's samples: the same scores for every sample."""
    from fwsapp.store import Store, insert_rows

    store = Store(path)
    with store.transaction() as cursor:
        insert_rows(cursor, "judgments", run_id, [
            {"sample_idx": i, "judge_model": judge_model, "prompt_version": "v", "watermarked_first": True,
             "texts_hash": str(i), "status": "ok", "raw_output": "", "reason": None,
             "scores_watermarked": list(watermarked), "scores_unwatermarked": list(unwatermarked)} for i in samples])
    store.close()


HOSTILE = ('Diabetes mellitus <script>window.__pwned = 1</script> and gout '
           '<img src=x onerror="window.__pwned = 2"> with **asthma**. ![pixel](http://evil.example/pixel.png) '
           '[click](http://evil.example/link) :red[alarm] $x^2$')


def hostile_entity_db(path):
    """An imported run whose texts and judge log carry HTML, script and Markdown, analysed for disease entities."""
    import json

    from fwsapp.models.encoder import load_encoder
    from fwsapp.entities.introduced import analyze_run
    from fwsapp.entities.recognizers import load_recognizer
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store

    rows = [{"prompt": "What is <b>gout</b>? ![p](http://evil.example/prompt.png)",
             "natural_text": "Gout and diabetes mellitus are common.",
             "unwatermarked_text": "Gout is common; diabetes mellitus too.", "watermarked_text": HOSTILE}]
    judged = [{"sample_id": "0", "w_output": HOSTILE, "uw_output": rows[0]["unwatermarked_text"], "randomized": "False",
               "judge_output": f"[[A]]: [3, 3, 3] {HOSTILE}\n[[B]]: [4, 4, 4]"}]
    store = Store(path)
    run_id = import_logs(store, method="KGW", model="m", task_name="qa",
                         generations=LogFile("g.json", json.dumps(rows).encode()),
                         judged=LogFile("j.json", json.dumps(judged).encode()))
    analyze_run(store, run_id, load_recognizer("mesh"), load_encoder())  # a fixed lexicon: known entities
    store.close()
    return run_id


def tiny_spec(steps: str = "", grid: str = "", method: str = "", n: int = 1) -> str:
    """A spec of KGW on QA with the embedded model, n samples of 4 tokens, with extra lines for [grid] (after its
    keys), [[method]] and [steps]."""
    return (f'[grid]\nmodels = ["smollm2-135m-instruct"]\ntasks = ["qa"]\nn = {n}\nmax_new_tokens = 4\n{grid}\n\n'
            f'[[method]]\nname = "KGW"\n{method}\n\n[steps]\n{steps}\n')
