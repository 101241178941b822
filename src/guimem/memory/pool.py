"""The most relevant item of a large pool that passes a check, found in relevance order, in bounded time.

The stack offers another task's item only where the task's own memory has nothing for the screen, and only
the one most relevant to this screen and goal that fits (`StackMemory._offers`). Reading the whole pool of
an app to find it costs a body read per item per recall: seconds at 100k items. A pool larger than
`SCAN_UP_TO` is searched instead: a vector index over its items' relevance vectors answers in relevance
order, and the items are checked one by one from the most relevant, at most `LOOK_AT` of them. The answer
is the same as reading the pool whenever the most relevant item that fits is among the first `LOOK_AT` the
index returns (HNSW search above 50k vectors is approximate: `guimem.vectors.auto`); past that, nothing is
offered. Smaller pools are read whole, so every evaluation here (pools of hundreds) is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from guimem.vectors import VectorIndex, create_index

SCAN_UP_TO = 2_000
"""Pools up to this many items are read whole (the exact answer, as before the search existed)."""
LOOK_AT = 256
"""At most this many of a large pool's most relevant items are checked per search."""
FIRST = 32
"""Items asked of the index first; four times more each time none of them passes, up to `LOOK_AT`."""

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
        for start in range(0, len(new), 512):
            found, rows = vectors(new[start:start + 512])
            if found:
                self._index.add(found, rows)
        self._entries, self._seen, self._members = entries, len(entries), members

    def first(self, query: NDArray[np.float32], passes: Callable[[str], T | None]) -> tuple[str, T] | None:
        """The most relevant id for which ``passes`` gives a value (among the first `LOOK_AT`), with it."""
        checked, k = 0, FIRST
        while checked < min(LOOK_AT, len(self._index)):
            hits = self._index.search(query, min(k, LOOK_AT, len(self._index)))
            for hit in hits[checked:]:
                found = passes(hit.id) if hit.id in self._members else None
                if found is not None:
                    return hit.id, found
            if len(hits) <= checked:
                break
            checked, k = len(hits), k * 4
        return None
