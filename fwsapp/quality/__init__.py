"""Text-quality metrics, one module each. Each takes lists of strings and returns one value per item."""
from __future__ import annotations

import pandas as pd


def main_config(rows: pd.DataFrame) -> str | None:
    """The config with the most values, when a metric was computed under several (two oracles, say)."""
    if rows.empty:
        return None
    counts = rows.groupby("config").size()
    return str(counts.sort_values(ascending=False, kind="stable").index[0])


def main_config_rows(metrics: pd.DataFrame) -> pd.DataFrame:
    """Each run's metric values under that metric's main config only, so no mean mixes two oracles."""
    if metrics.empty:
        return metrics
    counts = metrics.groupby(["run_id", "metric", "config"], as_index=False).size()
    main = counts.sort_values("size", ascending=False, kind="stable").drop_duplicates(["run_id", "metric"])
    return metrics.merge(main[["run_id", "metric", "config"]], on=["run_id", "metric", "config"])
