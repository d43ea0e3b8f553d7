"""Export one run: a row per sample with both texts, the reference, the detection scores, each text's evidence record
(where `detect --evidence` has kept them), each stored quality metric's value per text and one judge's scores."""
from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fwsapp.judge.summary import KINDS, counted_judges, counted_judgments, per_sample_scores
from fwsapp.paths import replaceable_output, write_output
from fwsapp.quality.scoring import read_values
from fwsapp.quality.registry import ASPECTS, in_stored_order
from fwsapp.results.run_names import settings
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


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """`frame` as the bytes of an RFC 4180 CSV file, the one way fwsapp writes CSV: list cells as JSON arrays, every
    text cell a spreadsheet would run as a formula made inert, and every field that holds a line break quoted. The
    rows end in CRLF because Python's csv writer quotes a field holding any character of the row terminator: with
    pandas' "\n" alone, a lone CR inside a text went out bare and started a new row in a reader."""
    return spreadsheet_safe(with_json_lists(frame)).to_csv(index=False, lineterminator="\r\n").encode()


def run_table(store: Store, run_id: str) -> pd.DataFrame:
    # Imported here: the detectors import scikit-learn, which the CLI's parser (it reads EXPORT_FORMATS) need not load.
    from fwsapp.detection.redetect import run_evidence

    run = store.run(run_id)
    samples = store.generations(run_id)
    scores = store.detections([run_id])
    scores = scores[scores.detector == run["method"]]
    wide = scores.pivot_table(index="sample_idx", columns="text_kind", values=["score", "num_tokens_scored"])
    wide.columns = [f"{value}_{kind}" for value, kind in wide.columns]
    counts = [column for column in wide.columns if column.startswith("num_tokens_scored_")]
    wide[counts] = wide[counts].round().astype("Int64")  # a count, "32" (the pivot's mean wrote "32.0")
    table = samples.merge(wide.reset_index(), on="sample_idx", how="left").merge(
        run_evidence(store, run_id), on="sample_idx", how="left")
    # Its settings and seed: two runs of a method at two strengths were told apart by their ids alone.
    for position, (column, value) in enumerate(
            (("method", run["method"]), ("settings", settings(run["method"], run["params"], bool(run["imported"]))),
             ("seed", run["seed"]), ("model", run["model"]), ("task", run["task"])), start=1):
        table.insert(position, column, value)
    return table


def quality_columns(store: Store, run_id: str) -> pd.DataFrame:
    """Per sample, each stored metric's value per text, `quality_<metric>_<kind>` (metrics in the registry's order),
    under the config the report reads, so no column mixes two oracles or two versions."""
    metrics = read_values(store, [run_id])
    if metrics.empty:
        return pd.DataFrame(columns=["sample_idx"])
    wide = metrics.pivot_table(index="sample_idx", columns=["metric", "text_kind"], values="value")
    order = {kind: index for index, kind in enumerate((*KINDS, "reference"))}
    kinds = sorted(set(wide.columns.get_level_values(1)), key=lambda kind: (order.get(kind, len(order)), kind))
    columns = [(metric, kind) for metric in in_stored_order(wide.columns.get_level_values(0)) for kind in kinds
               if (metric, kind) in wide.columns]
    wide = wide[columns]
    wide.columns = [f"quality_{metric}_{kind}" for metric, kind in columns]
    return wide.reset_index()


def run_judges(store: Store, run_id: str) -> list[str]:
    """The judges of a run whose verdicts an export may hold, the default first (`counted_judges`; a smoke test
    last, and only where it judged the run)."""
    return counted_judges(store.judgments([run_id]), include_smoke_tests=True)


def judge_columns(store: Store, run_id: str, judge: str | None = None) -> pd.DataFrame:
    """Per judged sample, one judge's 1-5 scores of each text, `judge_<aspect>_<kind>` (the mean of its verdicts in
    both orders), how many verdicts, and the judge (`judge_model`): `judge`, else the run's default (`run_judges`).
    Judges' scales differ, so a row never pools two, as no figure does."""
    try:
        verdicts = counted_judgments(store.judgments([run_id]), include_smoke_tests=True, judge=judge)
    except ValueError as error:
        raise ValueError(f"Run {run_id}: {error}") from None
    samples = per_sample_scores(verdicts)
    if samples.empty:
        return pd.DataFrame(columns=["sample_idx"])
    scores = {f"{aspect}_{kind}": f"judge_{aspect}_{kind}" for kind in KINDS for aspect in ASPECTS}
    return samples[["sample_idx", *scores]].rename(columns=scores).assign(
        judge_verdicts=samples.orders.to_numpy(), judge_model=verdicts.judge_model.iloc[0])


def export_table(store: Store, run_id: str, judge: str | None = None) -> pd.DataFrame:
    """What `export` writes: `run_table` with `quality_columns` and `judge`'s `judge_columns` beside it."""
    return (run_table(store, run_id).merge(quality_columns(store, run_id), on="sample_idx", how="left")
            .merge(judge_columns(store, run_id, judge), on="sample_idx", how="left"))


def with_json_lists(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with each list cell (token ids, entropies) as a JSON array, which any CSV reader can parse; pandas would
    write numpy's repr, line breaks and all. Only an object column holds lists: an empty column of another type maps to
    its own type, and an empty datetime column refuses `any()` (a study not yet rated, beside another's ratings)."""
    def as_json(value):
        return json.dumps(value.tolist() if isinstance(value, np.ndarray) else value) if isinstance(
            value, (list, tuple, np.ndarray)) else value

    return frame.assign(**{column: frame[column].map(as_json) for column in frame.columns
                           if frame[column].dtype == object
                           and frame[column].map(lambda value: isinstance(value, (list, tuple, np.ndarray))).any()})


@dataclass(frozen=True)
class FileFormat:
    label: str  # as a download button names it
    mime: str


# The formats a table is exported in, by file suffix.
EXPORT_FORMATS = {"csv": FileFormat("CSV", "text/csv"), "parquet": FileFormat("Parquet", "application/vnd.apache.parquet")}


def export_format(path: Path, fmt: str | None = None) -> str:
    """The format asked for, else the one `path`'s suffix names; refused, before anything is read, when neither
    names one of EXPORT_FORMATS, or when the two name different ones."""
    suffix = Path(path).suffix.lstrip(".").lower()
    chosen = (fmt or suffix).lower()
    if chosen not in EXPORT_FORMATS:
        raise ValueError(f"Export to {' or '.join(f'.{known}' for known in EXPORT_FORMATS)}, not "
                         f".{chosen or '(no suffix)'}: end the file's name so.")
    if suffix in EXPORT_FORMATS and suffix != chosen:  # a Parquet file named .csv opens as garbage
        raise ValueError(f"{path} names a {EXPORT_FORMATS[suffix].label} file, but the format asked for is "
                         f"{EXPORT_FORMATS[chosen].label}: name it ….{chosen}, or leave the format to the name.")
    return chosen


def table_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    """A table as the bytes of a CSV file (`csv_bytes`) or a Parquet file (list columns as lists)."""
    if fmt == "csv":
        return csv_bytes(frame)
    if fmt == "parquet":
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return buffer.getvalue()
    raise ValueError(f"Unknown export format '{fmt}': use csv or parquet.")


def export_bytes(store: Store, run_id: str, fmt: str, judge: str | None = None) -> bytes:
    """A run's `export_table` as the bytes of a file of `fmt` (one of EXPORT_FORMATS)."""
    return table_bytes(export_table(store, run_id, judge), fmt)


def export_run(store: Store, run_id: str, fmt: str | None, out: Path, force: bool = False,
               judge: str | None = None) -> Path:
    """A run's samples to CSV (list columns as JSON arrays) or Parquet (`fmt`, else by `out`'s suffix), with `judge`'s
    verdicts (else the run's default judge's), written as every output file is (`paths.write_output`: a new file, or
    with `force` a regular one replaced)."""
    out = Path(out)
    fmt = export_format(out, fmt)
    replaceable_output(out, force)  # before the table is read
    write_output(out, export_bytes(store, run_id, fmt, judge), force)
    return out
