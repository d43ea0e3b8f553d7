"""Judge throughput: the concurrent runner vs a sequential loop, 200 pairs against a stub at 300 ms latency.

Run: .venv/bin/python -m bench.judge_concurrency [--pairs 200] [--latency 0.3] [--concurrency 32]
Both arms use the same runner, store and stub; only the number of requests in flight differs.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import bench.common  # noqa: F401  (puts the project on the path)
from fwsapp.orchestration.importer import LogFile, import_logs
from fwsapp.judge.backends import OpenAIBackend
from fwsapp.judge.runner import JudgeSettings, run_judge
from fwsapp.store import Store
from tests.openai_stub import StubServer


def timed_run(pairs: int, latency: float, concurrency: int) -> float:
    rows = [{"prompt": f"Question {i}?", "watermarked_text": f"w {i}", "unwatermarked_text": f"u {i}",
             "natural_text": f"r {i}"} for i in range(pairs)]
    with tempfile.TemporaryDirectory() as folder, StubServer(latency=latency) as stub:
        store = Store(Path(folder) / "bench.duckdb")
        run_id = import_logs(store, method="KGW", model="bench", task_name="qa",
                             generations=LogFile("g.json", json.dumps(rows).encode()))
        backend = OpenAIBackend("stub-judge", base_url=stub.base_url, timeout=30)
        started = time.perf_counter()
        outcome = run_judge(store, [run_id], backend, JudgeSettings(concurrency=concurrency))
        seconds = time.perf_counter() - started
        assert outcome.judged == pairs, outcome
        return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    sequential = timed_run(args.pairs, args.latency, 1)
    default = timed_run(args.pairs, args.latency, 8)
    concurrent = timed_run(args.pairs, args.latency, args.concurrency)
    print(f"pairs={args.pairs} latency={args.latency}s")
    print(f"sequential (1 in flight): {sequential:.1f} s")
    print(f"default (8 in flight):    {default:.1f} s  speed-up {sequential / default:.1f}x")
    print(f"{args.concurrency} in flight:           {concurrent:.1f} s  speed-up {sequential / concurrent:.1f}x")


if __name__ == "__main__":
    main()
