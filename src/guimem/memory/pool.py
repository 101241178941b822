"""The most relevant item of a large pool that passes a check, found in relevance order, in bounded time.

The stack offers another task's item only where the task's own memory has nothing for the screen, and only
the one most relevant to this screen and goal that fits (`StackMemory._offers`). Reading the whole pool of
an app to find it costs a body read per item per recall: seconds at 100k items. A pool larger than
`SCAN_UP_TO` is searched instead: a vector index over its items' relevance vectors answers in relevance
order, and the items are checked one by one from the most relevant, at most `LOOK_AT` of them. The answer
is the same as reading the pool whenever the most relevant item that fits is among the first `LOOK_AT` the
index returns (HNSW search above 50k vectors is approximate: `guimem.vectors.auto`); past that, nothing is
offered. Smaller pools are read whole, so every evaluation here (pools of hundreds) is unchanged.

A pool's index is built once: the items it reads to index are not kept (`Admission.peek_many`), and it is saved in
the memory's index cache (`save`, `open`) and caught up with the pool from there (`sync`), whatever the store
did since it was saved. An item is indexed by the content it had when it was first indexed; the index only
orders the checks, and the check reads the item as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from numpy.typing import NDArray

from guimem.vectors import VectorIndex, create_index

if TYPE_CHECKING:
    from guimem.memory.indexcache import IndexCache

log = logging.getLogger(__name__)
SCAN_UP_TO = 2_000
"""Pools up to this many items are read whole (the exact answer, as before the search existed)."""
LOOK_AT = 256
"""At most this many of a large pool's most relevant items are checked per search, asked of the index at once: an
exact search costs the same for 32 answers as for 256, and asking for 32, then 128, then 256 when none passed
searched up to three times a recall (measured at 100k items, a pool of 36,842: 2.8 searches a recall)."""
SAVE_AFTER = 2_000
"""An index is saved again once this many ids (or a tenth of it, if more) came or went since it was opened or
saved: a round's few new items are caught up with by the next process instead of rewriting a large index."""

T = TypeVar("T")


class PoolSearch:
    """A relevance index over one pool, kept in step with its entries (ids in entry order).

    Args:
        backend: The vector index backend (`MemoryKit.vector_index`).
        dim: Vector dimension.
    """

    def __init__(self, backend: str, dim: int) -> None:
        self._backend, self._dim = backend, dim
        self._index: VectorIndex = create_index(backend, dim)
        self._entries: Sequence[tuple[int, str]] | None = None  # the pool's list as last seen (held: its identity)
        self._seen = -1
        self._members: set[str] = set()
        self.unsaved = 0
        """How many ids came or went since the index was opened or saved."""

    def __len__(self) -> int:
        return len(self._index)

    def sync(self, entries: Sequence[tuple[int, str]],
             vectors: Callable[[list[str]], tuple[list[str], NDArray[np.float32]]]) -> None:
        """Catch up with ``entries``: index the ids not indexed yet (``vectors`` gives the ids it found and their
        rows), forget the ones that left. Nothing is read when the pool is as last seen."""
        if entries is self._entries and len(entries) == self._seen:
            return
        members = {item_id for _, item_id in entries}
        gone = [i for i in self._members if i not in members]
        if gone:
            self._index.remove(gone)
        new = [i for _, i in entries if i not in self._index]
        added = 0
        for start in range(0, len(new), 512):
            found, rows = vectors(new[start:start + 512])
            if found:
                self._index.add(found, rows)
                added += len(found)
        self._entries, self._seen, self._members = entries, len(entries), members
        self.unsaved += len(gone) + added

    @property
    def due(self) -> bool:
        """Whether enough changed since the index was opened or saved to save it again (`SAVE_AFTER`)."""
        return self.unsaved > 0 and self.unsaved >= max(SAVE_AFTER, len(self._index) // 10)

    def save(self, cache: IndexCache, name: str) -> bool:
        """Write the index and its members as the cache's entry ``name`` (valid as the store changes: `sync`
        catches up with the pool). Whether it was written."""
        kept = sorted(i for i in self._members if i in self._index)  # members the index holds (some may have none)
        members = np.asarray(kept, dtype=str) if kept else np.zeros(0, dtype="<U1")
        written = cache.save_index(name, self._index, {"members": members}, revision=False) is not None
        if written:
            self.unsaved = 0
        return written

    def open(self, cache: IndexCache, name: str) -> bool:
        """Fill the index from the cache's entry ``name``, if there is a valid one; whether it was."""
        found = cache.load(name, revision=False)
        if found is None:
            return False
        folder = found[0]
        index = create_index(self._backend, self._dim)
        try:
            index.load(folder / "index")
            members = {str(i) for i in cache.array(folder, "members").tolist()}
        except Exception as exc:  # a corrupt cache entry is rebuilt, never trusted
            log.warning("pool index %s unreadable (%s); rebuilding", folder, exc)
            return False
        if any(i not in index for i in members):
            return False
        cache.warm(index)  # accepted: paged in
        self._index, self._members, self._entries, self._seen, self.unsaved = index, members, None, -1, 0
        return True

    def first(self, query: NDArray[np.float32], passes: Callable[[str], T | None]) -> tuple[str, T] | None:
        """The most relevant id for which ``passes`` gives a value (among the first `LOOK_AT`), with it."""
        for hit in self._index.search(query, min(LOOK_AT, len(self._index))):
            found = passes(hit.id) if hit.id in self._members else None
            if found is not None:
                return hit.id, found
        return None
