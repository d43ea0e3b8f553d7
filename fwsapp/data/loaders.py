"""Dataset loaders: processed files, raw question tables with the task rules applied, and the demo set.

Every problem with a file is reported once, as a DatasetError naming the file, the row and what is wrong.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path

from fwsapp.data.tasks import RAW_RULES, Sample, completion_sample, qa_sample, summarization_sample, task
from fwsapp.paths import DEMO_DATA_DIR, UPLOADS_DIR

DEMO = "demo"
REFERENCE_KEYS = ("natural", "reference")
RAW_COLUMNS = {
    "completion": ("answer",),
    "qa": ("question", "answer"),
    "summarization": ("question", "summary"),
}


class DatasetError(ValueError):
    """A dataset file that cannot be used; the message names the file, the row and the problem."""

    def __init__(self, source: str, problem: str, row: int | None = None):
        where = f"{source}, row {row}" if row is not None else source
        super().__init__(f"{where}: {problem}")


def demo_path(task_name: str) -> Path:
    return DEMO_DATA_DIR / f"demo_{task(task_name).name}.json"


def load_dataset(task_name: str, source: str | Path = DEMO, content: bytes | None = None) -> list[Sample]:
    """Load samples for a task from the demo set, a path, or uploaded bytes named by `source`."""
    task(task_name)
    if str(source) == DEMO:
        source = demo_path(task_name)
    name = Path(source).name
    if content is None:
        try:
            content = Path(source).read_bytes()
        except OSError as error:
            raise DatasetError(str(source), f"cannot be read ({error.strerror}).") from None
    rows = parse_rows(name, content)
    return samples_from_rows(task_name, name, rows)


def save_upload(task_name: str, name: str, content: bytes, folder: Path | None = None) -> Path:
    """Validate an uploaded dataset and keep it under cache/uploads/, named by its content hash."""
    load_dataset(task_name, name, content)
    folder = folder or UPLOADS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(content).hexdigest()[:12]}{Path(name).suffix.lower()}"
    path.write_bytes(content)
    return path


def parse_rows(name: str, content: bytes) -> list[dict]:
    """Rows of a JSON list, JSONL or CSV file, as dicts; raises DatasetError for anything else."""
    if not content.strip():
        raise DatasetError(name, "the file is empty. Provide a JSON list, JSONL or CSV with rows.")
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DatasetError(name, f"is not UTF-8 text (bad byte at offset {error.start}). Save it as UTF-8.") from None
    suffix = Path(name).suffix.lower()
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text), strict=True)
        try:
            rows = list(reader)
        except csv.Error as error:
            raise DatasetError(name, f"malformed CSV at line {reader.line_num} of the file ({error}); look for a "
                                     "quote that is opened and never closed.") from None
        for number, row in enumerate(rows, start=1):
            if None in row or None in row.values():
                raise DatasetError(name, f"has {'more' if None in row else 'fewer'} fields than the header.", number)
        first_row = 1  # rows count data rows, the header excluded, in every message
    elif suffix == ".jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                rows.append(_json(name, line, row=number))
        first_row = 1
    else:
        rows = _json(name, text)
        if not isinstance(rows, list):
            raise DatasetError(name, "expected a JSON list of objects at the top level.")
        first_row = 1
    if not rows:
        raise DatasetError(name, "has no rows.")
    for number, row in enumerate(rows, start=first_row):
        if not isinstance(row, dict):
            raise DatasetError(name, f"expected an object with named fields, found {type(row).__name__}.", number)
    return rows


def _json(name: str, text: str, row: int | None = None):
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}" if row is None else f"column {error.colno}"
        raise DatasetError(name, f"broken JSON at {where}: {error.msg}.", row) from None


def samples_from_rows(task_name: str, name: str, rows: list[dict]) -> list[Sample]:
    columns = set(rows[0])
    if "prompt" in columns:
        return _processed(name, rows)
    raw = RAW_COLUMNS[task_name]
    if set(raw) <= columns:
        return _raw(task_name, name, rows, raw)
    raise DatasetError(
        name,
        f"unknown columns {sorted(columns)}. Expected 'prompt' with 'natural' or 'reference' (processed), "
        f"or {', '.join(repr(c) for c in raw)} (a raw {task_name} table).",
        1,
    )


def _processed(name: str, rows: list[dict]) -> list[Sample]:
    samples = []
    for number, row in enumerate(rows, start=1):
        reference_key = next((key for key in REFERENCE_KEYS if key in row), None)
        if reference_key is None:
            raise DatasetError(name, "missing the reference: add a 'natural' or 'reference' field.", number)
        prompt, reference = row.get("prompt"), row[reference_key]
        for field, value in (("prompt", prompt), (reference_key, reference)):
            if not isinstance(value, str) or not value.strip():
                raise DatasetError(name, f"'{field}' must be non-empty text.", number)
        samples.append(Sample(prompt.strip(), reference.strip()))
    return samples


def _raw(task_name: str, name: str, rows: list[dict], columns: tuple[str, ...]) -> list[Sample]:
    rule = {"completion": completion_sample, "qa": qa_sample, "summarization": summarization_sample}[task_name]
    samples = []
    for number, row in enumerate(rows, start=1):
        values = [row.get(column) for column in columns]
        for column, value in zip(columns, values):
            if not isinstance(value, str):
                raise DatasetError(name, f"'{column}' must be text.", number)
        sample = rule(*values)
        if sample is not None:
            samples.append(sample)
    if not samples:
        which = "its one row does not pass" if len(rows) == 1 else f"none of its {len(rows):,} rows passes"
        raise DatasetError(name, f"{which} the paper's {task_name} rule: {RAW_RULES[task_name]}. To take rows as they "
                           "are, give each a 'prompt' and a 'reference' instead (docs/data.md: Tasks and data).")
    return samples
