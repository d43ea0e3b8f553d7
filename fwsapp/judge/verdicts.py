"""The judge's verdicts as the Judge page browses them: filters, labels and a readable table."""
from __future__ import annotations

import pandas as pd

from fwsapp.data.tasks import task_label


def filter_verdicts(frame: pd.DataFrame, method: str, task: str, status: str, max_factual: float) -> pd.DataFrame:
    """Verdicts narrowed by the browser's filters; 'all' keeps everything for that filter."""
    keep = pd.Series(True, index=frame.index)
    for column, wanted in (("method", method), ("task", task), ("status", status)):
        if wanted != "all":
            keep &= frame[column] == wanted
    if max_factual < 5:
        factual = frame.scores_watermarked.map(lambda scores: None if _missing(scores) else scores[2])
        keep &= factual.notna() & (factual <= max_factual)
    return frame[keep].reset_index(drop=True)


def _missing(scores) -> bool:
    """NULL score arrays come back from DuckDB as None, NaN or pd.NA."""
    return scores is None or not hasattr(scores, "__len__")


TRIPLE = "coherence, relevance, factual accuracy"  # the order of every score triple


def scores_text(scores, status: str) -> str:
    """A text's scores as a verdict shows them; none with the verdict's status (a pair the judge never answered is
    "unreachable", not "failed", which is an answer that did not parse)."""
    if _missing(scores):
        return f"none ({status})"
    return " / ".join(f"{value:g}" for value in scores) + " (coherence / relevance / factual accuracy)"


def verdict_table(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "run": frame.run_id, "method": frame.method, "task": frame.task.map(task_label), "sample": frame.sample_idx,
        "judge": frame.judge_model, "A is": frame.watermarked_first.map({True: "watermarked", False: "unwatermarked"}),
        "status": frame.status, f"watermarked ({TRIPLE})": frame.scores_watermarked.map(_short_scores),
        f"unwatermarked ({TRIPLE})": frame.scores_unwatermarked.map(_short_scores), "reason": frame.reason,
    })


def _short_scores(scores) -> str:
    return "–" if _missing(scores) else ", ".join(f"{value:g}" for value in scores)


def verdict_label(row) -> str:
    return f"{row.method} · {task_label(row.task)} · sample {row.sample_idx} · {row.judge_model} · {row.status}"
