"""Text-quality metrics, one module each. Each takes lists of strings and returns one value per item."""
from __future__ import annotations

import pandas as pd


def main_config_rows(metrics: pd.DataFrame, current: set[tuple[str, str, str]]) -> pd.DataFrame:
    """Each run's metric values under one config only, so no mean mixes two oracles: the config `score` writes now
    where it has values (`current`: (run, metric, config)), else the one with the most. Values computed under an
    earlier version of a recognizer or of the facts are superseded, not an alternative: by count alone they won until
    the new version covered more samples, and on a tie by name ("v4" before "v7")."""
    if metrics.empty:
        return metrics
    counts = metrics.groupby(["run_id", "metric", "config"], as_index=False).size()
    counts["current"] = [key in current for key in zip(counts.run_id, counts.metric, counts.config)]
    main = counts.sort_values(["current", "size"], ascending=False, kind="stable").drop_duplicates(["run_id", "metric"])
    return metrics.merge(main[["run_id", "metric", "config"]], on=["run_id", "metric", "config"])
