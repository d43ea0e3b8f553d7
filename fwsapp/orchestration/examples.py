"""Example data: the paper's published KGW logs, shipped in data/examples (Apache-2.0; SOURCE.md in each folder).

Loading them imports six runs: meditron's three tasks (completion, QA, summarization) with their detection scores and
GPT-4o verdicts, and their analysis (disease entities by the default recognizer; token entropies under the embedded
model, a stand-in for meditron, which is not here); and BioMistral's three with their detection scores, whose tokenizer
ships here, so they can be detected again from text offline (by length, after an attack). Every page has content on a
fresh install. An import is keyed by its content, so loading them again changes nothing.

The analysis is fixed work, done once by `python -m fwsapp.orchestration.examples` and shipped as Parquet beside the logs.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from fwsapp.data.tasks import PAPER_FILE_CODES
from fwsapp.orchestration.importer import LogFile, import_logs
from fwsapp.paths import DEMO_DATA_DIR
from fwsapp.store import Store

FOLDER = DEMO_DATA_DIR / "examples" / "paper-meditron"  # the runs whose analysis is shipped
# (folder, the paper's model name, the logs it has) of each example set.
EXAMPLE_SETS = ((FOLDER, "meditron", ("generations", "detection", "judged")),
                (DEMO_DATA_DIR / "examples" / "paper-biomistral", "biomistral", ("generations", "detection")))
ANALYSIS_TABLES = ("entities", "entity_analyses", "entropies")


def analysis_file(table: str, folder: Path = FOLDER) -> Path:
    return folder / f"analysis.{table}.parquet"


def import_example_runs(store: Store, sets=EXAMPLE_SETS) -> list[str]:
    run_ids = []
    for folder, model, parts in sets:
        for code, task in PAPER_FILE_CODES.items():  # the paper's file codes: HQA, HQA2, MEQS
            stem = folder / f"KGW-g0.5-d2-{model}-{code}"
            run_ids.append(import_logs(
                store, method="KGW", model=model, task_name=task,
                **{part: LogFile.from_path(f"{stem}.{part}.json") for part in parts},
            ))
    return run_ids


def load_examples(store: Store) -> list[str]:
    """Import the three example runs and their shipped analysis (what is stored already is kept); returns their ids."""
    run_ids = import_example_runs(store)
    if store.entity_analyses(run_ids).empty:  # a second load writes nothing, and the app's caches stay
        store.import_rows({table: analysis_file(table) for table in ANALYSIS_TABLES if analysis_file(table).exists()})
    return run_ids


def build_analysis(folder: Path = FOLDER) -> dict[str, int]:
    """Analyse the meditron example runs as `analyze` does (default recognizer; the embedded model's entropies) and write the
    rows beside the logs; returns the row count per table."""
    from fwsapp.orchestration import pipeline
    from fwsapp.models import EMBEDDED_MODEL, load_model

    with tempfile.TemporaryDirectory() as scratch:
        store = Store(Path(scratch) / "examples.duckdb")
        run_ids = import_example_runs(store, EXAMPLE_SETS[:1])
        pipeline.analyze(store, run_ids, lambda name: load_model(name), entropy_model=EMBEDDED_MODEL)
        counts = {table: store.export_rows(table, run_ids, analysis_file(table, folder)) for table in ANALYSIS_TABLES}
        store.close()
    return counts


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m fwsapp.orchestration.examples",
                            description="Analyse the example runs once and write the analysis beside their logs.").parse_args(argv)
    for table, count in build_analysis().items():
        print(f"{analysis_file(table)}: {count:,} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
