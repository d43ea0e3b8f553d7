"""DuckDB store: runs, generations and detection scores, in one file under cache/.

One connection per process; each thread works through its own cursor (DuckDB connections are not
thread-safe, cursors are). Every batch is written in one transaction, so a killed job leaves whole
batches behind and a re-run resumes exactly where it stopped.
"""
from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pandas as pd

from fwsapp import one_line
from fwsapp.paths import DEFAULT_DB

SCHEMA_VERSION = 8

# Each entry migrates the schema from version i to i + 1; append, never edit.
MIGRATIONS = [
    """
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY,
        config_hash VARCHAR NOT NULL,
        config JSON NOT NULL,
        model VARCHAR,
        task VARCHAR NOT NULL,
        method VARCHAR NOT NULL,
        params JSON NOT NULL,
        seed BIGINT,
        n INTEGER NOT NULL,
        imported BOOLEAN NOT NULL DEFAULT FALSE,
        score_direction VARCHAR NOT NULL DEFAULT 'higher',
        status VARCHAR NOT NULL,
        created TIMESTAMP NOT NULL
    );
    CREATE TABLE generations (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        prompt VARCHAR NOT NULL,
        reference VARCHAR,
        unwatermarked_text VARCHAR,
        watermarked_text VARCHAR,
        unwatermarked_ids INTEGER[],
        watermarked_ids INTEGER[],
        unwatermarked_entropy FLOAT[],
        watermarked_entropy FLOAT[],
        unwatermarked_seconds DOUBLE,
        watermarked_seconds DOUBLE,
        PRIMARY KEY (run_id, sample_idx)
    );
    CREATE TABLE detections (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        detector VARCHAR NOT NULL,
        score DOUBLE,
        z DOUBLE,
        p DOUBLE,
        num_tokens_scored INTEGER,
        PRIMARY KEY (run_id, sample_idx, text_kind, detector)
    );
    """,
    # 2: per-sample quality metrics, and judge verdicts (raw output always kept, with its parse status).
    """
    CREATE TABLE metrics (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        metric VARCHAR NOT NULL,
        config VARCHAR NOT NULL,
        value DOUBLE,
        PRIMARY KEY (run_id, sample_idx, text_kind, metric, config)
    );
    CREATE TABLE judgments (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        judge_model VARCHAR NOT NULL,
        prompt_version VARCHAR NOT NULL,
        watermarked_first BOOLEAN NOT NULL,
        texts_hash VARCHAR NOT NULL,
        backend VARCHAR,
        raw_output VARCHAR,
        status VARCHAR NOT NULL,
        reason VARCHAR,
        scores_watermarked DOUBLE[],
        scores_unwatermarked DOUBLE[],
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        seconds DOUBLE,
        created TIMESTAMP,
        PRIMARY KEY (run_id, sample_idx, judge_model, prompt_version, watermarked_first, texts_hash)
    );
    """,
    # 3: human evaluation: the sampled items (with their stored A/B order), ratings, and skips.
    """
    CREATE TABLE human_items (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        watermarked_first BOOLEAN NOT NULL,
        created TIMESTAMP NOT NULL,
        PRIMARY KEY (run_id, sample_idx)
    );
    CREATE TABLE human_ratings (
        rater VARCHAR NOT NULL,
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        scores_watermarked DOUBLE[] NOT NULL,
        scores_unwatermarked DOUBLE[] NOT NULL,
        comment VARCHAR,
        created TIMESTAMP NOT NULL,
        PRIMARY KEY (rater, run_id, sample_idx)
    );
    CREATE TABLE human_skips (
        rater VARCHAR NOT NULL,
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        created TIMESTAMP NOT NULL,
        PRIMARY KEY (rater, run_id, sample_idx)
    );
    """,
    # 4: why factuality degrades: teacher-forced entropies of texts the generator did not write (references,
    # imports), disease entities per text with the introduced/hallucinated verdicts, and clinicians' verdicts.
    """
    CREATE TABLE entropies (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        model VARCHAR NOT NULL,
        token_ids INTEGER[],
        token_spans INTEGER[][],
        entropy FLOAT[],
        PRIMARY KEY (run_id, sample_idx, text_kind, model)
    );
    CREATE TABLE entities (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        config VARCHAR NOT NULL,
        start_char INTEGER NOT NULL,
        end_char INTEGER NOT NULL,
        entity VARCHAR NOT NULL,
        normalized VARCHAR NOT NULL,
        introduced BOOLEAN NOT NULL,
        hallucinated BOOLEAN NOT NULL,
        closest_reference VARCHAR,
        similarity DOUBLE,
        token_indices INTEGER[],
        entropy DOUBLE,
        PRIMARY KEY (run_id, sample_idx, text_kind, config, start_char)
    );
    CREATE TABLE entity_analyses (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        config VARCHAR NOT NULL,
        token_counts INTEGER[],
        PRIMARY KEY (run_id, sample_idx, config)
    );
    CREATE TABLE entity_verdicts (
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        start_char INTEGER NOT NULL,
        rater VARCHAR NOT NULL,
        verdict VARCHAR NOT NULL,
        created TIMESTAMP NOT NULL,
        PRIMARY KEY (run_id, sample_idx, text_kind, start_char, rater)
    );
    """,
    # 5: runs generated before the green-list generator became a parameter used the CPU one; re-detection
    # sets: a run's texts scored again under a method, its parameters and a tokenizer, beside what is stored.
    """
    UPDATE runs SET params = json_merge_patch(params, '{"rng": "cpu"}')
    WHERE method IN ('KGW', 'SWEET', 'DiPmark') AND NOT imported AND json_extract(params, '$.rng') IS NULL;
    CREATE TABLE detection_sets (
        set_id VARCHAR PRIMARY KEY,
        run_id VARCHAR NOT NULL,
        method VARCHAR NOT NULL,
        params JSON NOT NULL,
        tokenizer VARCHAR NOT NULL,
        score_direction VARCHAR NOT NULL,
        created TIMESTAMP NOT NULL
    );
    CREATE TABLE redetections (
        set_id VARCHAR NOT NULL,
        run_id VARCHAR NOT NULL,
        sample_idx INTEGER NOT NULL,
        text_kind VARCHAR NOT NULL,
        score DOUBLE,
        z DOUBLE,
        p DOUBLE,
        num_tokens_scored INTEGER,
        PRIMARY KEY (set_id, sample_idx, text_kind)
    );
    """,
    # 6: token counts per text kind stored by name, not by position in a list.
    """
    ALTER TABLE entity_analyses ADD COLUMN reference_tokens INTEGER;
    ALTER TABLE entity_analyses ADD COLUMN unwatermarked_tokens INTEGER;
    ALTER TABLE entity_analyses ADD COLUMN watermarked_tokens INTEGER;
    UPDATE entity_analyses SET reference_tokens = token_counts[1], unwatermarked_tokens = token_counts[2],
                               watermarked_tokens = token_counts[3];
    ALTER TABLE entity_analyses DROP COLUMN token_counts;
    """,
    # 7: the unwatermarked text's SimCSE was stored as 1.0, its similarity to itself: a definition, not a
    # measurement, that showed as "best" and lifted the unwatermarked Auto-FWS. Dropped; nothing is lost.
    """
    DELETE FROM metrics WHERE metric = 'simcse' AND text_kind = 'unwatermarked';
    """,
    # 8: why a run failed (a grid unit that failed for good), beside its status.
    """
    ALTER TABLE runs ADD COLUMN status_reason VARCHAR;
    """,
]

# Each text kind and the generations column that holds it.
TEXT_COLUMNS = {"watermarked": "watermarked_text", "unwatermarked": "unwatermarked_text", "reference": "reference"}
PER_RUN_TABLES = ("generations", "detections", "metrics", "judgments", "entropies", "entities", "entity_analyses",
                  "redetections")


class StoreError(RuntimeError):
    """The database cannot be used; the message says why and what to do."""


class Store:
    def __init__(self, path: str | Path = DEFAULT_DB, read_only: bool = False):
        self.path = Path(path)
        _check_database_file(self.path)
        new = not self.path.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._connection = duckdb.connect(str(self.path), read_only=read_only)
        except (OSError, duckdb.Error) as error:
            if new and not self.path.exists():  # never made: say so, not "damaged"
                raise StoreError(f"The database {self.path} cannot be created there ({one_line(error)}): pass --db with "
                                 "another path.") from None
            if "lock" in str(error).lower():
                raise StoreError(
                    f"The database {self.path} is in use by another process (is the app or another "
                    f"`python -m fwsapp` command running?). Stop it, or pass --db with another file."
                ) from None
            raise self._damaged(error) from None
        self._local = threading.local()
        # One write transaction at a time in this process: every write bumps the revision row, so two of the app's
        # jobs writing at once made DuckDB abort one ("Conflict on update"). Batches are short; waiting is cheap.
        self._writing = threading.Lock()
        self._read_only = read_only
        try:
            self.schema_version() if read_only else self._migrate()
        except duckdb.Error as error:
            self._connection.close()
            raise self._damaged(error) from None

    def _damaged(self, error: Exception) -> StoreError:
        return StoreError(
            f"The database {self.path} cannot be opened ({one_line(error)}). It may be truncated or damaged: "
            f"restore it from a copy, or move it aside and pass --db with a new file."
        )

    # -- connections ---------------------------------------------------------------------------
    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor on the shared connection."""
        cursor = getattr(self._local, "cursor", None)
        if cursor is None:
            cursor = self._connection.cursor()
            self._local.cursor = cursor
        return cursor

    @contextmanager
    def transaction(self):
        """One write transaction; it bumps the revision, so the app's cached queries see the change."""
        cursor = self.cursor()
        with self._writing:
            cursor.begin()
            try:
                yield cursor
                cursor.execute("UPDATE meta SET value = CAST(CAST(value AS BIGINT) + 1 AS VARCHAR) WHERE key = 'revision'")
            except BaseException:
                cursor.rollback()
                raise
            cursor.commit()

    def close(self) -> None:
        self._connection.close()

    def schema_version(self) -> int:
        if not self._read_only:
            self.cursor().execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
            self.cursor().execute("INSERT OR IGNORE INTO meta VALUES ('revision', '0')")
        row = self.cursor().execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"The database {self.path} has schema version {version}, newer than this app's "
                f"{SCHEMA_VERSION}. Update fwsapp, or use another --db."
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            with self.transaction() as cursor:
                cursor.execute(MIGRATIONS[target - 1])
                cursor.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(target)]
                )

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
        return bool(self.cursor().execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchall())

    def set_status(self, run_id: str, status: str, reason: str | None = None) -> None:
        """The run's status, with the reason when it failed (cleared by any other status)."""
        run = self.run(run_id)
        if run["status"] == status and (run["status_reason"] or None) == reason:
            return
        with self.transaction() as cursor:
            cursor.execute("UPDATE runs SET status = ?, status_reason = ? WHERE run_id = ?", [status, reason, run_id])

    def runs(self) -> pd.DataFrame:
        return self.cursor().execute(
            """SELECT r.run_id, r.method, r.model, r.task, r.n, r.imported, r.status, r.status_reason, r.created,
                      r.seed, r.params, r.score_direction, count(g.sample_idx) AS samples_done
               FROM runs r LEFT JOIN generations g USING (run_id)
               GROUP BY ALL ORDER BY r.created DESC"""
        ).df()

    def delete_run(self, run_id: str) -> dict[str, int]:
        """Delete a run with every row that belongs to it (texts, scores, verdicts, analyses, ratings, detection sets),
        in one transaction; returns the rows deleted per table. An unknown id is an error, and deletes nothing."""
        self.run(run_id)
        tables = (*PER_RUN_TABLES, "entity_verdicts", "human_items", "human_ratings", "human_skips", "detection_sets", "runs")
        deleted = {}
        with self.transaction() as cursor:
            for table in tables:
                deleted[table] = cursor.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id]).fetchone()[0]
        return deleted

    def coverage(self) -> dict[str, int]:
        """How many runs there are, and how many have the model-based quality metrics (similarity; ROUGE and F1 come
        with every import), parsed verdicts, entity analyses, entropies."""
        count = "SELECT count(DISTINCT run_id) FROM "
        cursor = self.cursor()
        return {name: cursor.execute(count + query).fetchone()[0] for name, query in (
            ("runs", "runs"), ("scored", "metrics WHERE metric = 'simcse'"), ("judged", "judgments WHERE status = 'ok'"),
            ("analysed", "entity_analyses"), ("entropies", "entropies"))}

    def run(self, run_id: str) -> dict:
        row = self.cursor().execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).fetchdf()
        if row.empty:
            raise StoreError(f"No run '{run_id}' in {self.path}. `python -m fwsapp runs` lists them.")
        record = row.iloc[0].to_dict()
        record["config"] = json.loads(record["config"])
        record["params"] = json.loads(record["params"])
        return record

    # -- generations and detections ------------------------------------------------------------
    def finished_samples(self, run_id: str) -> set[int]:
        rows = self.cursor().execute(
            "SELECT sample_idx FROM generations WHERE run_id = ?", [run_id]
        ).fetchall()
        return {row[0] for row in rows}

    def write_batch(self, run_id: str, generations: list[dict], detections: list[dict]) -> None:
        """Write one batch of generations and their detection scores atomically; a run deleted meanwhile gets none
        (rows no run owns could be neither listed nor deleted)."""
        with self.transaction() as cursor:
            if not cursor.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchall():
                raise StoreError(f"Run {run_id} was deleted while it was being generated: its last batch is not kept.")
            if generations:
                insert_rows(cursor, "generations", run_id, generations)
            if detections:
                insert_rows(cursor, "detections", run_id, detections)

    def export_rows(self, table: str, run_ids: list[str], path: Path) -> int:
        """A per-run table's rows of these runs, to a Parquet file; returns the row count."""
        if table not in PER_RUN_TABLES:
            raise ValueError(f"not a per-run table: {table}")
        query = f"SELECT * FROM {table} WHERE run_id IN (SELECT unnest(?)) ORDER BY ALL"
        cursor = self.cursor()
        cursor.execute(f"COPY ({query}) TO '{_sql_string(path)}' (FORMAT parquet, COMPRESSION zstd)", [run_ids])
        return cursor.execute(f"SELECT count(*) FROM ({query})", [run_ids]).fetchone()[0]

    def import_rows(self, tables: dict[str, Path]) -> None:
        """Rows of per-run tables from Parquet files (`export_rows`), in one transaction; rows already stored are kept."""
        with self.transaction() as cursor:
            for table, path in tables.items():
                if table not in PER_RUN_TABLES:
                    raise ValueError(f"not a per-run table: {table}")
                cursor.execute(f"INSERT OR IGNORE INTO {table} BY NAME SELECT * FROM read_parquet('{_sql_string(path)}')")

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
        rows = self.cursor().execute("SELECT run_id, config FROM runs WHERE NOT imported").fetchall()
        return {run_id: json.loads(config) for run_id, config in rows}

    def generation_rows(self, run_id: str, sample_indices: list[int]) -> list[dict]:
        """Some of a run's generations rows, in sample order."""
        return self.cursor().execute(
            "SELECT * FROM generations WHERE run_id = ? AND sample_idx IN (SELECT unnest(?)) ORDER BY sample_idx",
            [run_id, sample_indices]).df().to_dict("records")

    def generations(self, run_id: str) -> pd.DataFrame:
        return self.cursor().execute(
            "SELECT * FROM generations WHERE run_id = ? ORDER BY sample_idx", [run_id]
        ).df()

    def detections(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        return self._per_run("detections", run_ids)

    def revision(self) -> str:
        """A counter bumped by every write transaction; keys the app's query cache. It names the file too,
        so two databases never share cached results."""
        row = self.cursor().execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()
        return f"{self.path}|{row[0] if row else 0}"

    def metrics(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        return self._per_run("metrics", run_ids)

    def judgments(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        return self._per_run("judgments", run_ids)

    def _per_run(self, table: str, run_ids: list[str] | None) -> pd.DataFrame:
        query = f"""SELECT t.*, r.method, r.model, r.task, r.score_direction
                    FROM {table} t JOIN runs r USING (run_id)"""
        if run_ids is None:
            return self.cursor().execute(query + " ORDER BY run_id, sample_idx").df()
        return self.cursor().execute(
            query + " WHERE run_id IN (SELECT unnest(?)) ORDER BY run_id, sample_idx", [run_ids]
        ).df()

    def entities(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        return self._per_run("entities", run_ids)

    def entity_analyses(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        return self._per_run("entity_analyses", run_ids)

    # -- re-detection ----------------------------------------------------------------------------
    def ensure_detection_set(self, set_id: str, run_id: str, method: str, params: dict, tokenizer: str,
                             score_direction: str) -> None:
        if self.cursor().execute("SELECT 1 FROM detection_sets WHERE set_id = ?", [set_id]).fetchone():
            return
        with self.transaction() as cursor:
            if not cursor.execute("SELECT 1 FROM detection_sets WHERE set_id = ?", [set_id]).fetchone():
                cursor.execute(
                    "INSERT INTO detection_sets VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [set_id, run_id, method, json.dumps(params, sort_keys=True), tokenizer, score_direction, _now()],
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
            return self.cursor().execute(query + " ORDER BY run_id, created").df()
        return self.cursor().execute(query + " WHERE run_id IN (SELECT unnest(?)) ORDER BY run_id, created",
                                     [run_ids]).df()

    def redetections(self, set_ids: list[str]) -> pd.DataFrame:
        return self.cursor().execute(
            "SELECT * FROM redetections WHERE set_id IN (SELECT unnest(?)) ORDER BY set_id, sample_idx, text_kind",
            [set_ids],
        ).df()

    # -- entropies and entities -------------------------------------------------------------------
    def entropy_keys(self, run_id: str, model: str) -> set[tuple[int, str]]:
        """(sample, text kind) whose teacher-forced entropies under `model` are stored."""
        rows = self.cursor().execute(
            "SELECT sample_idx, text_kind FROM entropies WHERE run_id = ? AND model = ?", [run_id, model]).fetchall()
        return {(int(sample), kind) for sample, kind in rows}

    def reuse_reference_entropies(self, run_id: str, model: str) -> int:
        """Copy into `run_id` the reference entropies under `model` that another run stored for the same prompt
        and reference (runs of several methods over the same prompts share them); returns how many. Nothing to copy
        writes nothing, so a rerun leaves the revision (and the app's caches) as they were."""
        copies = self.cursor().execute("""
                SELECT DISTINCT ON (mine.sample_idx) mine.run_id, mine.sample_idx, 'reference' AS text_kind,
                       stored.model, stored.token_ids, stored.token_spans, stored.entropy
                FROM generations mine
                JOIN generations theirs ON theirs.run_id <> mine.run_id AND theirs.prompt = mine.prompt
                     AND theirs.reference = mine.reference
                JOIN entropies stored ON stored.run_id = theirs.run_id AND stored.sample_idx = theirs.sample_idx
                     AND stored.text_kind = 'reference' AND stored.model = ?
                WHERE mine.run_id = ? AND NOT EXISTS (
                    SELECT 1 FROM entropies own WHERE own.run_id = mine.run_id AND own.sample_idx = mine.sample_idx
                    AND own.text_kind = 'reference' AND own.model = ?)""", [model, run_id, model]).df()
        if copies.empty:
            return 0
        with self.transaction() as cursor:
            cursor.register("copies", copies)
            try:
                cursor.execute("INSERT OR IGNORE INTO entropies BY NAME SELECT * FROM copies")
            finally:
                cursor.unregister("copies")
        return len(copies)

    def sample_entropies(self, run_id: str, sample_idx: int) -> list[tuple[str, list, list]]:
        """(text kind, token character spans, entropies) stored for one sample."""
        return self.cursor().execute(
            "SELECT text_kind, token_spans, entropy FROM entropies WHERE run_id = ? AND sample_idx = ?",
            [run_id, int(sample_idx)]).fetchall()

    def token_entropies(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        """Long table of per-token entropies: run_id, sample_idx, text_kind, entropy (generated texts from the
        generation job, references and imported texts from `entropies`); undefined values left out."""
        where, parameters = ("WHERE run_id IN (SELECT unnest(?))", [run_ids]) if run_ids is not None else ("", [])
        cursor = self.cursor()
        frames = [cursor.execute(f"""SELECT run_id, sample_idx, '{kind}' AS text_kind, unnest({kind}_entropy) AS entropy
                                     FROM generations {where}""", parameters).df()
                  for kind in ("unwatermarked", "watermarked")]
        frames.append(cursor.execute(
            f"SELECT run_id, sample_idx, text_kind, unnest(entropy) AS entropy FROM entropies {where}", parameters).df())
        values = pd.concat(frames, ignore_index=True)
        return values[values.entropy.notna() & (values.entropy > float("-inf"))]

    def analysed_samples(self, run_id: str, config: str) -> set[int]:
        rows = self.cursor().execute(
            "SELECT sample_idx FROM entity_analyses WHERE run_id = ? AND config = ?", [run_id, config]).fetchall()
        return {int(row[0]) for row in rows}

    def write_entity_analysis(self, run_id: str, entity_rows: list[dict], analysis: dict) -> None:
        """A sample's entities and its done-marker, in one transaction."""
        with self.transaction() as cursor:
            if entity_rows:
                insert_rows(cursor, "entities", run_id, entity_rows)
            insert_rows(cursor, "entity_analyses", run_id, [analysis])

    def record_entity_verdicts(self, run_id: str, sample_idx: int, text_kind: str, starts: list[int], rater: str,
                               verdict: str) -> None:
        """One verdict on the mentions of a text starting at `starts`, in one transaction."""
        with self.transaction() as cursor:
            cursor.executemany("INSERT OR REPLACE INTO entity_verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
                               [[run_id, int(sample_idx), text_kind, int(start), rater, verdict, _now()] for start in starts])

    def delete_entity_verdicts(self, run_id: str, sample_idx: int, text_kind: str, starts: list[int], rater: str) -> None:
        with self.transaction() as cursor:
            cursor.executemany("DELETE FROM entity_verdicts WHERE run_id = ? AND sample_idx = ? AND text_kind = ? "
                               "AND start_char = ? AND rater = ?",
                               [[run_id, int(sample_idx), text_kind, int(start), rater] for start in starts])

    def rater_entity_verdicts(self, rater: str, run_id: str | None = None, sample_idx: int | None = None) -> pd.DataFrame:
        """The mentions (run_id, sample_idx, text_kind, start_char) a rater gave a verdict, with it: every run's, or
        one sample's."""
        where, values = "rater = ?", [rater]
        if run_id is not None:
            where, values = where + " AND run_id = ? AND sample_idx = ?", values + [run_id, int(sample_idx)]
        return self.cursor().execute(
            f"SELECT run_id, sample_idx, text_kind, start_char, verdict FROM entity_verdicts WHERE {where}", values).df()

    def entity_verdicts(self) -> pd.DataFrame:
        """Clinicians' verdicts joined with the entities they judge."""
        return self.cursor().execute(
            """SELECT v.rater, v.verdict, e.hallucinated, e.entity, e.similarity, e.run_id, e.sample_idx, e.text_kind,
                      e.start_char, e.config
               FROM entity_verdicts v JOIN entities e USING (run_id, sample_idx, text_kind, start_char)""").df()

    # -- human evaluation ----------------------------------------------------------------------------
    def human_item_samples(self, run_id: str) -> set[int]:
        rows = self.cursor().execute("SELECT sample_idx FROM human_items WHERE run_id = ?", [run_id]).fetchall()
        return {int(row[0]) for row in rows}

    def add_human_items(self, items: list[tuple[str, int, bool]]) -> None:
        """(run, sample, watermarked shown first) rating items."""
        with self.transaction() as cursor:
            cursor.executemany("INSERT INTO human_items VALUES (?, ?, ?, ?)", [(*item, _now()) for item in items])

    def next_human_item(self, rater: str, raters_per_item: int) -> tuple[str, int, bool] | None:
        """The item for this rater: not yet rated or skipped by them, with fewer than `raters_per_item`
        ratings, the one closest to complete first."""
        row = self.cursor().execute(
            """SELECT i.run_id, i.sample_idx, i.watermarked_first
               FROM human_items i
               LEFT JOIN (SELECT run_id, sample_idx, count(*) AS ratings FROM human_ratings GROUP BY ALL) r
                      USING (run_id, sample_idx)
               WHERE coalesce(r.ratings, 0) < ?
                 AND NOT EXISTS (SELECT 1 FROM human_ratings h
                                 WHERE h.rater = ? AND h.run_id = i.run_id AND h.sample_idx = i.sample_idx)
                 AND NOT EXISTS (SELECT 1 FROM human_skips s
                                 WHERE s.rater = ? AND s.run_id = i.run_id AND s.sample_idx = i.sample_idx)
               ORDER BY coalesce(r.ratings, 0) DESC, i.run_id, i.sample_idx
               LIMIT 1""",
            [raters_per_item, rater, rater],
        ).fetchone()
        return (row[0], int(row[1]), bool(row[2])) if row else None

    def add_human_rating(self, rater: str, run_id: str, sample_idx: int, watermarked: list[float],
                         unwatermarked: list[float], comment: str | None, raters_per_item: int,
                         replace: bool = False) -> str | None:
        """Store a rating unless the rater has rated the item ("rated") or it is full ("full"). With `replace`, the
        rater's own rating or skip of the item gives way to this one."""
        with self.transaction() as cursor:
            key = [rater, run_id, sample_idx]
            others, own = cursor.execute(
                "SELECT count(*) FILTER (WHERE rater <> ?), count(*) FILTER (WHERE rater = ?) FROM human_ratings "
                "WHERE run_id = ? AND sample_idx = ?", [rater, *key]).fetchone()
            if own and not replace:
                return "rated"
            if others >= raters_per_item:
                return "full"
            created = None
            if replace:  # the revised rating keeps the first one's time, so the rater's history keeps its order
                created = cursor.execute(
                    "SELECT min(created) FROM (SELECT created FROM human_ratings WHERE rater = ? AND run_id = ? AND "
                    "sample_idx = ? UNION ALL SELECT created FROM human_skips WHERE rater = ? AND run_id = ? AND "
                    "sample_idx = ?)", key + key).fetchone()[0]
                for table in ("human_ratings", "human_skips"):
                    cursor.execute(f"DELETE FROM {table} WHERE rater = ? AND run_id = ? AND sample_idx = ?", key)
            cursor.execute("INSERT INTO human_ratings VALUES (?, ?, ?, ?, ?, ?, ?)",
                           [rater, run_id, sample_idx, watermarked, unwatermarked, comment, created or _now()])
        return None

    def rater_history(self, rater: str) -> list[tuple]:
        """The items a rater rated or skipped, oldest first: (run_id, sample_idx, watermarked_first,
        scores_watermarked, scores_unwatermarked, comment, done_at), the scores and comment None for a skip."""
        return self.cursor().execute(
            """SELECT i.run_id, i.sample_idx, i.watermarked_first, h.scores_watermarked, h.scores_unwatermarked,
                      h.comment, coalesce(h.created, s.created) AS done_at
               FROM human_items i
               LEFT JOIN human_ratings h ON h.rater = ? AND h.run_id = i.run_id AND h.sample_idx = i.sample_idx
               LEFT JOIN human_skips s ON s.rater = ? AND s.run_id = i.run_id AND s.sample_idx = i.sample_idx
               WHERE h.rater IS NOT NULL OR s.rater IS NOT NULL
               ORDER BY done_at, i.run_id, i.sample_idx""", [rater, rater]).fetchall()

    def add_human_skip(self, rater: str, run_id: str, sample_idx: int) -> None:
        with self.transaction() as cursor:
            cursor.execute("INSERT OR IGNORE INTO human_skips VALUES (?, ?, ?, ?)", [rater, run_id, sample_idx, _now()])

    def rater_progress(self, rater: str) -> tuple[int, int]:
        """(items this rater has rated or skipped, items there are to rate)."""
        done, total = self.cursor().execute(
            """SELECT (SELECT count(*) FROM human_ratings WHERE rater = ?) + (SELECT count(*) FROM human_skips WHERE rater = ?),
                      (SELECT count(*) FROM human_items)""", [rater, rater]).fetchone()
        return int(done), int(total)

    def human_ratings(self) -> pd.DataFrame:
        """Every rating with its run's method, model and task."""
        return self.cursor().execute(
            """SELECT h.*, r.method, r.model, r.task FROM human_ratings h JOIN runs r USING (run_id)
               ORDER BY run_id, sample_idx, rater""").df()

    def count(self, table: str, run_id: str) -> int:
        if table not in PER_RUN_TABLES:
            raise ValueError(table)
        return self.cursor().execute(f"SELECT count(*) FROM {table} WHERE run_id = ?", [run_id]).fetchone()[0]


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _check_database_file(path: Path) -> None:
    """Refuse a path that exists and is not a DuckDB database, before DuckDB writes anything to it."""
    if path.is_dir():
        raise StoreError(f"--db {path} is a folder; give a database file, e.g. {path / 'fwsapp.duckdb'}.")
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb") as handle:
        header = handle.read(12)
    if header[8:12] != b"DUCK":
        raise StoreError(
            f"--db {path} exists and is not a DuckDB database (is it a {path.suffix or 'data'} file?). "
            "Pass --db with the fwsapp database, or a new file name to create one; the file was left as it is."
        )


def detection_record(sample_idx: int, text_kind: str, detector: str, score: float, *, z=None, p=None,
                     num_tokens_scored: int | None = None) -> dict:
    """A row of the detections table."""
    return {"sample_idx": sample_idx, "text_kind": text_kind, "detector": detector, "score": score,
            "z": z, "p": p, "num_tokens_scored": num_tokens_scored}


def detected_record(sample_idx: int, text_kind: str, detector: str, detection) -> dict:
    """The detections-table row of a detector's `Detection` of one text."""
    return detection_record(sample_idx, text_kind, detector, detection.score, z=detection.z, p=detection.p,
                            num_tokens_scored=detection.num_tokens_scored)


def _insert_run(cursor: duckdb.DuckDBPyConnection, run_id: str, run: dict) -> None:
    cursor.execute(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run_id, run_id, json.dumps(run["config"], sort_keys=True), run["model"], run["task"], run["method"],
            json.dumps(run["params"], sort_keys=True), run.get("seed"), run["n"], run.get("imported", False),
            run.get("score_direction", "higher"), run.get("status", "running"), _now(), None,
        ],
    )


def _sql_string(path: Path) -> str:
    """A file path inside a SQL string literal (COPY and read_parquet take no parameters there)."""
    return str(path).replace("'", "''")


def insert_rows(cursor: duckdb.DuckDBPyConnection, table: str, run_id: str, rows: list[dict]) -> None:
    """Insert or replace rows of a per-run table inside the caller's transaction."""
    frame = pd.DataFrame([{"run_id": run_id, **row} for row in rows])
    cursor.register("incoming", frame)
    try:
        cursor.execute(f"INSERT OR REPLACE INTO {table} BY NAME SELECT * FROM incoming")
    finally:
        cursor.unregister("incoming")
