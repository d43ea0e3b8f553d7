"""FWS slider cost on the page itself: an α move against a rerun with nothing changed, about 10,000 judged pairs.

Run: .venv/bin/python -m bench.fws_recompute [--pairs 10000] [--repeats 9]
The FWS page runs in streamlit's AppTest on a synthetic database (12 runs: 4 methods × 3 tasks, each
with judged pairs, four metrics per text and detection scores). After a first load fills the caches,
the bench alternates two reruns: one that moves the "α" slider to a new value, and one that changes
nothing. Their median ratio is the target (≤ 1.5×). It also times the α-dependent work alone
(`fws.fws_views` on the page's cached α-free parts; target ≤ 50 ms).
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

METHODS = ("KGW", "SWEET", "DiPmark", "EXP-edit")
TASKS = ("completion", "qa", "summarization")
ROOT = Path(__file__).resolve().parents[1]


def synthetic_store(path: Path, pairs: int):
    from fwsapp.store import Store

    store = Store(path)
    rng = np.random.default_rng(0)
    per_run = pairs // (len(METHODS) * len(TASKS))
    for method in METHODS:
        for task in TASKS:
            store.add_run(f"{method}-{task}", {
                "config": {}, "model": "m", "task": task, "method": method, "params": {}, "n": per_run,
                "imported": True, "status": "done"}, {
                "judgments": [{"sample_idx": i, "judge_model": "j", "prompt_version": "v", "watermarked_first": bool(i % 2),
                               "texts_hash": str(i), "status": "ok", "scores_watermarked": rng.integers(1, 6, 3).tolist(),
                               "scores_unwatermarked": rng.integers(1, 6, 3).tolist()} for i in range(per_run)],
                "metrics": [{"sample_idx": i, "text_kind": kind, "metric": metric, "config": "c",
                             "value": float(rng.random())}
                            for i in range(per_run) for kind in ("watermarked", "unwatermarked")
                            for metric in ("simcse", "rougeL", "f1", "factuality")],
                "detections": [{"sample_idx": i, "text_kind": kind, "detector": method,
                                "score": float(rng.normal(4 if kind == "watermarked" else 0))}
                               for i in range(per_run) for kind in ("watermarked", "unwatermarked")],
            })
    store.close()
    return per_run * len(METHODS) * len(TASKS)


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    from streamlit.testing.v1 import AppTest

    with tempfile.TemporaryDirectory() as folder:
        database = Path(folder) / "bench.duckdb"
        judged = synthetic_store(database, args.pairs)
        os.environ["FWSAPP_DB"] = str(database)
        app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        app.run()
        app.switch_page("pages/fws.py").run()
        app.radio(key="fws-mode").set_value("Free α and β").run()
        assert not app.exception, app.exception
        first = timed(lambda: app.run())  # caches are warm after the page's first loads
        alphas = iter(np.linspace(0.05, 0.45, 2 * args.repeats))
        moves, reruns = [], []
        for _ in range(args.repeats):
            moves.append(timed(lambda: app.slider(key="fws-alpha").set_value(float(next(alphas))).run()))
            reruns.append(timed(lambda: app.run()))
        assert not app.exception, app.exception

        from fwsapp.ui import queries, resources
        from fwsapp.results.fws import default_mapping, fws_views

        prepared = queries.fws_prepared(resources.revision(), tuple(sorted(default_mapping().items())))
        weighting = [timed(lambda: fws_views(prepared, alpha, 1 - 2 * alpha))
                     for alpha in np.linspace(0.1, 0.45, 30)]

    move, rerun = statistics.median(moves), statistics.median(reruns)
    print(f"{judged:,} judged pairs in {len(METHODS) * len(TASKS)} runs; AppTest of the FWS page, median of {args.repeats}")
    print(f"rerun, nothing changed: {rerun * 1000:.0f} ms (first warm rerun {first * 1000:.0f} ms)")
    print(f"α slider move:          {move * 1000:.0f} ms")
    print(f"ratio move / rerun:     {move / rerun:.2f}× (target ≤ 1.5×)")
    print(f"α-dependent work (fws_views on cached α-free parts): {statistics.median(weighting) * 1000:.1f} ms (target ≤ 50 ms)")


if __name__ == "__main__":
    main()
