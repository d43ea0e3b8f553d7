"""Scoring cost: all offline quality metrics on 200 samples (400 outputs: watermarked and unwatermarked).

Run: .venv/bin/python -m bench.quality_scoring [--samples 200]
Uses the paper's meditron QA generations from ../shared/data/paper (a benchmark may read them).
Reports seconds per metric, and the cost of a second, cached pass as a ratio of the first.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import paper_qa_run
from fwsapp.quality.scoring import QualityResources, score_run
from fwsapp.quality.registry import default_metrics
from fwsapp.models import load_model
from fwsapp.store import Store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--metrics", nargs="+", default=list(default_metrics()))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "bench.duckdb")
        started = time.perf_counter()
        run_id = paper_qa_run(store, args.samples)
        print(f"import (includes ROUGE and F1): {time.perf_counter() - started:.1f} s")
        store.row("DELETE FROM metrics")  # time the text metrics inside score_run too
        lm = load_model()
        resources = QualityResources(model_loader=lambda name: lm)
        total = 0.0
        for metric in args.metrics:
            started = time.perf_counter()
            count = score_run(store, run_id, resources, (metric,))[metric]
            seconds = time.perf_counter() - started
            total += seconds
            print(f"{metric:>10}: {seconds:6.1f} s for {count} values")
        started = time.perf_counter()
        score_run(store, run_id, resources, tuple(args.metrics))
        cached = time.perf_counter() - started
        print(f"{', '.join(args.metrics)}, {args.samples} samples ({2 * args.samples} outputs): {total:.1f} s")
        print(f"second pass (everything cached): {cached:.2f} s = {cached / total:.3f} of the first")


if __name__ == "__main__":
    main()
