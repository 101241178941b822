"""One vector index's search, run a step ahead of recall while the env settles (`guimem.memory.base.Speculating`).

Between two steps a browser's work evicts the index from the processor's caches: at 100k skills an HNSW search
took 0.98 ms cold against 0.21 ms warm (`benchmarks/recall_end_to_end.py`). A memory that speculates on the
screen the env previews can also search with the query that screen gives, on a background thread, and keep
the answer; recall asking with the same query vector (the settled screen's signature is the preview's) takes
it. A search is a function of the query vector, ``k`` and the index alone, so what is kept is what recall would
compute: every change of the index (`changing`) forgets it and waits for a search in flight.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
from numpy.typing import NDArray

from guimem.vectors import Hit, VectorIndex

log = logging.getLogger(__name__)


class SearchAhead:
    """The searches of one index (the one ``index`` gives at each call), the last answer kept.

    Args:
        index: Gives the index searched now (a memory may replace its index when it reopens).
    """

    def __init__(self, index: Callable[[], VectorIndex]) -> None:
        self._index = index
        self._lock = threading.Lock()  # a search, a change of the index, the kept answer
        self._changes = 0
        self._kept: tuple[int, bytes, int, list[Hit]] | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False
        self.taken = 0
        """Searches recall found done ahead."""

    @contextmanager
    def changing(self) -> Iterator[None]:
        """Hold around every change or replacement of the index: no search runs meanwhile, and no answer found
        before it is given after it."""
        with self._lock:
            self._kept = None
            self._changes += 1
            yield

    def search(self, vector: NDArray[np.float32], k: int) -> list[Hit]:
        """The index's top ``k`` for ``vector``: the answer kept from the last search when it was asked with the
        same vector and ``k`` since the index last changed, else searched now (and kept)."""
        key = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
        with self._lock:
            kept = self._kept
            if kept is not None and kept[0] == self._changes and kept[1] == key and kept[2] == k:
                self.taken += 1
                return list(kept[3])
            hits = self._index().search(vector, k)
            self._kept = (self._changes, key, k, list(hits))
            return hits

    def ahead(self, query: Callable[[], NDArray[np.float32] | None], k: int) -> None:
        """Search, on a background thread, with the vector ``query`` computes there (None: nothing to search);
        returns at once; nothing once closed. What fails is logged: searching ahead only gives recall a head start."""
        if self._closed:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="guimem-search-ahead")
        self._pool.submit(self._run, query, k)

    def _run(self, query: Callable[[], NDArray[np.float32] | None], k: int) -> None:
        try:
            vector = query()
            if vector is not None:
                self.search(vector, k)
        except Exception as exc:  # recall searches again itself
            log.warning("searching ahead failed (recall searches itself): %s", exc)

    def settle(self) -> None:
        """Wait for the searches ahead asked for so far."""
        if self._pool is not None:
            self._pool.submit(lambda: None).result()

    def close(self) -> None:
        """Wait for a search in flight, drop those not started and stop the background thread; nothing is searched
        ahead after (idempotent)."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
