"""Re-detection sets: a run's texts scored again under a method, its parameters and a tokenizer."""
from __future__ import annotations

import json

import pandas as pd

from fwsapp.store.core import StoreCore, insert_rows, now


class DetectionSets(StoreCore):
    # -- re-detection ----------------------------------------------------------------------------
    def ensure_detection_set(self, set_id: str, run_id: str, method: str, params: dict, tokenizer: str,
                             score_direction: str) -> None:
        if self.row("SELECT 1 FROM detection_sets WHERE set_id = ?", [set_id]):
            return
        with self.transaction() as cursor:
            if not cursor.execute("SELECT 1 FROM detection_sets WHERE set_id = ?", [set_id]).fetchone():
                cursor.execute(
                    "INSERT INTO detection_sets VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [set_id, run_id, method, json.dumps(params, sort_keys=True), tokenizer, score_direction, now()],
                )

    def write_redetections(self, set_id: str, run_id: str, rows: list[dict]) -> None:
        """One transaction of a detection set's scores (detection records; the set names the detector)."""
        with self.transaction() as cursor:
            insert_rows(cursor, "redetections", run_id, [
                {"set_id": set_id, **{key: value for key, value in row.items() if key != "detector"}} for row in rows
            ])

    def detection_sets(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        query = "SELECT * FROM detection_sets"
        if run_ids is None:
            return self.frame(query + " ORDER BY run_id, created")
        return self.frame(query + " WHERE run_id IN (SELECT unnest(?)) ORDER BY run_id, created",
                                     [run_ids])

    def redetections(self, set_ids: list[str]) -> pd.DataFrame:
        return self.frame(
            "SELECT * FROM redetections WHERE set_id IN (SELECT unnest(?)) ORDER BY set_id, sample_idx, text_kind",
            [set_ids],
        )
