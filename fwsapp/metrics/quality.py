"""Quality metrics for a run's texts, as rows of the metrics table, and their per-run means."""
from __future__ import annotations

import pandas as pd

from fwsapp.metrics import f1, rouge

GENERATED_KINDS = ("watermarked", "unwatermarked")
REPORT_METRICS = ("ppl", "simcse", "rouge2", "rougeL", "f1")


def text_metric_rows(generations: list[dict], task_name: str) -> list[dict]:
    """ROUGE-2/L for every task and token F1 for QA, of each generated text against its reference."""
    rows = []
    references = [row["reference"] for row in generations]
    for kind in GENERATED_KINDS:
        outputs = [row[f"{kind}_text"] or "" for row in generations]
        values = rouge.rouge(outputs, references)
        if task_name == "qa":
            values["f1"] = f1.f1(outputs, references)
        for metric, series in values.items():
            config = f1.CONFIG if metric == "f1" else rouge.CONFIG
            rows.extend(
                {"sample_idx": row["sample_idx"], "text_kind": kind, "metric": metric, "config": config, "value": value}
                for row, value in zip(generations, series)
            )
    return rows


def quality_block(metrics: pd.DataFrame) -> dict:
    """The report's quality block for one run: mean per metric and text kind; null where not computed."""
    block = {}
    for metric in REPORT_METRICS:
        rows = metrics[metrics.metric == metric]
        block[metric] = {
            kind: (float(rows.loc[rows.text_kind == kind, "value"].mean()) if (rows.text_kind == kind).any() else None)
            for kind in GENERATED_KINDS
        }
    block["factuality"] = {"name": None, "watermarked": None, "unwatermarked": None}
    return block
