"""What it costs to let go of the database file between transactions, so the app and `python -m fwsapp` share it.

Run: .venv/bin/python -m bench.shared_database [--samples 64] [--repeats 3]
Two workloads, each timed two ways in one run, alternating:
- "shared": the store as it is, holding the file only while it is used (and a moment after);
- "held": the same with one connection kept open throughout, as every process did before (the baseline).
The workloads: every page of the app loaded in streamlit's AppTest on the example database (3 runs × 200 samples),
first with empty query caches and then again warm; and a `generate` of 64 QA samples on the embedded model (batch 8,
32 new tokens; the paper's HealthQA set from ../shared/data), in process. Before the page loads, the metrics the
pages would start computing on their own are computed, so no load is timed while a job writes. Printed: the median
seconds of each, and the ratio shared / held.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import ROOT

QA_DATASET = ROOT.parent / "shared" / "data" / "healthqa_qa.json"  # the paper's HealthQA QA set

PAGES = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "pages").glob("*.py"))


def load_pages(warm: bool) -> float:
    """Seconds to open every page once; caches emptied first unless `warm`."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    if not warm:
        st.cache_data.clear()
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    started = time.perf_counter()
    app.run()
    for page in PAGES:
        app.switch_page(page).run()
        assert not app.exception, (page, app.exception)
    return time.perf_counter() - started


def settle(store) -> None:
    """Compute what the pages would start computing on their own (the metrics that need no model) and wait for any job
    they started, so a page load is timed on a database that does not change under it."""
    from fwsapp.orchestration import pipeline
    from fwsapp.quality.registry import model_free_metrics
    from fwsapp.ui import resources

    pipeline.score(store, list(store.runs().run_id), None, metrics=model_free_metrics())
    while resources.jobs().running():
        time.sleep(0.2)


def held_open(store, held: bool):
    """The baseline keeps one cursor (so the file) open for the whole workload."""
    return store.cursor() if held else contextlib.nullcontext()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from fwsapp.orchestration.examples import load_examples
    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.models import load_model
    from fwsapp.store import Store

    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        database = Path(folder) / "bench.duckdb"
        os.environ["FWSAPP_DB"] = str(database)
        store = Store(database)
        load_examples(store)
        load_pages(warm=False)  # imports and first-use costs out of the way
        lm = load_model()
        settle(store)
        for repeat in range(args.repeats):
            for variant in ("shared", "held") if repeat % 2 == 0 else ("held", "shared"):
                with held_open(store, variant == "held"):
                    times.setdefault(("pages, caches empty", variant), []).append(load_pages(warm=False))
                    times.setdefault(("pages, warm", variant), []).append(load_pages(warm=True))
                    config = RunConfig(task="qa", method="KGW", dataset=str(QA_DATASET), n=args.samples, max_new_tokens=32,
                                       batch_size=8, seed=1000 * repeat + (variant == "held"))
                    started = time.perf_counter()
                    run_generation(config, store, lm)
                    times.setdefault((f"generate {args.samples} samples", variant), []).append(
                        time.perf_counter() - started)
                settle(store)
        store.close()

    print(f"{len(PAGES)} pages, example database; medians of {args.repeats}, seconds")
    print(f"{'workload':<24} {'held':>8} {'shared':>8} {'shared/held':>12}")
    for workload in dict.fromkeys(name for name, _ in times):
        held, shared = (statistics.median(times[(workload, variant)]) for variant in ("held", "shared"))
        print(f"{workload:<24} {held:>8.2f} {shared:>8.2f} {shared / held:>11.2f}×")


if __name__ == "__main__":
    main()
