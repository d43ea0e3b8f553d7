"""Threads on a shared machine: one generate (texts × 16 new tokens, the embedded model) under fixed thread counts and
under fwsapp's policy (fwsapp/models/threads.py), on a quiet machine and with other work running (busy processes, one
per core and more), at batch 1 and 16. Each setting runs in a fresh process, so its thread settings take effect.

    .venv/bin/python -m bench.threads [--busy 6] [--out bench/results/threads.json]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time

from bench.common import ROOT

# name -> environment: fixed counts with passive waiting, torch's default (2 spinning threads), and the policy.
SETTINGS = {
    "1 thread": {"FWSAPP_THREADS": "1"},
    "2 threads": {"FWSAPP_THREADS": "2"},
    "2 threads, spinning (torch's default)": {"FWSAPP_THREADS": "2", "OMP_WAIT_POLICY": "ACTIVE"},
    "fwsapp's policy": {},
}
CHILD = """
import sys, time
from fwsapp.models import load_model
from fwsapp.generation.generate import generate_batch
from fwsapp.generation.run_config import DEFAULT_SAMPLING
texts, batch = int(sys.argv[1]), int(sys.argv[2])
lm = load_model()
prompts = [f"What should a patient with condition {i} know?" for i in range(texts)]
started = time.perf_counter()
for start in range(0, texts, batch):
    generate_batch(lm, prompts[start:start + batch], 16, {**DEFAULT_SAMPLING, "min_new_tokens": 16}, seed=start)
print(time.perf_counter() - started)
"""


def spin(stop_at: float) -> None:
    while time.monotonic() < stop_at:  # bounded: ends by itself
        pass


def timed(setting: dict, texts: int, batch: int) -> float:
    environment = {key: value for key, value in os.environ.items() if key not in ("FWSAPP_THREADS", "OMP_WAIT_POLICY",
                                                                                   "OMP_NUM_THREADS")}
    result = subprocess.run([sys.executable, "-c", CHILD, str(texts), str(batch)], cwd=ROOT, env={**environment,
                            **setting}, capture_output=True, text=True, timeout=900, check=True)
    return float(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=6, help="busy processes for the loaded runs")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "threads.json"))
    args = parser.parse_args(argv)
    rows = []
    for texts, batch in ((2, 1), (16, 16)):
        for loaded in (False, True):
            workers = []
            if loaded:
                stop_at = time.monotonic() + 3600
                workers = [multiprocessing.Process(target=spin, args=(stop_at,), daemon=True) for _ in range(args.busy)]
                for worker in workers:
                    worker.start()
                time.sleep(5)  # the load average rises
            try:
                for name, setting in SETTINGS.items():
                    seconds = timed(setting, texts, batch)
                    rows.append({"texts": texts, "batch": batch, "machine": f"{args.busy} busy" if loaded else "quiet",
                                 "setting": name, "seconds": round(seconds, 2), "load": round(os.getloadavg()[0], 1)})
                    print(rows[-1], flush=True)
            finally:
                for worker in workers:
                    worker.terminate()
    with open(args.out, "w") as out:
        json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
