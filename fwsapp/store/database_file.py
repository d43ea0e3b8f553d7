"""The database file, held open only while this process uses it, so the app and `python -m fwsapp` share one file.

DuckDB lets one process at a time open a file for writing, and keeps it locked while any connection is open. So a
process opens the file when it needs it and lets go soon after: a burst of queries (a page being drawn) opens it
once, it closes a moment after the last one, and a process that has held it for a while lets go at its next idle
moment so another gets its turn. A process that finds the file locked waits, up to a bound, and retries.
"""
from __future__ import annotations

import atexit
import os
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import duckdb

# How long to wait for another process to let go of the file; long enough for another's batch or page, short
# enough to say so when a process keeps it (an older fwsapp, or a DuckDB shell).
WAIT_SECONDS = float(os.environ.get("FWSAPP_DB_WAIT_SECONDS", 60))
# After its last query a process keeps the file this long, so a page's queries share one opening (about 30 ms).
LINGER_SECONDS = 0.25
# A process that has held the file this long closes it when next idle, and waits this long before opening it again.
TURN_SECONDS = 2.0
COURTESY_SECONDS = 0.1


class FileInUse(RuntimeError):
    """Another process kept the file for longer than the wait."""

    def __init__(self, path: Path, seconds: float, holder: str):
        super().__init__(f"The database {path} has been in use by another process{holder} for more than {seconds:g} s. "
                         "Wait for it to finish, or pass --db with another file (FWSAPP_DB_WAIT_SECONDS sets the wait).")


class DatabaseFile:
    """One process's access to one database file, shared by its threads: each thread works through its own cursor
    (DuckDB connections are not thread-safe, cursors are), and one write transaction runs at a time (each bumps the
    revision row, so two at once would make DuckDB abort one)."""

    _open_files: dict[str, DatabaseFile] = {}
    _registry_lock = threading.Lock()

    @classmethod
    def of(cls, path: Path, read_only: bool) -> DatabaseFile:
        """The process's one `DatabaseFile` for this path, so two stores on one file share its locks. DuckDB opens a
        file in one mode per process, so a store that writes makes it read-write for the readers too."""
        key = str(path.resolve())
        with cls._registry_lock:
            if key not in cls._open_files:
                cls._open_files[key] = cls(path, read_only)
            database_file = cls._open_files[key]
            if not read_only:
                database_file.read_only = False  # a read-only connection still open is replaced when next opened
            return database_file

    def __init__(self, path: Path, read_only: bool):
        self.path, self.read_only = path, read_only
        self.writing = threading.Lock()
        self._state = threading.Lock()
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._opened_read_only = read_only
        self._users = 0
        self._opened_at = 0.0
        self._let_go_at = 0.0
        self._closer: threading.Timer | None = None
        self._local = threading.local()

    @contextmanager
    def cursor(self):
        """This thread's cursor, with the file held open until the outermost `with` ends."""
        local = self._local
        if getattr(local, "cursor", None) is not None:  # nested: the thread's transaction sees its own writes
            yield local.cursor
            return
        with self._state:
            if self._closer is not None:
                self._closer.cancel()
                self._closer = None
            if self._connection is not None and self._users == 0 and self._opened_read_only and not self.read_only:
                self._close()
            if self._connection is None:
                self._connection = self._connect()
                self._opened_read_only = self.read_only
                self._opened_at = time.monotonic()
            self._users += 1
            local.cursor = self._connection.cursor()
        try:
            yield local.cursor
        finally:
            local.cursor.close()
            local.cursor = None
            self._release()

    def _release(self) -> None:
        with self._state:
            self._users -= 1
            if self._users:
                return
            if time.monotonic() - self._opened_at >= TURN_SECONDS:
                self._close()
            else:
                self._closer = threading.Timer(LINGER_SECONDS, self._close_if_idle)
                self._closer.daemon = True
                self._closer.start()

    def _close_if_idle(self) -> None:
        with self._state:
            if self._users == 0 and self._closer is threading.current_thread():
                self._close()

    def _close(self) -> None:
        if self._closer is not None and self._closer is not threading.current_thread():
            self._closer.cancel()
        self._closer = None
        if self._connection is not None:
            self._connection.close()
            self._connection = None
            self._let_go_at = time.monotonic()

    def close(self) -> None:
        """Let go of the file now (a process that ends, or a test that opens it another way)."""
        with self._state:
            if self._users == 0:
                self._close()

    def _connect(self) -> duckdb.DuckDBPyConnection:
        """Open the file, waiting while another process holds it."""
        courtesy = self._let_go_at + COURTESY_SECONDS - time.monotonic()
        if self._let_go_at and courtesy > 0:  # a process that just let go waits a moment, so a waiting one gets in
            time.sleep(courtesy)
        deadline = time.monotonic() + WAIT_SECONDS
        delay = 0.01
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=self.read_only)
            except duckdb.IOException as error:
                if "lock" not in str(error).lower():
                    raise
                if time.monotonic() + delay > deadline:
                    holder = re.search(r"\(PID (\d+)\)", str(error))
                    raise FileInUse(self.path, WAIT_SECONDS, f" (PID {holder[1]})" if holder else "") from None
                time.sleep(delay)
                delay = min(2 * delay, 0.05)


@atexit.register
def _close_files_at_exit() -> None:
    """Close every idle file before the interpreter ends. Otherwise an idle timer's daemon thread may close a
    connection while Python tears down, and DuckDB aborts the process (rc -6) after its work was done."""
    with DatabaseFile._registry_lock:
        files = list(DatabaseFile._open_files.values())
    for database_file in files:
        database_file.close()
