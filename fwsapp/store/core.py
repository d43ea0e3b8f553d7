"""The store's core: opening the file, migrating it, queries, write transactions and the revision counter.

Every batch is written in one transaction, so a killed job leaves whole batches behind and a re-run resumes exactly
where it stopped. The file is held only while it is used (`database_file`), so other processes can use it between.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pandas as pd

from fwsapp import one_line
from fwsapp.paths import DEFAULT_DB
from fwsapp.store.database_file import DatabaseFile, FileInUse
from fwsapp.store.migrations import MIGRATIONS, SCHEMA_VERSION

# Each text kind and the generations column that holds it.
TEXT_COLUMNS = {"watermarked": "watermarked_text", "unwatermarked": "unwatermarked_text", "reference": "reference"}
PER_RUN_TABLES = ("generations", "detections", "metrics", "judgments", "entropies", "entities", "entity_analyses",
                  "redetections", "attacked_texts", "run_fits", "facts", "fact_changes", "fact_analyses",
                  "length_predictions")


class StoreError(RuntimeError):
    """The database cannot be used; the message says why and what to do."""


class StoreCore:
    def __init__(self, path: str | Path = DEFAULT_DB, read_only: bool = False):
        self.path = Path(path)
        _check_database_file(self.path)
        new = not self.path.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise self._uncreatable(error) from None
        self._file = DatabaseFile.of(self.path, read_only)
        self._read_only = read_only
        self._thread_writes = threading.local()
        try:
            with self.cursor():
                self.schema_version() if read_only else self._migrate()
        except StoreError:
            raise
        except (OSError, duckdb.Error) as error:
            if new and not self.path.exists():  # never made: say so, not "damaged"
                raise self._uncreatable(error) from None
            raise self._damaged(error) from None

    def _uncreatable(self, error: Exception) -> StoreError:
        return StoreError(f"The database {self.path} cannot be created there ({one_line(error)}): pass --db with "
                          "another path.")

    def _damaged(self, error: Exception) -> StoreError:
        return StoreError(
            f"The database {self.path} cannot be opened ({one_line(error)}). It may be truncated or damaged: "
            f"restore it from a copy, or move it aside and pass --db with a new file."
        )

    # -- access ----------------------------------------------------------------------------------
    @contextmanager
    def cursor(self):
        """This thread's cursor, the file held open for the `with` block (and a moment after)."""
        try:
            with self._file.cursor() as cursor:
                yield cursor
        except FileInUse as error:
            raise StoreError(str(error)) from None

    def frame(self, query: str, parameters: list | None = None) -> pd.DataFrame:
        with self.cursor() as cursor:
            return cursor.execute(query, parameters or []).df()

    def rows(self, query: str, parameters: list | None = None) -> list[tuple]:
        with self.cursor() as cursor:
            return cursor.execute(query, parameters or []).fetchall()

    def row(self, query: str, parameters: list | None = None) -> tuple | None:
        with self.cursor() as cursor:
            return cursor.execute(query, parameters or []).fetchone()

    @contextmanager
    def transaction(self):
        """One write transaction; it bumps the revision, so the app's cached queries see the change."""
        with self.cursor() as cursor, self._file.writing:
            cursor.begin()
            try:
                yield cursor
                cursor.execute("UPDATE meta SET value = CAST(CAST(value AS BIGINT) + 1 AS VARCHAR) WHERE key = 'revision'")
            except BaseException:
                cursor.rollback()
                raise
            cursor.commit()
        self._thread_writes.count = self.writes_by_this_thread() + 1

    def writes_by_this_thread(self) -> int:
        """Write transactions the calling thread has committed through this store: the part of a revision change
        that a thread (a page being drawn, say) made itself."""
        return getattr(self._thread_writes, "count", 0)

    def close(self) -> None:
        """Let go of the file now rather than a moment after the last query."""
        self._file.close()

    def revision(self) -> str:
        """A counter bumped by every write transaction, in any process; keys the app's query cache. It names the file
        too, so two databases never share cached results."""
        row = self.row("SELECT value FROM meta WHERE key = 'revision'")
        return f"{self.path}|{row[0] if row else 0}"

    @staticmethod
    def writes_between(earlier: str, later: str) -> int:
        """Write transactions committed, by any process or thread, between two of this store's `revision()`s."""
        return int(later.rpartition("|")[2]) - int(earlier.rpartition("|")[2])

    # -- schema ------------------------------------------------------------------------------------
    def schema_version(self) -> int:
        with self.cursor() as cursor:
            if not self._read_only:
                cursor.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
                cursor.execute("INSERT OR IGNORE INTO meta VALUES ('revision', '0')")
            row = cursor.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"The database {self.path} has schema version {version}, newer than this app's "
                f"{SCHEMA_VERSION}. Update fwsapp, or use another --db."
            )
        if version == SCHEMA_VERSION:
            return
        # One transaction for every step: a file is either migrated whole or left at its version, and a new file
        # commits once rather than once per step (0.19 s to 0.04 s).
        with self.transaction() as cursor:
            for migration in MIGRATIONS[version:]:
                cursor.execute(migration)
            cursor.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])

    def count(self, table: str, run_id: str) -> int:
        if table not in PER_RUN_TABLES:
            raise ValueError(table)
        return self.row(f"SELECT count(*) FROM {table} WHERE run_id = ?", [run_id])[0]

    def _per_run(self, table: str, run_ids: list[str] | None, exclude: tuple[str, ...] = ()) -> pd.DataFrame:
        columns = f"t.* EXCLUDE ({', '.join(exclude)})" if exclude else "t.*"
        query = f"""SELECT {columns}, r.method, r.model, r.task, r.score_direction
                    FROM {table} t JOIN runs r USING (run_id)"""
        if run_ids is None:
            return self.frame(query + " ORDER BY run_id, sample_idx")
        return self.frame(query + " WHERE run_id IN (SELECT unnest(?)) ORDER BY run_id, sample_idx", [run_ids])


def now() -> datetime:
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


def sql_string(path: Path) -> str:
    """A file path inside a SQL string literal (COPY and read_parquet take no parameters there)."""
    return str(path).replace("'", "''")


def require_run(cursor: duckdb.DuckDBPyConnection, run_id: str) -> None:
    # Fetched whole: duckdb refuses more work on the cursor while a result is half read.
    if not cursor.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchall():
        raise StoreError(f"Run {run_id} was deleted while this job ran: its last results are not kept.")


def insert_rows(cursor: duckdb.DuckDBPyConnection, table: str, run_id: str, rows: list[dict]) -> None:
    """Insert or replace rows of a per-run table inside the caller's transaction. A run deleted meanwhile (while it
    was generated, attacked, scored) gets none: rows no run owns could be neither listed nor deleted."""
    require_run(cursor, run_id)
    frame = pd.DataFrame([{"run_id": run_id, **row} for row in rows])
    cursor.register("incoming", frame)
    try:
        cursor.execute(f"INSERT OR REPLACE INTO {table} BY NAME SELECT * FROM incoming")
    finally:
        cursor.unregister("incoming")
