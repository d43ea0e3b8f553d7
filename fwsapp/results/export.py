"""Export one run: a row per sample with both texts, the reference and the detection scores."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from fwsapp.store import Store


# A spreadsheet runs a cell that starts with one of these as a formula (=HYPERLINK(...) in a rater's comment).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with every text cell that a spreadsheet would run as a formula led by an apostrophe (OWASP's CSV
    injection rule), so it opens as the text it is. Numbers are left alone."""
    def inert(value):
        return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value

    return frame.assign(**{column: frame[column].map(inert) for column in frame.columns
                           if pd.api.types.is_object_dtype(frame[column]) or pd.api.types.is_string_dtype(frame[column])})


def run_table(store: Store, run_id: str) -> pd.DataFrame:
    run = store.run(run_id)
    samples = store.generations(run_id)
    scores = store.detections([run_id])
    scores = scores[scores.detector == run["method"]]
    wide = scores.pivot_table(index="sample_idx", columns="text_kind", values=["score", "num_tokens_scored"])
    wide.columns = [f"{value}_{kind}" for value, kind in wide.columns]
    table = samples.merge(wide.reset_index(), on="sample_idx", how="left")
    table.insert(1, "method", run["method"])
    table.insert(2, "model", run["model"])
    table.insert(3, "task", run["task"])
    return table


def with_json_lists(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with each list cell (token ids, entropies) as a JSON array, which any CSV reader can parse; pandas would
    write numpy's repr, line breaks and all."""
    def as_json(value):
        return json.dumps(value.tolist() if isinstance(value, np.ndarray) else value) if isinstance(
            value, (list, tuple, np.ndarray)) else value

    return frame.assign(**{column: frame[column].map(as_json) for column in frame.columns
                           if frame[column].map(lambda value: isinstance(value, (list, tuple, np.ndarray))).any()})


def export_run(store: Store, run_id: str, fmt: str, out: Path) -> Path:
    """A run's samples to CSV (list columns as JSON arrays) or Parquet (list columns as lists)."""
    table = run_table(store, run_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        spreadsheet_safe(with_json_lists(table)).to_csv(out, index=False)
    elif fmt == "parquet":
        table.to_parquet(out, index=False)
    else:
        raise ValueError(f"Unknown export format '{fmt}': use csv or parquet.")
    return out
