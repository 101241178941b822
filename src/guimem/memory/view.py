"""One kind of a memory's stored items as its method reads them: the part every stored method holds.

A stored method keeps a projection of its items for recall (the graph's node index and adjacency, the
skills' index and names, the knowledge buckets). Everything else it needs of the store is the same for
every method, and lives here, held (not inherited) once per kind:

- **bounded lazy reads**: an item's body, status and vector, read from the store the first time recall needs
  them and kept in a bounded cache (a million items' ids fit in memory, their parsed bodies do not);
- **writes** that keep that cache current (`put`);
- **counts by status**: the index cache's until something changed, then one grouped count in the store;
- **where its view of the store is** (`Cursor`) and what was written since (`changes`), so a worker catches
  up between rounds without reopening;
- **its index cache** (`IndexCache`): the derived files it opens from and saves.

A user's own stored method gets the same by holding an `ItemView` (docs/extending.md).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Generic

import numpy as np
from numpy.typing import NDArray

from guimem.memory.base import Cursor
from guimem.memory.indexcache import IndexCache
from guimem.memory.kit import MemoryKit
from guimem.memory.table import Body, EventType, ItemTable, Payload
from guimem.storage import Record
from guimem.storage.base import Change
from guimem.types import ItemKind
from guimem.vectors import VectorIndex

DEFAULT_BOUND = 100_000
"""Items whose bodies a view keeps in memory by default (the least recently read go first)."""


class ItemView(Generic[Body]):
    """The stored items of one kind in one memory's namespace.

    Args:
        kit: The memory's store, namespace, embedder and cache folder.
        kind: The record kind.
        body: The body model.
        bound: How many items' bodies (with status and vector) are kept in memory.
    """

    def __init__(self, kit: MemoryKit, kind: ItemKind, body: type[Body], bound: int = DEFAULT_BOUND) -> None:
        self.kit = kit
        self.kind = kind
        self.table = ItemTable(kit, kind, body)
        self.cache = IndexCache(kit)
        self.cursor = Cursor(kit.store, kit.namespace)  # before any read: the view is of this position
        self.bound = bound
        self._read: OrderedDict[str, tuple[Body, str, NDArray[np.float32] | None]] = OrderedDict()
        self._counts: dict[str, int] | None = None

    # --- bounded lazy reads -------------------------------------------------------------------------------
    def remember(self, item_id: str, body: Body, status: str, vector: NDArray[np.float32] | None = None) -> None:
        """Keep an item's current body, status and vector (the least recently read one goes past the bound);
        a vector not given keeps the one already kept."""
        kept = self._read.get(item_id)
        if vector is None and kept is not None:
            vector = kept[2]
        self._read[item_id] = (body, status, vector)
        self._read.move_to_end(item_id)
        while len(self._read) > self.bound:
            self._read.popitem(last=False)

    def entry(self, item_id: str) -> tuple[Body, str, NDArray[np.float32] | None]:
        """An item's body, status and vector: kept, else read from the store (raises `NotFoundError`)."""
        kept = self._read.get(item_id)
        if kept is not None:
            self._read.move_to_end(item_id)
            return kept
        rec, body = self.table.get(item_id)
        self.remember(item_id, body, rec.status, rec.vector_array())
        return self._read[item_id]

    def read_many(self, item_ids: Sequence[str]) -> None:
        """Read the items of ``item_ids`` not kept yet, in a few store reads (`Batching`), and keep them: a recall's
        pool, whose bodies it asks for one at a time next (twenty reads of one item took 0.6 ms of a skills
        recall at 100k skills)."""
        missing = [item_id for item_id in item_ids if item_id not in self._read]
        for rec, body in self.table.get_many(missing[: self.bound]) if missing else ():
            self.remember(rec.id, body, rec.status, rec.vector_array())

    def peek_many(self, item_ids: Sequence[str]) -> Iterator[tuple[str, Body, str]]:
        """Many items' ids, bodies and statuses, one at a time: the kept ones as kept, the rest read in a few store
        reads (`Batching`) without keeping them (a pass over many items, such as indexing a pool, holds none of
        them: keep only what is needed of each); an id not in the store is left out."""
        missing = []
        for item_id in item_ids:
            kept = self._read.get(item_id)
            if kept is not None:
                yield item_id, kept[0], kept[1]
            else:
                missing.append(item_id)
        for rec, body in self.table.get_many(missing):
            yield rec.id, body, rec.status

    def get(self, item_id: str) -> Body:
        """An item's body (kept, else read)."""
        return self.entry(item_id)[0]

    def status(self, item_id: str) -> str:
        """An item's status (kept, else read)."""
        return self.entry(item_id)[1]

    def vector(self, item_id: str) -> NDArray[np.float32] | None:
        """An item's vector (kept, else read)."""
        return self.entry(item_id)[2]

    def kept_items(self) -> int:
        """How many items' bodies are kept in memory now."""
        return len(self._read)

    def kept(self, item_id: str) -> Body | None:
        """An item's body if it is kept in memory now (no store read)."""
        found = self._read.get(item_id)
        return found[0] if found is not None else None

    # --- the store ----------------------------------------------------------------------------------------
    def record(self, item_id: str) -> tuple[Record, Body]:
        """An item's current stored version, read from the store (for a write that keeps its vector)."""
        rec, body = self.table.get(item_id)
        self.remember(item_id, body, rec.status, rec.vector_array())
        return rec, body

    def load(self, statuses: Sequence[str] | None = None) -> list[tuple[Record, Body]]:
        """Every current item (of ``statuses``), in creation order, parsed; none is kept by this call."""
        return self.table.load(statuses)

    def stream(self, statuses: Sequence[str] | None = None, chunk: int = 500
               ) -> Iterator[list[tuple[Record, Body]]]:
        """Every current item (of ``statuses``), in creation order, parsed, ``chunk`` at a time (`ItemTable.stream`);
        none is kept by this call."""
        return self.table.stream(statuses, chunk)

    def records(self, statuses: Sequence[str] | None = None) -> list[Record]:
        """Every current item's record, unparsed, in creation order."""
        return self.kit.store.query(self.kit.namespace, self.kind.value, statuses)

    def put(self, item_id: str, body: Body, status: str, event: EventType, payload: Payload,
            vector: bytes | None = None) -> Record:
        """Write a new version of an item with its event, and keep it."""
        rec = self.table.put(item_id, body, status, event, payload, vector)
        self.remember(item_id, body, status, rec.vector_array())
        self.recount()
        return rec

    def log(self, item_id: str | None, event: EventType, payload: Payload) -> None:
        """Append an event about an item (or about the memory)."""
        self.table.log(item_id, event, payload)

    # --- counts -------------------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Items by status: as last set (the index cache's), else one grouped count in the store."""
        if self._counts is None:
            self._counts = self.kit.counts(self.kind.value)
        return dict(self._counts)

    def known_counts(self) -> dict[str, int] | None:
        """The counts if known without asking the store (None: something changed since)."""
        return dict(self._counts) if self._counts is not None else None

    def set_counts(self, counts: dict[str, int]) -> None:
        """Counts read with the index cache or while reading every item."""
        self._counts = dict(counts)

    def recount(self) -> None:
        """Something changed: the next `counts` asks the store."""
        self._counts = None

    # --- the index cache ---------------------------------------------------------------------------------
    def open_entry(self, name: str, indexes: Sequence[tuple[str, VectorIndex]] = (), counts: bool = True
                   ) -> tuple[Path, dict[str, Any]] | None:
        """Open the index cache's entry ``name`` when it matches the store: fill each of ``indexes`` from its
        own entry, then return the entry's folder (its side arrays) and extras, with ``counts`` the counts by
        status it was saved with; None (nothing usable: rebuild from the store) when any part is missing or
        stale."""
        opened: dict[str, tuple[Path, dict[str, Any]]] = {}
        for index_name, index in indexes:  # each entry's pointer read once: index and arrays from one entry
            entry = self.cache.load(index_name)
            if entry is None or not self.cache.fill(entry[0], index):
                return None
            opened[index_name] = entry
        found = opened.get(name) or self.cache.load(name)
        if found is None:
            return None
        for _, index in indexes:  # every part accepted: paged in
            self.cache.warm(index)
        if counts:
            saved = found[1].get("counts", {})
            self.set_counts({str(k): int(v) for k, v in saved.items()} if isinstance(saved, dict) else {})
        return found

    def save_entry(self, name: str, arrays: dict[str, NDArray[Any]], index: VectorIndex | None = None,
                   counts: dict[str, int] | None = None, extras: dict[str, Any] | None = None,
                   stamp: dict[str, Any] | None = None) -> None:
        """Write the index cache's entry ``name``: its side arrays, its index (if any) and its extras, with
        ``counts`` (the counts by status `open_entry` gives back); ``stamp`` as `IndexCache.save`'s."""
        extras = {**(extras or {}), **({"counts": counts} if counts is not None else {})}
        if index is not None:
            self.cache.save_index(name, index, arrays, extras)
            return

        def write(folder: Path) -> None:
            for key, array in arrays.items():
                np.save(folder / f"{key}.npy", array)
        self.cache.save(name, write, extras, stamp=stamp)

    # --- catching up --------------------------------------------------------------------------------------
    def changes(self) -> tuple[list[Change], int] | None:
        """What was written in the namespace since this view's position (every kind), and the position it
        reaches; None when the store cannot tell (then the method reopens)."""
        return self.cursor.pending()

    def caught_up(self, position: int) -> None:
        """The changes up to ``position`` are applied: items of this kind written since are kept anew and the
        counts are asked of the store next time."""
        self.cursor.position = position

    def apply(self, change: Change) -> Body:
        """Keep a changed item of this kind (from `changes`) and mark the counts stale; returns its body."""
        rec = change.record
        body = self.table.body.model_validate_json(rec.body)
        self.remember(rec.id, body, rec.status, rec.vector_array())
        self.recount()
        return body
