"""The Robustness page's rows: each method × attack summary (`fwsapp.robustness.attack_sets.summary_frame`) with its run
named as every page names it (`run_names`), its clean baseline and the negatives it was read against."""
from __future__ import annotations

import pandas as pd

from fwsapp.data.tasks import task_label
from fwsapp.results.run_names import run_settings
from fwsapp.robustness.attack_sets import CLEAN, headed, rates_ruled


def labelled(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """`summary_frame` with each row's run called as the other pages call it (method, settings with its strength,
    then id where needed) and the number of its watermarked texts detected clean (why its baseline is not its own
    scores, where it is not: `baseline_notes`)."""
    named = run_settings(runs)
    clean = frame[frame.attack_label == CLEAN].set_index("set_id").texts
    # The negatives are named in the row: an imported run's Detect figures read its reference, these its clean texts.
    baseline = frame[frame.attack_label == CLEAN].set_index("set_id")
    negatives = baseline.negatives
    return frame.assign(run=[f"{method} · {named.get(run_id, run_id)} · {task_label(task)} · {model} · n={clean.get(set_id, '?')}"
                             + f" · against its {negatives.get(set_id, 'clean')} texts"
                             + (f" · normalised ({normalize})" if isinstance(normalize, str) else "")
                             for run_id, method, task, model, normalize, set_id
                             in zip(frame.run_id, frame.method, frame.task, frame.model, frame.normalize,
                                    _clean_set(frame))])


def every_set(frame: pd.DataFrame) -> pd.DataFrame:
    """Every attack set and clean baseline of `labelled`'s frame, as read: its run's label, then the summary's columns
    under their headings (the raw column names and Streamlit's own number format read run_id and 0.00015), a rate from
    too few texts said so, as in the table above it."""
    return frame[["run"]].rename(columns={"run": "Run"}).join(headed(rates_ruled(frame)))


def baseline_notes(frame: pd.DataFrame) -> dict[str, str]:
    """Each labelled run whose clean baseline is not its own scores, and why (`attack_sets.baseline_note`): said above
    its figures, where at the end of its label a table cut it off and a chart's axis squeezed the chart."""
    clean = frame[frame.attack_label == CLEAN]
    return {run: note for run, note in zip(clean.run, clean.get("baseline_note", [None] * len(clean)))
            if isinstance(note, str)}


def _clean_set(frame: pd.DataFrame) -> list[str]:
    """Each row's clean detection set: its own for a clean row, else the clean row's of the same run and detector."""
    clean = frame[frame.attack_label == CLEAN]
    key = dict(zip(zip(clean.run_id, clean.method, clean.tokenizer, clean.normalize.fillna("")), clean.set_id))
    return [key.get((row.run_id, row.method, row.tokenizer, row.normalize if isinstance(row.normalize, str) else ""),
                    row.set_id) for row in frame.itertuples()]
