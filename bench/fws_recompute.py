"""FWS slider cost: recomputing every α/β-dependent table of the FWS page for 10,000 judged pairs.

Run: .venv/bin/python -m bench.fws_recompute [--pairs 10000]
The page loads per-sample aspects once per database revision; a slider move only re-weights them
(`fws_views`). The baseline, in the same run, rebuilds the inputs from the database every time.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from bench.common import median_seconds as timed
from fwsapp.fws import fws_views, judge_aspects, metric_aspects, run_means
from fwsapp.report import detection_frame
from fwsapp.store import Store

METHODS = ("KGW", "SWEET", "DiPmark", "EXP-edit")
TASKS = ("completion", "qa", "summarization")


def synthetic_store(path: Path, pairs: int) -> Store:
    store = Store(path)
    rng = np.random.default_rng(0)
    per_run = pairs // (len(METHODS) * len(TASKS))
    for method in METHODS:
        for task in TASKS:
            run_id = f"{method}-{task}"
            store.replace_run(run_id, {"config": {}, "model": "m", "task": task, "method": method, "params": {},
                                       "n": per_run, "imported": True, "status": "done"}, {
                "judgments": [{"sample_idx": i, "judge_model": "j", "prompt_version": "v", "watermarked_first": bool(i % 2),
                               "texts_hash": str(i), "status": "ok", "scores_watermarked": rng.integers(1, 6, 3).tolist(),
                               "scores_unwatermarked": rng.integers(1, 6, 3).tolist()} for i in range(per_run)],
                "metrics": [{"sample_idx": i, "text_kind": kind, "metric": metric, "config": "c", "value": float(rng.random())}
                            for i in range(per_run) for kind in ("watermarked", "unwatermarked")
                            for metric in ("simcse", "rougeL", "f1", "factuality")],
                "detections": [{"sample_idx": i, "text_kind": kind, "detector": method, "score": float(rng.normal(4 if kind == "watermarked" else 0))}
                               for i in range(per_run) for kind in ("watermarked", "unwatermarked")],
            })
    return store


def load_inputs(store: Store) -> dict:
    runs = store.runs()
    judge = judge_aspects(store.judgments())
    auto = metric_aspects(store.metrics(), dict(zip(runs.run_id, runs.task)))
    detection = detection_frame(store)
    return {"runs": runs, "judge": run_means(judge, runs, detection), "auto": run_means(auto, runs, detection),
            "pairs": len(judge) // 2, "scored": len(auto) // 2}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = synthetic_store(Path(folder) / "bench.duckdb", args.pairs)
        inputs = load_inputs(store)
        weights = iter(np.linspace(0.1, 0.6, 1000))

        def slider_move():
            alpha = next(weights)
            fws_views(inputs["judge"], inputs["auto"], alpha, 1 - 2 * alpha)

        def rebuild():
            fresh = load_inputs(store)
            fws_views(fresh["judge"], fresh["auto"], 0.4, 0.2)

        move = timed(slider_move, 30)
        full = timed(rebuild, 5)
        print(f"{inputs['pairs']} judged pairs, {inputs['scored']} scored samples, {len(inputs['runs'])} runs")
        print(f"slider move (cached inputs): {move * 1000:.1f} ms (median of 30; target <= 50 ms)")
        print(f"rebuild from the database:   {full * 1000:.1f} ms (median of 5)")
        print(f"ratio: a slider move costs {move / full:.3f} of a rebuild")


if __name__ == "__main__":
    main()
