"""Example data: the paper's published meditron KGW logs, shipped in data/examples (Apache-2.0; SOURCE.md there).

Loading them imports three runs (completion, QA, summarization) with their detection scores and GPT-4o verdicts, so
every page has content on a fresh install. An import is keyed by its content, so loading them again changes nothing.
"""
from __future__ import annotations

from fwsapp.data.tasks import PAPER_FILE_CODES
from fwsapp.importer import LogFile, import_logs
from fwsapp.paths import DEMO_DATA_DIR
from fwsapp.store import Store

FOLDER = DEMO_DATA_DIR / "examples" / "paper-meditron"


def load_examples(store: Store) -> list[str]:
    """Import the three example runs (those already imported are left as they are); returns their run ids."""
    run_ids = []
    for code, task in PAPER_FILE_CODES.items():  # the paper's file codes: HQA, HQA2, MEQS
        stem = FOLDER / f"KGW-g0.5-d2-meditron-{code}"
        run_ids.append(import_logs(
            store, method="KGW", model="meditron", task_name=task,
            **{part: LogFile.from_path(f"{stem}.{part}.json") for part in ("generations", "detection", "judged")},
        ))
    return run_ids
