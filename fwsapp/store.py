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

from fwsapp.paths import DEFAULT_DB

SCHEMA_VERSION = 5

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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._connection = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.Error as error:
            if "lock" in str(error).lower():
                raise StoreError(
                    f"The database {self.path} is in use by another process (is the app or another "
                    f"`python -m fwsapp` command running?). Stop it, or pass --db with another file."
                ) from None
            raise self._damaged(error) from None
        self._local = threading.local()
        try:
            self.schema_version() if read_only else self._migrate()
        except duckdb.Error as error:
            self._connection.close()
            raise self._damaged(error) from None

    def _damaged(self, error: Exception) -> StoreError:
        first_line = str(error).strip().splitlines()[0][:200]
        return StoreError(
            f"The database {self.path} cannot be opened ({first_line}). It may be truncated or damaged: "
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
        cursor = self.cursor()
        cursor.begin()
        try:
            yield cursor
        except BaseException:
            cursor.rollback()
            raise
        cursor.commit()

    def close(self) -> None:
        self._connection.close()

    def schema_version(self) -> int:
        self.cursor().execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
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
        """Create the run if it is new; a run that exists keeps its rows."""
        with self.transaction() as cursor:
            if not cursor.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchone():
                _insert_run(cursor, run_id, {
                    "config": config, "model": model, "task": task, "method": method, "params": params,
                    "seed": seed, "n": n, "imported": imported, "score_direction": score_direction,
                })

    def has_run(self, run_id: str) -> bool:
        return self.cursor().execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchone() is not None

    def set_status(self, run_id: str, status: str) -> None:
        self.cursor().execute("UPDATE runs SET status = ? WHERE run_id = ?", [status, run_id])

    def runs(self) -> pd.DataFrame:
        return self.cursor().execute(
            """SELECT r.run_id, r.method, r.model, r.task, r.n, r.imported, r.status, r.created,
                      r.seed, r.params, r.score_direction, count(g.sample_idx) AS samples_done
               FROM runs r LEFT JOIN generations g USING (run_id)
               GROUP BY ALL ORDER BY r.created DESC"""
        ).df()

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
        """Write one batch of generations and their detection scores atomically."""
        with self.transaction() as cursor:
            if generations:
                insert_rows(cursor, "generations", run_id, generations)
            if detections:
                insert_rows(cursor, "detections", run_id, detections)

    def write_rows(self, table: str, run_id: str, rows: list[dict]) -> None:
        """Insert or replace rows of a per-run table in one transaction."""
        if table not in PER_RUN_TABLES:
            raise ValueError(f"not a per-run table: {table}")
        with self.transaction() as cursor:
            insert_rows(cursor, table, run_id, rows)

    def generations(self, run_id: str) -> pd.DataFrame:
        return self.cursor().execute(
            "SELECT * FROM generations WHERE run_id = ? ORDER BY sample_idx", [run_id]
        ).df()

    def detections(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        return self._per_run("detections", run_ids)

    def revision(self) -> str:
        """Changes whenever rows are added or a run changes status; keys the app's query cache.
        It names the file too, so two databases never share cached results."""
        row = self.cursor().execute(
            """SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM generations),
                      (SELECT count(*) FROM detections), (SELECT count(*) FROM metrics),
                      (SELECT count(*) FROM judgments), (SELECT count(*) FROM human_items),
                      (SELECT count(*) FROM human_ratings), (SELECT count(*) FROM human_skips),
                      (SELECT count(*) FROM entropies), (SELECT count(*) FROM entities),
                      (SELECT count(*) FROM entity_analyses), (SELECT count(*) FROM entity_verdicts),
                      (SELECT count(*) FROM detection_sets), (SELECT count(*) FROM redetections),
                      (SELECT string_agg(status, ',' ORDER BY run_id) FROM runs)"""
        ).fetchone()
        return "|".join([str(self.path), *(str(value) for value in row)])

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
        with self.transaction() as cursor:
            if not cursor.execute("SELECT 1 FROM detection_sets WHERE set_id = ?", [set_id]).fetchone():
                cursor.execute(
                    "INSERT INTO detection_sets VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [set_id, run_id, method, json.dumps(params, sort_keys=True), tokenizer, score_direction,
                     datetime.now(timezone.utc).replace(tzinfo=None)],
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

    def count(self, table: str, run_id: str) -> int:
        if table not in PER_RUN_TABLES:
            raise ValueError(table)
        return self.cursor().execute(f"SELECT count(*) FROM {table} WHERE run_id = ?", [run_id]).fetchone()[0]


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


def _insert_run(cursor: duckdb.DuckDBPyConnection, run_id: str, run: dict) -> None:
    cursor.execute(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run_id, run_id, json.dumps(run["config"], sort_keys=True), run["model"], run["task"], run["method"],
            json.dumps(run["params"], sort_keys=True), run.get("seed"), run["n"], run.get("imported", False),
            run.get("score_direction", "higher"), run.get("status", "running"),
            datetime.now(timezone.utc).replace(tzinfo=None),
        ],
    )


def insert_rows(cursor: duckdb.DuckDBPyConnection, table: str, run_id: str, rows: list[dict]) -> None:
    """Insert or replace rows of a per-run table inside the caller's transaction."""
    frame = pd.DataFrame([{"run_id": run_id, **row} for row in rows])
    cursor.register("incoming", frame)
    try:
        cursor.execute(f"INSERT OR REPLACE INTO {table} BY NAME SELECT * FROM incoming")
    finally:
        cursor.unregister("incoming")
