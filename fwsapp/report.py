"""The headless report: one JSON object per run. Parts not computed yet (quality, judge, entities) are null."""
from __future__ import annotations

import pandas as pd

from fwsapp import detection
from fwsapp.store import Store


def run_detection(scores: pd.DataFrame, direction: str) -> dict | None:
    """Detection summary for one run's scores: watermarked texts are positives, unwatermarked negatives."""
    if scores.empty:
        return None
    positives = scores.loc[scores.text_kind == "watermarked", "score"].dropna()
    negatives = scores.loc[scores.text_kind == "unwatermarked", "score"].dropna()
    return detection.summary(positives, negatives, direction)


def build_report(store: Store) -> dict:
    runs = store.runs()
    scores = store.detections()
    entries = []
    for run in runs.sort_values("created").itertuples():
        run_scores = scores[(scores.run_id == run.run_id) & (scores.detector == run.method)]
        entries.append({
            "run_id": run.run_id,
            "method": run.method,
            "model": run.model,
            "task": run.task,
            "n": int(run.samples_done),
            "imported": bool(run.imported),
            "status": run.status,
            "detection": run_detection(run_scores, run.score_direction),
            "quality": None,
            "judge": None,
            "entities": None,
        })
    return {"runs": entries}
