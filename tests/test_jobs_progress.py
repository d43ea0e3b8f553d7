"""Issue 37: no silent waits. A job says what it is doing (converting or loading a model, the batch), how long it has
run, and how long it has left at its own measured rate."""
import threading
import time

from fwsapp.orchestration.jobs import Job, JobManager, duration


def test_the_estimate_is_the_jobs_own_rate_from_its_first_finished_unit(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    job = Job(kind="generate", key="k", label="KGW")
    job.advance(0, 10, "loading")
    clock[0] = 160.0  # a minute of model loading: not part of the rate
    assert job.remaining() is None and "estimating after the first batch" in job.timing()
    job.advance(2, 10)
    clock[0] = 170.0
    job.advance(4, 10)  # 2 units in 10 s
    assert job.remaining() == 30.0  # 6 units left
    assert job.timing() == "1 min 10 s elapsed, about 30 s left"
    assert duration(3 * 3600 + 125) == "3 h 2 min"


def test_a_scoring_job_says_what_it_does_before_its_work_is_counted(tmp_path):
    """The Quality page's scoring job read "starting, 0 of 0 sample × metric values" for its first ~15 s, while it
    found what each run lacked and loaded the taggers: as if there were nothing to do. It names the phase, no count."""
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store
    from fwsapp.ui.widgets import progress_line
    from tests.conftest import imported_qa_db

    run_id = imported_qa_db(tmp_path / "plan.duckdb", 2)
    store = Store(tmp_path / "plan.duckdb")
    job = Job(kind="score", key="k", label="Scoring 1 run")
    lines = []

    def progress(done, total, note=""):
        job.advance(done, total, note)
        lines.append(progress_line(job, "sample × metric values"))

    pipeline.score(store, [run_id], None, progress, metrics=("rouge", "f1", "factuality"))
    store.close()
    assert lines[0].startswith("Scoring 1 run: running · finding the values each run lacks · "), lines
    assert lines[1].startswith("Scoring 1 run: running · loading what the metrics need · "), lines
    assert not any("0 of 0" in line for line in lines)
    assert lines[-1].startswith("Scoring 1 run: running, 2 of 2 sample × metric values · "), lines  # the import's are stored


def test_a_jobs_model_load_is_its_phase_until_the_work_reports(store, monkeypatch):
    from fwsapp import models

    monkeypatch.setattr(models, "embedded_is_converted", lambda cache_dir=None: False)
    loading = threading.Event()
    release = threading.Event()

    def slow_loader(name):
        loading.set()
        release.wait(10)
        return object()

    manager = JobManager(store, slow_loader)

    def work(progress, cancel):
        progress(0, 4)
        manager.model_loader(models.EMBEDDED_MODEL)
        progress(1, 4, "batch 1 of 4")
        return "done"

    job = manager.start("generate", "key", "a run", work)
    assert loading.wait(10)
    assert job.note.startswith("converting the embedded model") and job in manager.running()
    release.set()
    while not job.finished:
        time.sleep(0.05)
    assert job.message == "done" and job.note == "batch 1 of 4" and manager.running() == []


def test_every_page_shows_a_running_job_with_its_phase_and_time(app_db):
    """A page that waits for a job (Entities while the analysis runs, Home's 'not analysed yet') shows it in the
    sidebar: what, how far, the phase, the time. A label's names (a model's, a spec's) are text, not Markdown."""
    from streamlit.testing.v1 import AppTest

    from fwsapp.ui import resources
    from tests.conftest import PROJECT, shown

    app = AppTest.from_file(str(PROJECT / "app.py"), default_timeout=60)
    app.run()
    release = threading.Event()

    def work(progress, cancel):
        progress(2, 8, "batch 2 of 8")
        release.wait(30)
        return "done"

    manager = resources.jobs()
    job = manager.start("analyze", "sidebar-test", "Analysing 3 runs of **m**", work)
    try:
        while job.done != 2:
            time.sleep(0.05)
        app.switch_page("pages/entropy.py").run()
        bars = [bar.proto.text for bar in app.sidebar.get("progress")]
        assert not any("**m**" in bar for bar in bars), bars
        assert any(shown(bar).startswith("Analysing 3 runs of **m**: running, 2 of 8 · batch 2 of 8 · ")
                   and "elapsed" in bar for bar in bars), bars
    finally:
        release.set()
    while not job.finished:
        time.sleep(0.05)
    assert job not in manager.running()


def test_a_run_cannot_be_deleted_under_its_job_and_a_late_error_leaves_no_run_running(store, lm):
    """Issue 38: a run deleted while its generation ran got 3 more batches that no run owned; run rows created
    before a late error (a model that cannot be loaded) stayed 'running' with 0 samples."""
    import pytest

    from fwsapp.generation.generate import InProcess, generate_runs, run_generation
    from fwsapp.generation.run_config import RunConfig

    config = RunConfig(task="qa", method="KGW", n=4, batch_size=1, max_new_tokens=4)
    manager = JobManager(store, lambda name: lm)
    gate = threading.Event()

    def slow(name):
        gate.wait(30)
        return lm

    manager._load = slow
    job = manager.start_generation(config)
    assert manager.generating(config.run_id()) is job  # the Report page refuses to delete it meanwhile
    while not store.has_run(config.run_id()):
        time.sleep(0.05)
    store.delete_run(config.run_id())  # as another process could
    gate.set()
    while not job.finished:
        time.sleep(0.05)
    assert job.status == "failed" and "was deleted while this job ran" in job.message
    assert store.row("SELECT count(*) FROM generations")[0] == 0  # no row without its run
    assert manager.generating(config.run_id()) is None

    def unloadable(name):
        raise OSError("the model folder holds no weights")

    other = RunConfig(task="qa", method="KGW", n=2, max_new_tokens=4, seed=3)
    with pytest.raises(OSError):
        generate_runs(store, [other], InProcess(unloadable))
    run = store.run(other.run_id())
    assert run["status"] == "failed" and run["status_reason"] == "the model folder holds no weights"
    assert run_generation(other, store, lm) == other.run_id() and store.run(other.run_id())["status"] == "done"
