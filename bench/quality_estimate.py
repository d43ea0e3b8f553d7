"""How well the Quality and FWS pages' "about N min" holds: the estimate of the model-free metrics for the example
data, against the time `score` then takes for them, per metric and in all.

Run: .venv/bin/python -m bench.quality_estimate
The example data ships with the app (six runs of the paper's published logs). The pages promise the estimate within
2× of the time taken; run it on a quiet machine, and once beside a load to see how far contention moves it.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import bench.common  # noqa: F401 - puts the project on the path
from fwsapp.orchestration.examples import import_example_runs
from fwsapp.quality.registry import model_free_metrics
from fwsapp.quality.scoring import QualityResources, missing_work, score_run
from fwsapp.store import Store


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "bench.duckdb")
        run_ids = import_example_runs(store)
        resources = QualityResources(model_loader=None)
        rows, estimated_total, taken_total = [], 0.0, 0.0
        for metric in model_free_metrics():
            estimate = missing_work(store, run_ids, (metric,))
            started = time.perf_counter()
            for run_id in run_ids:
                score_run(store, run_id, resources, (metric,))
            taken = time.perf_counter() - started
            rows.append((metric, estimate.values, estimate.seconds, taken))
            estimated_total, taken_total = estimated_total + estimate.seconds, taken_total + taken
        print("| metric | values | estimated s | taken s | taken / estimated |\n|---|---|---|---|---|")
        for metric, values, estimated, taken in rows:
            ratio = f"{taken / estimated:.2f}" if values else "computed at import"
            print(f"| {metric} | {values:,} | {estimated:.1f} | {taken:.1f} | {ratio} |")
        print(f"| **all** | | **{estimated_total:.1f}** | **{taken_total:.1f}** | "
              f"**{taken_total / estimated_total:.2f}** |")
        store.close()


if __name__ == "__main__":
    main()
