"""The demo spec (experiments/demo.toml: 6 runs, 12 units) in this process against a two-node Ray cluster on this
machine (`ray.cluster_utils.Cluster`: two worker nodes of one CPU each), in one run, as a ratio; and units per second.

Run: .venv/bin/python -m bench.grid [--spec experiments/demo.toml]

Both sides generate the spec's runs on an empty database and include their model loads (the local side loads once;
each Ray worker loads its own copy). The spec's score and analyze steps run on the driver either way: not timed.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from functools import lru_cache
from pathlib import Path

from bench.common import ROOT
from fwsapp.generation.generate import InProcess
from fwsapp.orchestration import pipeline
from fwsapp.orchestration.grid import load_spec
from fwsapp.models import load_model
from fwsapp.store import Store


def timed_generation(spec, executor, folder: Path, name: str) -> tuple[float, int]:
    """(seconds, units) to generate the spec's runs on an empty database."""
    store = Store(folder / f"{name}.duckdb")
    units = sum(-(-run.n // run.batch_size) for run in spec.runs)
    started = time.perf_counter()
    pipeline.generate(store, spec.runs, lru_cache(maxsize=None)(load_model), executor=executor)
    seconds = time.perf_counter() - started
    store.close()
    return seconds, units


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", default=str(ROOT / "experiments" / "demo.toml"))
    arguments = parser.parse_args()
    spec = load_spec(arguments.spec)
    folder = Path(tempfile.mkdtemp(prefix="bench-grid-"))

    local = InProcess(lru_cache(maxsize=None)(load_model))
    local_seconds, units = timed_generation(spec, local, folder, "local")

    import ray
    from ray.cluster_utils import Cluster

    from fwsapp.orchestration.distributed import RayExecutor

    started = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    executor = RayExecutor(cluster.address)
    cluster_start = time.perf_counter() - started
    ray_seconds, _ = timed_generation(spec, executor, folder, "ray")
    ray.shutdown()
    cluster.shutdown()
    print("| spec | units | in-process (s) | Ray, 2 nodes × 1 CPU (s) | ratio Ray / in-process | units/s in-process | units/s Ray |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(f"| {Path(arguments.spec).name} | {units} | {local_seconds:.1f} | {ray_seconds:.1f} | "
          f"{ray_seconds / local_seconds:.2f} | {units / local_seconds:.3f} | {units / ray_seconds:.3f} |")
    print(f"Cluster start (not in the Ray time): {cluster_start:.1f} s")


if __name__ == "__main__":
    main()
