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
    from fwsapp.orchestration.importer import LogFile, import_logs

    records = json.loads(PAPER_QA.read_text())[:samples]
    return import_logs(store, method="KGW", model="meditron", task_name="qa",
                       generations=LogFile("g.json", json.dumps(records).encode()))


def merge_record(path: Path, fresh, key: list[str], replaced: list[str] | None = None, read=None) -> None:
    """Merge `fresh` rows into a committed record (a CSV): a kept row whose `replaced` columns (default: the key) match
    a fresh row's is measured again and goes; every other row stays. Sorted by `key`; `read` reads the record."""
    import pandas as pd

    replaced = replaced or key
    merged = fresh
    if path.exists():
        kept = (read or pd.read_csv)(path)
        again = set(zip(*(fresh[column] for column in replaced)))
        merged = pd.concat([kept[[row not in again for row in zip(*(kept[column] for column in replaced))]], fresh])
    path.parent.mkdir(parents=True, exist_ok=True)
    merged.sort_values(key).to_csv(path, index=False, float_format="%.6g")
