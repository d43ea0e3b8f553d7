"""Re-detection sets: a run's texts scored again under a method, its parameters and a tokenizer."""
from __future__ import annotations

import json

import pandas as pd

from fwsapp.store.core import StoreCore, insert_rows, now, require_run


class DetectionSets(StoreCore):
    # -- re-detection ----------------------------------------------------------------------------
    def ensure_detection_set(self, set_id: str, run_id: str, method: str, params: dict, tokenizer: str,
                             score_direction: str, attack_set_id: str | None = None,
                             normalize: str | None = None, window: int | None = None,
                             deduplicate: bool = False) -> None:
        if self.row("SELECT 1 FROM detection_sets WHERE set_id = ?", [set_id]):
            return
        with self.transaction() as cursor:
            require_run(cursor, run_id)
            if not cursor.execute("SELECT 1 FROM detection_sets WHERE set_id = ?", [set_id]).fetchone():
                cursor.execute(
                    "INSERT INTO detection_sets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [set_id, run_id, method, json.dumps(params, sort_keys=True), tokenizer, score_direction, now(),
                     attack_set_id, normalize, window, deduplicate],
                )

    def write_redetections(self, set_id: str, run_id: str, rows: list[dict]) -> None:
        """One transaction of a detection set's scores (detection records; the set names the detector)."""
        with self.transaction() as cursor:
            insert_rows(cursor, "redetections", run_id, [
                {"set_id": set_id, **{key: value for key, value in row.items() if key != "detector"}} for row in rows
            ])

    def detection_sets(self, run_ids: list[str] | None = None, attacked: bool = False) -> pd.DataFrame:
        """A run's detection sets of its own texts, or (`attacked`) of its attacked texts."""
        query = f"SELECT * FROM detection_sets WHERE attack_set_id IS {'NOT ' if attacked else ''}NULL"
        if run_ids is None:
            return self.frame(query + " ORDER BY run_id, created")
        return self.frame(query + " AND run_id IN (SELECT unnest(?)) ORDER BY run_id, created", [run_ids])

    # -- attacks ---------------------------------------------------------------------------------------------
    def write_attacked_texts(self, attack_set_id: str, run_id: str, rows: list[dict], attack: str, params: dict,
                             seed: int, model: str | None = None) -> None:
        """One transaction of attacked texts, with their attack set's row the first time: an attack that wrote no
        text (refused, failed, cancelled at once) leaves no empty set behind. A sample already stored is left as it
        is (a resumed attack)."""
        with self.transaction() as cursor:
            if not cursor.execute("SELECT 1 FROM attack_sets WHERE attack_set_id = ?", [attack_set_id]).fetchone():
                cursor.execute("INSERT INTO attack_sets VALUES (?, ?, ?, ?, ?, ?, ?)",
                               [attack_set_id, run_id, attack, json.dumps(params, sort_keys=True), seed, model, now()])
            stored = {row[0] for row in cursor.execute(
                "SELECT sample_idx FROM attacked_texts WHERE attack_set_id = ?", [attack_set_id]).fetchall()}
            new = [{"attack_set_id": attack_set_id, **row} for row in rows if row["sample_idx"] not in stored]
            if new:
                insert_rows(cursor, "attacked_texts", run_id, new)

    def write_changes(self, attack_set_id: str, rows: list[dict]) -> None:
        """What each attacked text changed, measured after detection: `rows` of sample_idx with rouge_l,
        similarity, mentions_clean, mentions_kept, mentions_introduced and fact_survival (JSON: kind -> [the clean
        text's facts, those the attacked text keeps])."""
        columns = ("rouge_l", "similarity", "mentions_clean", "mentions_kept", "mentions_introduced", "fact_survival")
        with self.transaction() as cursor:
            cursor.executemany(
                f"UPDATE attacked_texts SET {', '.join(f'{column} = ?' for column in columns)} "
                "WHERE attack_set_id = ? AND sample_idx = ?",
                [[row[column] for column in columns] + [attack_set_id, row["sample_idx"]] for row in rows])

    def attack_sets(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        query = "SELECT * FROM attack_sets"
        if run_ids is None:
            return self.frame(query + " ORDER BY run_id, created")
        return self.frame(query + " WHERE run_id IN (SELECT unnest(?)) ORDER BY run_id, created", [run_ids])

    def attacked_texts(self, attack_set_ids: list[str]) -> pd.DataFrame:
        return self.frame("SELECT * FROM attacked_texts WHERE attack_set_id IN (SELECT unnest(?)) "
                          "ORDER BY attack_set_id, sample_idx", [attack_set_ids])

    def redetections(self, set_ids: list[str], curves: bool = False) -> pd.DataFrame:
        """Sets' scores; with `curves`, each text's statistic after every token too."""
        return self.frame(
            f"SELECT *{'' if curves else ' EXCLUDE (prefix_statistics)'} FROM redetections WHERE set_id IN "
            "(SELECT unnest(?)) ORDER BY set_id, sample_idx, text_kind",
            [set_ids],
        )

    def complete_redetections(self, set_id: str, rows: list[dict], column: str) -> None:
        """What a set kept only later (`prefix_statistics`, `evidence`) for texts it scored before: rows of sample_idx,
        text_kind and the column; their scores stay as they are."""
        if column not in ("prefix_statistics", "evidence"):
            raise ValueError(f"{column} is not completed later: only prefix_statistics and evidence are.")
        if not rows:
            return
        with self.transaction() as cursor:
            cursor.executemany(
                f"UPDATE redetections SET {column} = ? WHERE set_id = ? AND sample_idx = ? AND text_kind = ?",
                [[row[column], set_id, row["sample_idx"], row["text_kind"]] for row in rows])
