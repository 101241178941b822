"""PostgreSQL store: the same schema and guarantees as SQLite, shared by many workers on many machines.

Vectors are kept in the database (``bytea``) and indexed in each process (pgvector is not in
Debian 12). Versions of one item are serialised with a transaction-scoped advisory lock on its
id, so concurrent writers never lose or duplicate a version; events and versions are append-only
(triggers refuse UPDATE/DELETE).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from guimem.errors import ConfigError, DataError, MigrationError, MissingDependencyError, StoreError
from guimem.storage.base import Event, EventDraft, Record, mask_url
from guimem.storage.sql import COLUMNS, SQLReads

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE items (
        id TEXT NOT NULL, version INTEGER NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL,
        status TEXT NOT NULL, body TEXT NOT NULL, vector BYTEA, created_at DOUBLE PRECISION NOT NULL,
        current BOOLEAN NOT NULL DEFAULT TRUE, seq BIGSERIAL, PRIMARY KEY (id, version));
    CREATE INDEX items_current ON items(namespace, kind) WHERE current;
    CREATE TABLE events (
        seq BIGSERIAL PRIMARY KEY, type TEXT NOT NULL, item_id TEXT, namespace TEXT NOT NULL,
        payload TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL);
    CREATE INDEX events_item ON events(item_id);
    CREATE INDEX events_namespace ON events(namespace, seq);
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE FUNCTION guimem_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION '%', TG_ARGV[0]; END $$;
    CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION guimem_refuse('events are append-only');
    CREATE TRIGGER items_no_delete BEFORE DELETE ON items
        FOR EACH ROW EXECUTE FUNCTION guimem_refuse('items are never deleted: write a tombstone version');
    CREATE TRIGGER items_immutable BEFORE UPDATE OF id, version, kind, namespace, status, body, vector ON items
        FOR EACH ROW EXECUTE FUNCTION guimem_refuse('item versions are immutable: write a new version');
    """,
)


class PostgresStore(SQLReads):
    """A `Store` in a PostgreSQL database.

    Args:
        dsn: ``postgresql://user[:password]@host:port/dbname``.
    """

    def __init__(self, dsn: str) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise MissingDependencyError("psycopg", "postgres") from exc
        self._url = mask_url(dsn)
        try:
            self._conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.OperationalError as exc:
            raise StoreError(f"cannot connect to {self._url}: {exc}") from exc
        except (psycopg.ProgrammingError, ValueError):  # the DSN does not parse (its text may hold a password)
            raise ConfigError("the store URL is not a valid PostgreSQL URL",
                              suggestion="e.g. --store postgresql://user@localhost:5432/guimem") from None
        self._lock = threading.RLock()
        self._depth = 0
        self._migrate()

    placeholder = "%s"
    first_order = "seq"

    @property
    def url(self) -> str:
        """The DSN with any password masked."""
        return self._url

    def _fetch(self, sql: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with self._driver_errors():
            return list(self._conn.execute(sql, list(args)).fetchall())

    @contextmanager
    def _driver_errors(self) -> Iterator[None]:
        """Values PostgreSQL cannot hold (e.g. NUL bytes in text) are bad input, not server failures."""
        import psycopg

        try:
            yield
        except psycopg.DataError as exc:
            raise DataError(f"PostgreSQL refused a value: {str(exc).splitlines()[0]}") from None

    def _migrate(self) -> None:
        with self._lock, self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(7402)")
            self._conn.execute("CREATE TABLE IF NOT EXISTS guimem_schema (version INTEGER NOT NULL)")
            row = self._conn.execute("SELECT max(version) FROM guimem_schema").fetchone()
            have = int(row[0] or 0) if row else 0
            if have > len(MIGRATIONS):
                raise MigrationError(f"{self._url} has schema version {have}, newer than this guimem knows",
                                     suggestion="upgrade guimem")
            for number in range(have, len(MIGRATIONS)):
                self._conn.execute(MIGRATIONS[number])
                self._conn.execute("INSERT INTO guimem_schema (version) VALUES (%s)", (number + 1,))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Nestable; the outermost commits or rolls back (inner ones are savepoints)."""
        with self._lock, self._conn.transaction():
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1

    def put(self, record: Record, event: EventDraft | None = None) -> Record:
        """A new version (serialised per item id) and its event, atomically."""
        now = time.time()
        with self._driver_errors(), self.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (record.id,))
            version = self._next_version(record)
            self._conn.execute("UPDATE items SET current = FALSE WHERE id = %s AND current", (record.id,))
            self._conn.execute(
                f"INSERT INTO items ({COLUMNS}, current) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, TRUE)",
                (record.id, record.kind, record.namespace, record.status, record.body, record.vector, version, now))
            if event is not None:
                self.append_event(event)
        return Record(record.id, record.kind, record.namespace, record.status, record.body, record.vector, version, now)

    def append_event(self, event: EventDraft) -> Event:
        """Append one event."""
        now = time.time()
        with self._driver_errors(), self.transaction():
            row = self._conn.execute(
                "INSERT INTO events (type, item_id, namespace, payload, created_at) VALUES (%s, %s, %s, %s, %s) "
                "RETURNING seq", (event.type, event.item_id, event.namespace, event.payload, now)).fetchone()
        return Event(int(row[0]) if row else 0, event.type, event.item_id, event.namespace, event.payload, now)

    def lock(self, name: str) -> None:
        """A transaction-scoped advisory lock on ``name`` (released at commit or rollback).

        Raises:
            StoreError: Not inside a transaction.
        """
        if self._depth == 0:
            raise StoreError(f"lock({name!r}) outside a transaction")
        with self._lock:
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))", (name,))

    def meta_set(self, key: str, value: str) -> None:
        """Set a store-level setting."""
        with self.transaction():
            self._conn.execute("INSERT INTO meta (key, value) VALUES (%s, %s) "
                               "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()
