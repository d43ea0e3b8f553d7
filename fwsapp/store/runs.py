"""Runs, their generations and detection scores: creating, listing, deleting, and moving rows in and out."""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd

from fwsapp import in_words
from fwsapp.store.core import PER_RUN_TABLES, StoreCore, StoreError, insert_rows, now, require_run, sql_string


class RunTables(StoreCore):
    # -- runs ----------------------------------------------------------------------------------
    def add_run(self, run_id: str, run: dict, tables: dict[str, list[dict]]) -> None:
        """Write a new run with all its rows (an import) in one transaction; an existing run is never
        replaced, so nothing computed for it since is lost."""
        with self.transaction() as cursor:
            _insert_run(cursor, run_id, run)
            for table, rows in tables.items():
                if rows:
                    insert_rows(cursor, table, run_id, rows)

    def ensure_run(
        self,
        run_id: str,
        config: dict,
        *,
        model: str | None,
        task: str,
        method: str,
        params: dict,
        seed: int | None,
        n: int,
        imported: bool = False,
        score_direction: str = "higher",
    ) -> None:
        """Create the run if it is new; a run that exists keeps its rows (and the revision stays)."""
        if self.has_run(run_id):
            return
        with self.transaction() as cursor:
            if not cursor.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchone():
                _insert_run(cursor, run_id, {
                    "config": config, "model": model, "task": task, "method": method, "params": params,
                    "seed": seed, "n": n, "imported": imported, "score_direction": score_direction,
                })

    def has_run(self, run_id: str) -> bool:
        return bool(self.rows("SELECT 1 FROM runs WHERE run_id = ?", [run_id]))

    def set_status(self, run_id: str, status: str, reason: str | None = None) -> None:
        """The run's status, with the reason when it failed (cleared by any other status)."""
        run = self.run(run_id)
        if run["status"] == status and (run["status_reason"] or None) == reason:
            return
        with self.transaction() as cursor:
            cursor.execute("UPDATE runs SET status = ?, status_reason = ? WHERE run_id = ?", [status, reason, run_id])

    def runs(self) -> pd.DataFrame:
        return self.frame(
            """SELECT r.run_id, r.method, r.model, r.task, r.n, r.imported, r.status, r.status_reason, r.created,
                      r.seed, r.params, r.score_direction, count(g.sample_idx) AS samples_done,
                      json_extract_string(r.config, '$.tokenizer') AS tokenizer,
                      json_extract_string(r.config, '$.server') AS server
               FROM runs r LEFT JOIN generations g USING (run_id)
               GROUP BY ALL ORDER BY r.created DESC"""
        )

    def delete_run(self, run_id: str) -> dict[str, int]:
        """Delete a run with every row that belongs to it (texts, scores, verdicts, analyses, ratings, detection sets),
        in one transaction; returns the rows deleted per table. An unknown id is an error, and deletes nothing."""
        self.run(run_id)
        tables = (*PER_RUN_TABLES, "entity_verdicts", "fact_verdicts", "human_items", "human_ratings", "human_skips",
                  "detection_sets", "attack_sets", "runs")
        deleted = {}
        with self.transaction() as cursor:
            studies = [repr(row[0]) for row in cursor.execute(
                "SELECT DISTINCT s.name FROM study_items t JOIN studies s USING (study_id) WHERE t.run_id = ? "
                "ORDER BY s.name", [run_id]).fetchall()]
            if studies:  # its raters' items, assignments and pending work would be left pointing at nothing
                raise StoreError(f"Run {run_id} is in the {'study' if len(studies) == 1 else 'studies'} "
                                 f"{in_words(studies)}: its "
                                 "raters' items would be lost. Nothing was deleted; a run a study uses stays while the "
                                 "study does (`python -m fwsapp study delete --study NAME`, or the Study page, deletes "
                                 "a study).")
            for table in tables:
                deleted[table] = cursor.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id]).fetchone()[0]
        return deleted

    def coverage(self, left_out_judges: tuple[str, ...], recognizers: tuple[str, ...]) -> dict[str, int]:
        """How many runs there are, and how many have parsed verdicts (of a judge not in `left_out_judges`), entity
        analyses by a recognizer labelled as one of `recognizers` (the current versions: an analysis by an earlier one
        is kept, but its run is not analysed by what runs now), entropies."""
        count = "SELECT count(DISTINCT run_id) FROM "
        judged = "judgments WHERE status = 'ok'" + " AND judge_model <> ?" * len(left_out_judges)
        analysed = "entity_analyses WHERE split_part(config, ';', 1) IN (SELECT unnest(?))"  # `recognizer_of`
        return {name: self.row(count + query, list(parameters))[0] for name, query, parameters in (
            ("runs", "runs", ()), ("judged", judged, left_out_judges), ("analysed", analysed, (list(recognizers),)),
            ("entropies", "entropies", ()))}

    def metric_names(self) -> dict[str, set[str]]:
        """Per run, the names of the metrics it has values of."""
        rows = self.frame("SELECT run_id, list(DISTINCT metric) AS names FROM metrics GROUP BY run_id")
        return {row.run_id: set(row.names) for row in rows.itertuples()}

    def run(self, run_id: str) -> dict:
        row = self.frame("SELECT * FROM runs WHERE run_id = ?", [run_id])
        if row.empty:
            raise StoreError(f"No run '{run_id}' in {self.path}. `python -m fwsapp runs` lists them.")
        record = row.iloc[0].to_dict()
        record["config"] = json.loads(record["config"])
        record["params"] = json.loads(record["params"])
        record["tokenizer"] = record["config"].get("tokenizer")  # a served run's, where it was named
        record["server"] = record["config"].get("server")  # as `runs()` gives it
        return record

    def run_fit(self, run_id: str) -> dict | None:
        """What the run's method fitted on its references (k-SemStamp's clusters), or None."""
        row = self.row("SELECT fitted FROM run_fits WHERE run_id = ?", [run_id])
        return json.loads(row[0]) if row else None

    def keep_run_fit(self, run_id: str, fitted: dict) -> dict:
        """Keep the run's fit unless it has one (another process fitted first); returns the one kept."""
        with self.transaction() as cursor:
            require_run(cursor, run_id)
            cursor.execute("INSERT OR IGNORE INTO run_fits VALUES (?, ?, ?)", [run_id, json.dumps(fitted), now()])
        return self.run_fit(run_id)

    # -- generations and detections ------------------------------------------------------------
    def finished_samples(self, run_id: str) -> set[int]:
        return {row[0] for row in self.rows("SELECT sample_idx FROM generations WHERE run_id = ?", [run_id])}

    def write_batch(self, run_id: str, generations: list[dict], detections: list[dict]) -> None:
        """Write one batch of generations and their detection scores atomically (none for a deleted run)."""
        with self.transaction() as cursor:
            if generations:
                insert_rows(cursor, "generations", run_id, generations)
            if detections:
                insert_rows(cursor, "detections", run_id, detections)

    def export_rows(self, table: str, run_ids: list[str], path: Path) -> int:
        """A per-run table's rows of these runs, to a Parquet file; returns the row count."""
        if table not in PER_RUN_TABLES:
            raise ValueError(f"not a per-run table: {table}")
        query = f"SELECT * FROM {table} WHERE run_id IN (SELECT unnest(?)) ORDER BY ALL"
        with self.cursor() as cursor:
            cursor.execute(f"COPY ({query}) TO '{sql_string(path)}' (FORMAT parquet, COMPRESSION zstd)", [run_ids])
            return cursor.execute(f"SELECT count(*) FROM ({query})", [run_ids]).fetchone()[0]

    def import_rows(self, tables: dict[str, Path]) -> None:
        """Rows of per-run tables from Parquet files (`export_rows`), in one transaction; rows already stored are kept."""
        with self.transaction() as cursor:
            for table, path in tables.items():
                if table not in PER_RUN_TABLES:
                    raise ValueError(f"not a per-run table: {table}")
                cursor.execute(f"INSERT OR IGNORE INTO {table} BY NAME SELECT * FROM read_parquet('{sql_string(path)}')")

    def write_rows(self, table: str, run_id: str, rows: list[dict]) -> None:
        """Insert or replace rows of a per-run table in one transaction."""
        if table not in PER_RUN_TABLES:
            raise ValueError(f"not a per-run table: {table}")
        if not rows:
            return
        with self.transaction() as cursor:
            insert_rows(cursor, table, run_id, rows)

    def generated_configs(self) -> dict[str, dict]:
        """Each generated (not imported) run's config, by run id."""
        rows = self.rows("SELECT run_id, config FROM runs WHERE NOT imported")
        return {run_id: json.loads(config) for run_id, config in rows}

    def generation_rows(self, run_id: str, sample_indices: list[int]) -> list[dict]:
        """Some of a run's generations rows, in sample order."""
        return self.frame(
            "SELECT * FROM generations WHERE run_id = ? AND sample_idx IN (SELECT unnest(?)) ORDER BY sample_idx",
            [run_id, sample_indices]).to_dict("records")

    def generations(self, run_id: str) -> pd.DataFrame:
        return self.frame("SELECT * FROM generations WHERE run_id = ? ORDER BY sample_idx", [run_id])

    def generation_ids(self, run_id: str) -> pd.DataFrame:
        """The token ids of the run's two texts per prompt, and the watermarked answer's next-token entropies, without
        the texts."""
        return self.frame("SELECT sample_idx, watermarked_ids, unwatermarked_ids, watermarked_entropy FROM generations "
                          "WHERE run_id = ? "
                          "ORDER BY sample_idx", [run_id])

    def detections(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        """Scores, without the statistics after every token (`prefix_curves`), which few readers need."""
        return self._per_run("detections", run_ids, exclude=("prefix_statistics",))

    def prefix_curves(self, run_id: str, detector: str) -> pd.DataFrame:
        """A run's stored statistics after every token (sample_idx, text_kind, prefix_statistics) under `detector`."""
        return self.frame("SELECT sample_idx, text_kind, prefix_statistics FROM detections WHERE run_id = ? AND detector = ? "
                          "ORDER BY sample_idx, text_kind", [run_id, detector])

    def metrics(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        return self._per_run("metrics", run_ids)

    def judgments(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        return self._per_run("judgments", run_ids)


def generated_here(run) -> bool:
    """Whether a run's texts came from a model fwsapp loads (`run()`'s record or a `runs()` row): not imported, and not
    answered by a serving engine. Only such a run's own model is here to read its texts again (perplexity, entropies);
    the others get them from a model named for them."""
    return not bool(run["imported"]) and not isinstance(run.get("server"), str)


def detection_record(sample_idx: int, text_kind: str, detector: str, score: float, *, z=None, p=None,
                     num_tokens_scored: int | None = None, prefix_statistics: list[float] | None = None) -> dict:
    """A row of the detections table."""
    return {"sample_idx": sample_idx, "text_kind": text_kind, "detector": detector, "score": score,
            "z": z, "p": p, "num_tokens_scored": num_tokens_scored, "prefix_statistics": prefix_statistics}


def _insert_run(cursor: duckdb.DuckDBPyConnection, run_id: str, run: dict) -> None:
    cursor.execute(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run_id, run_id, json.dumps(run["config"], sort_keys=True), run["model"], run["task"], run["method"],
            json.dumps(run["params"], sort_keys=True), run.get("seed"), run["n"], run.get("imported", False),
            run.get("score_direction", "higher"), run.get("status", "running"), now(), None,
        ],
    )
