"""Experiment specs: checked keys, dry runs, and the same texts in this process and on a Ray cluster, through faults.

The cluster is Ray's own one-machine test cluster (`ray.cluster_utils.Cluster`): a head with no CPUs for work and
two worker nodes of one CPU each. `ray stop` is never run: it would end every Ray process on the machine.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from fwsapp.orchestration import pipeline
from fwsapp.cli import main
from fwsapp.generation.generate import InProcess
from fwsapp.orchestration.distributed import GenerationWorker, RayExecutor
from fwsapp.orchestration.grid import SpecError, load_spec, plan
from fwsapp.store import Store
from tests.conftest import PROJECT, tiny_spec

SPEC = """
[grid]
models = ["smollm2-135m-instruct"]
tasks = ["qa"]
seeds = [7]
n = 4
max_new_tokens = 6
batch_size = 2

[[method]]
name = "KGW"
params = { delta = [1.0, 2.0] }

[[method]]
name = "SWEET"
"""
DIES_ONCE = Path(tempfile.gettempdir()) / "fwsapp-test-grid-worker-dies-once"


class DiesOnce(GenerationWorker):
    """A worker whose process dies in the middle of the first unit that finds the marker file."""

    def compute(self, work):
        try:
            DIES_ONCE.unlink()
        except FileNotFoundError:
            return super().compute(work)
        os._exit(1)


class FailsOnSweet(GenerationWorker):
    """A worker whose SWEET units raise: the unit fails for good, not the worker."""

    def compute(self, work):
        if work.config.method == "SWEET":
            raise RuntimeError("SWEET's entropy gate could not be computed")
        return super().compute(work)


class SlowToStart(GenerationWorker):
    """A worker whose process takes longer to start than the cluster may take to find room for it."""

    def __init__(self, *options):
        time.sleep(4)
        super().__init__(*options)


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spec") / "three.toml"
    path.write_text(SPEC)
    return path


@pytest.fixture(scope="module")
def local_texts(lm, spec_file, tmp_path_factory) -> pd.DataFrame:
    """The spec generated in this process by `grid`: the texts every other way of running it must give. A stray
    RAY_ADDRESS is set meanwhile (nothing listens there), which a grid run without --ray must not try to join."""
    db = tmp_path_factory.mktemp("local") / "local.duckdb"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_ADDRESS", "203.0.113.9:6379")
        patch.setattr("fwsapp.models.load_model", lambda name, **placement: lm)  # the session's model, loaded once
        assert main(["grid", str(spec_file), "--db", str(db)]) == 0
    store = Store(db, read_only=True)
    texts = all_texts(store)
    store.close()
    return texts


@pytest.fixture(scope="module")
def cluster():
    import ray
    from ray.cluster_utils import Cluster

    test_cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    nodes = [test_cluster.add_node(num_cpus=1) for _ in range(2)]
    test_cluster.wait_for_nodes()
    yield test_cluster, nodes
    ray.shutdown()
    test_cluster.shutdown()


def all_texts(store: Store) -> pd.DataFrame:
    frames = []
    for run_id in sorted(store.runs().run_id):
        texts = store.generations(run_id)[["sample_idx", "unwatermarked_text", "watermarked_text"]]
        scores = store.detections([run_id]).pivot(index="sample_idx", columns="text_kind", values="score")
        frames.append(texts.assign(run_id=run_id).merge(scores.reset_index(), on="sample_idx"))
    return pd.concat(frames, ignore_index=True).sort_values(["run_id", "sample_idx"], ignore_index=True)


def test_a_spec_expands_its_sweeps_and_names_a_bad_key(spec_file, tmp_path, capsys):
    spec = load_spec(spec_file)
    assert [(run.method, run.params.get("delta")) for run in spec.runs] == [("KGW", 1.0), ("KGW", 2.0), ("SWEET", None)]
    bad = tmp_path / "bad.toml"
    bad.write_text(SPEC.replace("batch_size", "batchsize"))
    with pytest.raises(SpecError, match=r"\[grid\] has no key 'batchsize'"):
        load_spec(bad)
    bad.write_text(SPEC.replace('params = { delta = [1.0, 2.0] }', 'params = { detla = 1.0 }'))
    assert main(["grid", str(bad), "--db", str(tmp_path / "x.duckdb")]) == 2
    assert "[[method]] 1 (KGW), qa: KGW has no parameter detla" in capsys.readouterr().err
    assert main(["grid", str(spec_file), "--dry-run", "--db", str(tmp_path / "x.duckdb")]) == 0
    assert "3 runs; 6 of 6 units to generate" in capsys.readouterr().out
    assert not (tmp_path / "x.duckdb").exists()  # a dry run does nothing


def test_the_shipped_specs_are_valid():
    demo = load_spec(PROJECT / "experiments" / "demo.toml")
    assert len(demo.runs) == 6 and demo.steps.names() == ["score", "analyze"]
    paper = PROJECT / "experiments" / "paper.toml"
    if not (PROJECT.parent / "shared" / "data" / "healthqa_qa.json").exists():
        pytest.skip("the paper's datasets are not beside the project")
    spec = load_spec(paper)
    assert len(spec.runs) == 36 and {run.n for run in spec.runs} == {200}
    assert spec.steps.names() == ["score", "analyze", "judge"]


def test_a_stray_ray_address_is_not_joined_without_ray(local_texts):
    """`local_texts` ran the grid under a stray RAY_ADDRESS: it ran here, every text of its 3 runs of 4 samples."""
    assert len(local_texts) == 12 and local_texts.run_id.nunique() == 3
    assert local_texts[["unwatermarked_text", "watermarked_text", "watermarked", "unwatermarked"]].notna().all().all()


def test_ray_gives_the_same_texts_and_a_rerun_dispatches_nothing(cluster, spec_file, local_texts, tmp_path):
    test_cluster, _ = cluster
    store = Store(tmp_path / "ray.duckdb")
    executor = RayExecutor(test_cluster.address)
    assert executor.count == 2
    outcome = pipeline.grid(store, load_spec(spec_file), None, executor=executor)
    assert outcome.failed == {}
    pd.testing.assert_frame_equal(all_texts(store), local_texts)
    assert plan(load_spec(spec_file), store)["units missing"].sum() == 0
    revision = store.revision()
    assert pipeline.grid(store, load_spec(spec_file), None, executor=executor).failed == {}
    assert store.revision() == revision  # a rerun of a complete spec writes nothing
    store.close()


def test_a_worker_killed_mid_unit_is_replaced_and_its_unit_retried(cluster, spec_file, local_texts, tmp_path):
    test_cluster, _ = cluster
    store = Store(tmp_path / "ray.duckdb")
    DIES_ONCE.touch()
    executor = RayExecutor(test_cluster.address, worker_class=DiesOnce)
    outcome = pipeline.grid(store, load_spec(spec_file), None, executor=executor)
    assert not DIES_ONCE.exists() and executor.retries >= 1 and outcome.failed == {}
    pd.testing.assert_frame_equal(all_texts(store), local_texts)
    store.close()


def test_a_unit_that_fails_for_good_fails_its_run_and_the_others_finish(cluster, spec_file, tmp_path):
    test_cluster, _ = cluster
    store = Store(tmp_path / "ray.duckdb")
    outcome = pipeline.grid(store, load_spec(spec_file), None,
                            executor=RayExecutor(test_cluster.address, worker_class=FailsOnSweet))
    runs = store.runs().set_index("method")
    assert list(outcome.failed) == [runs.loc["SWEET", "run_id"]]
    assert "SWEET's entropy gate could not be computed" in runs.loc["SWEET", "status_reason"]
    assert (runs.loc["KGW", "status"] == "done").all()
    store.close()


def test_a_worker_slow_to_start_is_waited_for_and_a_full_cluster_is_not(cluster, monkeypatch):
    """Room and start are two waits: workers placed but slow to start (a loaded node importing torch) are not taken for
    a cluster with no room, and when every CPU is held the next worker is refused after READY_SECONDS."""
    test_cluster, _ = cluster
    monkeypatch.setattr("fwsapp.orchestration.distributed.READY_SECONDS", 2)
    executor = RayExecutor(test_cluster.address, worker_class=SlowToStart)
    workers = executor._new_workers(3)  # one on each node's CPU, each 4 s to start; no room for a third
    try:
        assert len(workers) == 2
        assert executor._new_workers(1) == []
    finally:
        for worker in workers:
            executor._release(worker)
    assert executor.rooms == {}


def test_a_node_removed_mid_grid_leaves_the_grid_complete(cluster, spec_file, local_texts, tmp_path, monkeypatch):
    test_cluster, nodes = cluster
    store = Store(tmp_path / "ray.duckdb")
    executor = RayExecutor(test_cluster.address)
    removed = []

    def remove_a_node_after_the_first_unit(done, total, note=""):
        if done > 0 and not removed:
            removed.append(nodes[1])
            test_cluster.remove_node(nodes[1])
            # The node left has no room for a replacement: the grid goes on without one after this wait (not 30 s).
            monkeypatch.setattr("fwsapp.orchestration.distributed.READY_SECONDS", 3)

    outcome = pipeline.grid(store, load_spec(spec_file), None, progress=remove_a_node_after_the_first_unit,
                            executor=executor)
    assert removed and outcome.failed == {}
    pd.testing.assert_frame_equal(all_texts(store), local_texts)
    store.close()


def test_a_killed_driver_loses_nothing_and_the_rerun_generates_only_what_is_missing(lm, spec_file, local_texts, tmp_path):
    db = tmp_path / "killed.duckdb"
    driver = subprocess.Popen([sys.executable, "-m", "fwsapp", "grid", str(spec_file), "--db", str(db)],
                              cwd=PROJECT, stderr=subprocess.PIPE, text=True, bufsize=1)
    seen = ""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and " 4/12 " not in seen and "4/12 [" not in seen:
        seen += driver.stderr.read(1)  # the progress bar: 2 units (4 samples) written
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    store = Store(db)
    missing = plan(load_spec(spec_file), store)
    assert 0 < missing["units missing"].sum() < 6
    dispatched = []

    class Counting(InProcess):
        def run(self, works, *args):
            dispatched.extend(work.unit for work in works)
            return super().run(works, *args)

    pipeline.grid(store, load_spec(spec_file), None, executor=Counting(lambda name: lm))
    assert len(dispatched) == missing["units missing"].sum()
    pd.testing.assert_frame_equal(all_texts(store), local_texts)
    store.close()


def test_a_grid_whose_judge_reaches_no_server_fails_as_judge_does(tmp_path, capsys):
    """Issue 38: the grid printed 'done' and exited 0 where `judge` exits 1."""
    spec = tmp_path / "unreachable.toml"
    spec.write_text(tiny_spec(steps='judge = { backend = "compatible", base_url = "http://127.0.0.1:9/v1", model = "m", '
                                    'timeout = 0.5, max_attempts = 1 }'))
    assert main(["grid", str(spec), "--db", str(tmp_path / "g.duckdb")]) == 1
    err = capsys.readouterr().err
    assert "error: judge step: the judge could not be reached for any of the 1 pairs" in err


def test_a_grid_run_again_writes_nothing_and_keeps_the_revision(lm, tmp_path):
    """Issue 38: the same grid run three times left the data identical but bumped the revision each time, so the
    app's caches were dropped for nothing."""
    spec = tmp_path / "again.toml"
    spec.write_text(tiny_spec(steps='score = ["rouge", "f1"]\nanalyze = { recognizer = "mesh" }', n=2))
    store = Store(tmp_path / "again.duckdb")
    pipeline.grid(store, load_spec(spec), lambda name: lm)
    revision = store.revision()
    for _ in range(2):
        pipeline.grid(store, load_spec(spec), lambda name: lm)
        assert store.revision() == revision
    store.close()
