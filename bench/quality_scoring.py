"""Scoring cost: all offline quality metrics on 200 samples (400 outputs: watermarked and unwatermarked).

Run: .venv/bin/python -m bench.quality_scoring [--samples 200]
Uses the paper's meditron QA generations from ../shared/data/paper (a benchmark may read them).
Reports seconds per metric, and the cost of a second, cached pass as a ratio of the first.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fwsapp.importer import LogFile, import_logs  # noqa: E402
from fwsapp.metrics.quality import OFFLINE_METRICS, QualityResources, score_run  # noqa: E402
from fwsapp.models import load_model  # noqa: E402
from fwsapp.store import Store  # noqa: E402

GENERATIONS = ROOT.parent / "shared" / "data" / "paper" / "KGW-g0.5-d2-meditron-HQA2.generations.json"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    records = json.loads(GENERATIONS.read_text())[: args.samples]
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "bench.duckdb")
        started = time.perf_counter()
        run_id = import_logs(store, method="KGW", model="meditron", task_name="qa",
                             generations=LogFile("g.json", json.dumps(records).encode()))
        print(f"import (includes ROUGE and F1): {time.perf_counter() - started:.1f} s")
        store.cursor().execute("DELETE FROM metrics")  # time the text metrics inside score_run too
        lm = load_model()
        resources = QualityResources(model_loader=lambda name: lm)
        total = 0.0
        for metric in OFFLINE_METRICS:
            started = time.perf_counter()
            count = score_run(store, run_id, resources, (metric,))[metric]
            seconds = time.perf_counter() - started
            total += seconds
            print(f"{metric:>10}: {seconds:6.1f} s for {count} values")
        started = time.perf_counter()
        score_run(store, run_id, resources)
        cached = time.perf_counter() - started
        print(f"all offline metrics, {args.samples} samples ({2 * args.samples} outputs): {total:.1f} s")
        print(f"second pass (everything cached): {cached:.2f} s = {cached / total:.3f} of the first")


if __name__ == "__main__":
    main()
