"""What the benchmarks share: a median timer, and the paper's meditron QA logs as a run."""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAPER_QA = ROOT.parent / "shared" / "data" / "paper" / "KGW-g0.5-d2-meditron-HQA2.generations.json"


def median_seconds(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def paper_qa_run(store, samples: int) -> str:
    """Import the first `samples` of the paper's meditron QA generations; returns the run id."""
    from fwsapp.data.importer import LogFile, import_logs

    records = json.loads(PAPER_QA.read_text())[:samples]
    return import_logs(store, method="KGW", model="meditron", task_name="qa",
                       generations=LogFile("g.json", json.dumps(records).encode()))
