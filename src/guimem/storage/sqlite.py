"""SQLite store: one file per memory, WAL, versioned migrations, append-only events enforced by triggers.

Several processes may write the same file: writes take the lock up front (``BEGIN IMMEDIATE``) and
wait on it (``busy_timeout``), so concurrent writers serialise instead of failing or losing rows.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from guimem.errors import DataError, MigrationError, StoreError
from guimem.storage.base import Event, EventDraft, Record
from guimem.storage.sql import COLUMNS, SQLReads

MIGRATIONS: tuple[str, ...] = (
    # 1: items (versioned), events (append-only), meta
    """
    CREATE TABLE items (
        id TEXT NOT NULL,
        version INTEGER NOT NULL,
        kind TEXT NOT NULL,
        namespace TEXT NOT NULL,
        status TEXT NOT NULL,
        body TEXT NOT NULL,
        vector BLOB,
        created_at REAL NOT NULL,
        current INTEGER NOT NULL DEFAULT 1,
        PRIMARY KEY (id, version)
    );
    CREATE INDEX items_current ON items(namespace, kind, current);
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        type TEXT NOT NULL,
        item_id TEXT,
        namespace TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX events_item ON events(item_id);
    CREATE INDEX events_namespace ON events(namespace, seq);
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TRIGGER events_no_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE TRIGGER events_no_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE TRIGGER items_immutable BEFORE UPDATE OF id, version, kind, namespace, status, body, vector ON items
        BEGIN SELECT RAISE(ABORT, 'item versions are immutable: write a new version'); END;
    CREATE TRIGGER items_no_delete BEFORE DELETE ON items
        BEGIN SELECT RAISE(ABORT, 'items are never deleted: write a tombstone version'); END;
    """,
)

class SQLiteStore(SQLReads):
    """A `Store` in one SQLite file.

    Args:
        path: The database file (created with its folder if missing); ``:memory:`` for tests.
        busy_timeout_ms: How long a writer waits for another process's lock.
    """

    def __init__(self, path: str | Path, busy_timeout_ms: int = 60_000) -> None:
        self.path = str(path)
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
            )
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
        except OSError as exc:
            raise StoreError(f"cannot create the folder of SQLite store {self.path}: {exc.strerror or exc}",
                             suggestion="give a --store path you can write to") from exc
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc):
                raise DataError("is not a memory store (not a SQLite database)", path=self.path,
                                suggestion="give a store written by guimem") from exc
            raise StoreError(f"cannot open SQLite store {self.path}: {exc}") from exc
        self._lock = threading.RLock()
        self._depth = 0
        self._migrate()

    @property
    def url(self) -> str:
        """The file path."""
        return self.path

    def _fetch(self, sql: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        return list(self._conn.execute(sql, tuple(args)).fetchall())

    def _migrate(self) -> None:
        with self._lock:
            have = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
            if have > len(MIGRATIONS):
                raise MigrationError(
                    f"{self.path} has schema version {have}, newer than this guimem knows ({len(MIGRATIONS)})",
                    suggestion="upgrade guimem",
                )
            if have == len(MIGRATIONS):
                return
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                have = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
                for number in range(have, len(MIGRATIONS)):
                    for statement in _split_sql(MIGRATIONS[number]):
                        self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA user_version = {number + 1}")
                self._conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                self._conn.execute("ROLLBACK")
                raise MigrationError(f"migrating {self.path} failed: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Nestable write transaction; the outermost one commits or rolls back, inner ones are savepoints
        (an inner one that fails leaves nothing of itself, even when its caller goes on)."""
        with self._lock:
            outer = self._depth == 0
            savepoint = f"guimem_{self._depth}"
            try:
                self._conn.execute("BEGIN IMMEDIATE" if outer else f"SAVEPOINT {savepoint}")
            except sqlite3.OperationalError as exc:  # e.g. an immutable or read-only file
                raise _store_error(self.path, exc) from exc
            self._depth += 1
            try:
                yield
            except BaseException as exc:
                self._depth -= 1
                self._undo(outer, savepoint)
                if outer and isinstance(exc, sqlite3.OperationalError):
                    raise _store_error(self.path, exc) from exc
                raise
            self._depth -= 1
            try:
                self._conn.execute("COMMIT" if outer else f"RELEASE {savepoint}")
            except sqlite3.OperationalError as exc:
                self._undo(outer, savepoint)
                raise _store_error(self.path, exc) from exc

    def _undo(self, outer: bool, savepoint: str) -> None:
        if not self._conn.in_transaction:
            return
        if outer:
            self._conn.execute("ROLLBACK")
        else:
            self._conn.execute(f"ROLLBACK TO {savepoint}")
            self._conn.execute(f"RELEASE {savepoint}")

    def put(self, record: Record, event: EventDraft | None = None) -> Record:
        """Write a new version and (optionally) its event, atomically."""
        with self.transaction():
            version = self._next_version(record)
            now = time.time()
            self._conn.execute("UPDATE items SET current = 0 WHERE id = ? AND current = 1", (record.id,))
            self._conn.execute(
                f"INSERT INTO items ({COLUMNS}, current) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)",
                (record.id, record.kind, record.namespace, record.status, record.body, record.vector, version, now),
            )
            if event is not None:
                self.append_event(event)
        return Record(record.id, record.kind, record.namespace, record.status, record.body, record.vector, version, now)

    def append_event(self, event: EventDraft) -> Event:
        """Append one event to the log."""
        now = time.time()
        with self.transaction():
            cur = self._conn.execute(
                "INSERT INTO events (type, item_id, namespace, payload, created_at) VALUES (?, ?, ?, ?, ?)",
                (event.type, event.item_id, event.namespace, event.payload, now),
            )
        return Event(int(cur.lastrowid or 0), event.type, event.item_id, event.namespace, event.payload, now)

    def lock(self, name: str) -> None:
        """Nothing to take: a SQLite write transaction (``BEGIN IMMEDIATE``) already excludes every other writer.

        Raises:
            StoreError: Not inside a transaction.
        """
        if self._depth == 0:
            raise StoreError(f"lock({name!r}) outside a transaction")

    def meta_set(self, key: str, value: str) -> None:
        """Set a store-level setting."""
        with self.transaction():
            self._conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()


def _store_error(path: str, exc: sqlite3.OperationalError) -> StoreError:
    """A write the SQLite file refused (read-only, immutable, locked too long, disk full) as a store failure."""
    return StoreError(f"SQLite store {path} refused a write: {exc}",
                      suggestion="check that the store file and its folder can be written (not read-only or immutable)")


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    out: list[str] = []
    buf: list[str] = []
    for line in script.strip().splitlines():
        buf.append(line)
        joined = "\n".join(buf).strip()
        if joined.endswith(";") and sqlite3.complete_statement(joined):
            out.append(joined)
            buf = []
    if "".join(buf).strip():
        out.append("\n".join(buf))
    return out
