"""The read side shared by the SQL stores (SQLite and PostgreSQL): one query per operation, written
once; the backends differ only in placeholders, how rows are fetched, and transactions."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

from guimem.errors import DataError, NotFoundError
from guimem.storage.base import Change, Event, Record, StoreStats

COLUMNS = "id, kind, namespace, status, body, vector, version, created_at"
IN_LIMIT = 500
"""Ids in one ``IN (...)`` list: a bound on one statement's parameters (SQLite's is 999 before 3.32)."""


def to_record(row: Sequence[Any]) -> Record:
    """A row of ``COLUMNS`` as a `Record` (``bytea`` memoryviews become bytes)."""
    vector = bytes(row[5]) if row[5] is not None else None
    return Record(row[0], row[1], row[2], row[3], row[4], vector, int(row[6]), float(row[7]))


class SQLReads(ABC):
    """Reads over the ``items`` / ``events`` / ``meta`` schema.

    Subclasses set ``placeholder`` (``?`` or ``%s``) and ``first_order`` (the column that orders
    rows by insertion: ``rowid`` or ``seq``), and implement `_fetch`.
    """

    placeholder = "?"
    first_order = "rowid"
    _lock: threading.RLock

    @abstractmethod
    def _fetch(self, sql: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql`` with the backend's driver and return all rows."""

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self.placeholder)

    def _all(self, sql: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._fetch(self._sql(sql), args)

    def get(self, item_id: str) -> Record:
        """The current version of an item."""
        rows = self._all(f"SELECT {COLUMNS} FROM items WHERE id = ? AND current", (item_id,))
        if not rows:
            raise NotFoundError("item", item_id)
        return to_record(rows[0])

    def history(self, item_id: str) -> list[Record]:
        """Every version, oldest first."""
        rows = self._all(f"SELECT {COLUMNS} FROM items WHERE id = ? ORDER BY version", (item_id,))
        if not rows:
            raise NotFoundError("item", item_id)
        return [to_record(r) for r in rows]

    def _current(self, columns: str, namespace: str, kind: str | None, statuses: Sequence[str]
                 ) -> tuple[str, list[object]]:
        """The query of current versions (of ``kind``, of ``statuses``: not empty), in creation order."""
        sql = f"SELECT {columns} FROM items WHERE namespace = ? AND current"
        args: list[object] = [namespace]
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        if statuses:
            sql += f" AND status IN ({', '.join('?' for _ in statuses)})"
            args.extend(statuses)
        sql += f" ORDER BY (SELECT min(first.{self.first_order}) FROM items first WHERE first.id = items.id)"
        return sql, args

    def query(self, namespace: str, kind: str | None = None, statuses: Sequence[str] | None = None) -> list[Record]:
        """Current versions, in the order the items were first created."""
        if statuses is not None and not statuses:
            return []
        return [to_record(r) for r in self._all(*self._current(COLUMNS, namespace, kind, statuses or ()))]

    def scan(self, namespace: str, kind: str | None = None, statuses: Sequence[str] | None = None,
             chunk: int = 1000) -> Iterator[list[Record]]:
        """`query`'s records in its order, ``chunk`` at a time: the ids first (one query), then the records of
        each chunk of ids (an item changed in between is read as it is then; one that left the filter is
        skipped). No lock is held between chunks."""
        if statuses is not None and not statuses:
            return
        ids = [str(r[0]) for r in self._all(*self._current("id", namespace, kind, statuses or ()))]
        chunk = max(1, min(chunk, IN_LIMIT))
        allowed = set(statuses) if statuses is not None else None
        for start in range(0, len(ids), chunk):
            part = ids[start:start + chunk]
            found = {i: rec for i, rec in self.get_many(part).items()
                     if rec.namespace == namespace and (kind is None or rec.kind == kind)
                     and (allowed is None or rec.status in allowed)}
            out = [found[i] for i in part if i in found]
            if out:
                yield out

    def get_many(self, item_ids: Sequence[str]) -> dict[str, Record]:
        """The current versions of ``item_ids`` that exist, in one statement per `IN_LIMIT` ids."""
        ids = list(dict.fromkeys(item_ids))
        out: dict[str, Record] = {}
        for start in range(0, len(ids), IN_LIMIT):
            part = ids[start:start + IN_LIMIT]
            rows = self._all(f"SELECT {COLUMNS} FROM items WHERE current AND id IN "
                             f"({', '.join('?' for _ in part)})", part)
            out.update((rec.id, rec) for rec in map(to_record, rows))
        return out

    def events(self, *, item_id: str | None = None, namespace: str | None = None, since: int = 0) -> list[Event]:
        """Events after ``since``, in log order."""
        sql = "SELECT seq, type, item_id, namespace, payload, created_at FROM events WHERE seq > ?"
        args: list[object] = [since]
        if item_id is not None:
            sql += " AND item_id = ?"
            args.append(item_id)
        if namespace is not None:
            sql += " AND namespace = ?"
            args.append(namespace)
        return [Event(int(r[0]), r[1], r[2], r[3], r[4], float(r[5])) for r in self._all(sql + " ORDER BY seq", args)]

    def _next_version(self, record: Record) -> int:
        """The version a new write of ``record.id`` gets (call inside the write's transaction).

        Raises:
            DataError: The id belongs to another namespace (ids are unique in a store; a write there
                would supersede another memory's item).
        """
        rows = self._all("SELECT max(version), min(namespace), max(namespace) FROM items WHERE id = ?", (record.id,))
        top, low, high = rows[0] if rows else (None, None, None)
        if low is not None and (low != record.namespace or high != record.namespace):
            raise DataError(f"item id {record.id} already belongs to namespace {low!r}, not {record.namespace!r}",
                            suggestion="ids are unique in a store: import into another store, or give new ids")
        return int(top or 0) + 1

    def revision(self, namespace: str) -> str:
        """A marker that changes whenever an item of ``namespace`` is written (versions written, last write),
        and differs between two stores written alike (when the namespace was first written): what a derived cache
        (a vector index file) is checked against. A store deleted and made again at the same path is another
        store, and the cache of the first names items the second does not hold."""
        rows = self._all(f"SELECT count(*), coalesce(max({self.first_order}), 0), coalesce(min(created_at), 0) "
                         "FROM items WHERE namespace = ?", (namespace,))
        return f"{int(rows[0][0])}:{int(rows[0][1])}:{float(rows[0][2])!r}"

    def position(self, namespace: str) -> int:
        """Where the namespace's writes have reached (a marker that only grows: the last write's sequence)."""
        rows = self._all(f"SELECT coalesce(max({self.first_order}), 0) FROM items WHERE namespace = ?", (namespace,))
        return int(rows[0][0])

    def changes(self, namespace: str, since: int, until: int) -> list[Change]:
        """The current versions of the items written after position ``since`` up to ``until``, in the order
        the items were first created (as `query` gives them), each saying whether the item itself is new
        since then: what a reader that loaded the namespace at ``since`` applies to be at ``until``. Exact
        when nothing writes the namespace while it is read (an evaluation between its round boundaries)."""
        first = f"(SELECT min(first.{self.first_order}) FROM items first WHERE first.id = items.id)"
        rows = self._all(f"SELECT {COLUMNS}, {first} FROM items WHERE namespace = ? AND current "
                         f"AND {self.first_order} > ? AND {self.first_order} <= ? ORDER BY {first}",
                         (namespace, since, until))
        return [Change(to_record(r), int(r[8]) > since) for r in rows]

    def namespaces(self) -> list[str]:
        """Namespaces that hold items or events."""
        return [r[0] for r in self._all("SELECT namespace FROM items UNION SELECT namespace FROM events ORDER BY 1")]

    def stats(self, namespace: str | None = None) -> StoreStats:
        """Counts of current items by (kind, status), and of events."""
        args: list[object] = [namespace] if namespace else []
        where = " AND namespace = ?" if namespace else ""
        rows = self._all(f"SELECT kind, status, count(*) FROM items WHERE current{where} GROUP BY kind, status", args)
        events = self._all("SELECT count(*) FROM events" + (" WHERE namespace = ?" if namespace else ""), args)
        return StoreStats({(k, s): int(n) for k, s, n in rows}, int(events[0][0]))

    def meta_get(self, key: str) -> str | None:
        """A store-level setting."""
        rows = self._all("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None
