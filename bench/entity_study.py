"""The EntityKGW study (issue 50): does sparing entities lower the disease mentions a watermark leaves unsupported?

Run: .venv/bin/python -m bench.entity_study [--n 64] [--seeds 0 1 2 3 4] [--tasks qa completion summarization]
     [--methods EntityKGW] [--against KGW] [--db cache/bench-entity-study.duckdb]
     .venv/bin/python -m bench.entity_study --from-record     (the table again, from the committed record)

Design, all through fwsapp's pipeline into one resumable database (an interrupted study goes on where it stopped):
1. **Calibration.** Seed 0 of each task, each method at δ 1, 1.5 and 2: `fwsapp.detection.strength` gives the δ at which
   each method reaches TPR 0.9 at 1 % FPR after 64 tokens (interpolated, then rounded to 0.05).
2. **Arms.** Each method at δ 2 (equal δ) and at its calibrated δ (equal strength), on every seed: the first `n` prompts
   of each task's dataset in ../shared/data, 64 new tokens, the embedded model. A seed fixes the sampling noise and the
   prompts are shared, so the methods' texts pair by (seed, prompt).
3. **Measures.** The metrics behind FWS (Auto); the trained recognizer's disease mentions; two attacks (30 % of words
   deleted, 30 % replaced by synonyms) with the mentions they keep.
4. **Analysis.** `fwsapp.results.paired` (`python -m fwsapp paired`): paired differences, intervals from a bootstrap
   over prompts, a permutation p-value and the minimum detectable difference. Each text's measures are merged into a
   committed record (bench/results/entity_study.csv), because the database does not outlive a session.
"""
from __future__ import annotations

import argparse
import time
from functools import lru_cache
from pathlib import Path

from bench import entity_watermark
from bench.common import merge_record
from bench.entity_watermark import METRICS

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "bench" / "results" / "entity_study.csv"
CALIBRATION_DELTAS = (1.0, 1.5, 2.0)
EQUAL_DELTA = 2.0
TARGET_TPR, FPR, TOKENS = 0.9, 0.01, 64
ATTACKS = (("word-deletion", {"ratio": 0.3}), ("synonym", {"ratio": 0.3}))


def config(method: str, task: str, n: int, seed: int, delta: float):
    return entity_watermark.config(method, task, n, seed, TOKENS, batch_size=32, delta=delta)


class Study:
    def __init__(self, db: str, n: int):
        from fwsapp.models import load_model
        from fwsapp.store import Store

        self.store, self.n = Store(db), n
        self.loader = lru_cache(maxsize=None)(load_model)
        self.spent: dict[str, float] = {}  # seconds per stage, this process

    def timed(self, stage: str, work):
        started = time.perf_counter()
        result = work()
        self.spent[stage] = self.spent.get(stage, 0.0) + time.perf_counter() - started
        return result

    def run(self, method: str, task: str, seed: int, delta: float, label: str) -> str:
        from fwsapp.orchestration import pipeline

        store, loader = self.store, self.loader
        [run_id] = self.timed("generate", lambda: pipeline.generate(store, [config(method, task, self.n, seed, delta)],
                                                                    loader))
        self.timed("score", lambda: pipeline.score(store, [run_id], loader, metrics=METRICS))
        self.timed("analyze", lambda: pipeline.analyze(store, [run_id], loader, recognizer="trained"))
        for attack, params in ATTACKS:
            self.timed("attack", lambda: pipeline.attack(store, [run_id], loader, attack=attack, params=params, seed=seed))
        print(f"{label}: {run_id} ({', '.join(f'{stage} {seconds:.0f} s' for stage, seconds in self.spent.items())})",
              flush=True)
        return run_id

    def calibrated(self, methods: list[str], task: str) -> dict[str, float]:
        """Each method's δ at the target, from its seed-0 sweep (rounded to 0.05)."""
        from fwsapp.detection.strength import equal_strength
        from fwsapp.results.report import build_report

        run_ids = [self.run(method, task, 0, delta, f"calibration {method} {task} δ {delta}")
                   for method in methods for delta in CALIBRATION_DELTAS]
        points, table = equal_strength(self.store, build_report(self.store), TARGET_TPR, FPR, TOKENS, run_ids)
        if set(table.method) != set(methods):
            raise SystemExit(f"No TPR after {TOKENS} tokens for every method on {task}:\n{points.to_string()}")
        found = {}
        for row in table.itertuples():
            if row.value != row.value:  # not reached within the sweep
                raise SystemExit(f"{row.method} on {task} does not reach TPR {TARGET_TPR} ({row.setting}): widen "
                                 "CALIBRATION_DELTAS.")
            found[row.method] = round(row.value * 20) / 20
            print(f"calibrated {row.method} {task}: δ {row.value:.3f} ({row.setting}) -> {found[row.method]}", flush=True)
        return found


RECORD_KEY = ["candidate", "baseline", "task", "setting", "compared", "measure", "prompt"]


def record(path: Path, sums) -> None:
    """Merge the prompt sums into the record: a comparison measured again replaces its rows, every other row stays."""
    merge_record(path, sums, RECORD_KEY, replaced=["candidate", "baseline", "task", "setting"])


def print_tables(sums) -> None:
    from fwsapp.results.paired import difference_table, written
    from fwsapp.results.tables import to_markdown

    for (candidate, baseline), pair in sums.groupby(["candidate", "baseline"], sort=False):
        table = written(difference_table(pair.drop(columns=["candidate", "baseline"])))
        print(f"\n## {candidate} (candidate) against {baseline} (baseline)\n")
        for setting, rows in table.groupby("setting", sort=False):
            print(f"\n### {setting}\n")
            print(to_markdown(rows.drop(columns="setting")))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=64, help="prompts per task (each seed writes one text per prompt)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--tasks", nargs="+", default=["qa", "completion", "summarization"])
    parser.add_argument("--methods", nargs="+", default=["EntityKGW"])
    parser.add_argument("--against", default="KGW")
    parser.add_argument("--db", default=str(ROOT / "cache" / "bench-entity-study.duckdb"))
    parser.add_argument("--only", choices=["generate", "table"], nargs="+", default=["generate", "table"])
    parser.add_argument("--record", type=Path, default=RECORD, help="the committed record of each prompt's sums")
    parser.add_argument("--from-record", action="store_true", help="print the tables from the record: no database")
    args = parser.parse_args()
    if args.from_record:
        import pandas as pd

        print_tables(pd.read_csv(args.record))
        return
    methods = [args.against, *args.methods]
    study = Study(args.db, args.n)
    if "generate" in args.only:
        strengths = {task: study.calibrated(methods, task) for task in args.tasks}
        for seed in args.seeds:
            for task in args.tasks:
                for method in methods:
                    for delta in sorted({EQUAL_DELTA, strengths[task][method]}):
                        study.run(method, task, seed, delta, f"seed {seed} {task} {method} δ {delta}")
        print("seconds per stage:", {stage: round(seconds) for stage, seconds in study.spent.items()}, flush=True)
    if "table" in args.only:
        import pandas as pd

        from fwsapp.results.paired import prompt_sums

        sums = pd.concat([prompt_sums(study.store, method, args.against, TARGET_TPR, FPR, TOKENS, "trained").assign(
            candidate=method, baseline=args.against) for method in args.methods], ignore_index=True)
        sums = sums[sums.task.isin(args.tasks)]
        record(args.record, sums)
        print_tables(sums)


if __name__ == "__main__":
    main()
