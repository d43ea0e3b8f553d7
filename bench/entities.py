"""Entity analysis cost: disease entities, introduced and hallucinated, for 200 samples × 3 texts
(reference, unwatermarked, watermarked) of the paper's meditron QA logs, on this CPU.

Run: .venv/bin/python -m bench.entities [--samples 200]
Reports the one-off load (recognizer, encoder), the analysis, and a second pass (all cached) as a
ratio of the first.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import paper_qa_run
from fwsapp.models.encoder import load_encoder
from fwsapp.entities.introduced import analyze_run
from fwsapp.entities.recognizers import load_recognizer
from fwsapp.store import Store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "bench.duckdb")
        run_id = paper_qa_run(store, args.samples)
        started = time.perf_counter()
        recognizer, encoder = load_recognizer(), load_encoder()
        loading = time.perf_counter() - started
        started = time.perf_counter()
        analyze_run(store, run_id, recognizer, encoder)
        first = time.perf_counter() - started
        started = time.perf_counter()
        analyze_run(store, run_id, recognizer, encoder)
        second = time.perf_counter() - started
        found = store.count("entities", run_id)
        print(f"load recognizer ({recognizer.backend}) and encoder: {loading:.1f} s")
        print(f"{args.samples} samples × 3 texts: {first:.1f} s ({first / (3 * args.samples) * 1000:.0f} ms a text), {found} entities")
        print(f"second pass (cached): {second:.2f} s = {second / first:.3f} of the first")


if __name__ == "__main__":
    main()
