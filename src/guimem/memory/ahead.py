"""Recall, or one vector index's search, run a step ahead while the env settles (`guimem.memory.base.Speculating`).

Between two steps a browser's work evicts the index from the processor's caches: at 100k skills an HNSW search
took 0.98 ms cold against 0.21 ms warm (`benchmarks/recall_end_to_end.py`). A memory that speculates on the
screen the env previews can also search with the query that screen gives, on a background thread, and keep
the answer; recall asking with the same query vector (the settled screen's signature is the preview's) takes
it. A search is a function of the query vector, ``k`` and the index alone, so what is kept is what recall would
compute: every change of the index (`changing`) forgets it and waits for a search in flight.

A memory whose recall is a function of the task, the screen and what it holds can do its whole recall ahead the
same way (`recall_ahead`): recall on a screen the same as the preview (`same_screen`: a settled page often is)
takes the answer (`recalled`), after its own changes are counted (`changing`) exactly as for a search. A
recall's reads and a change never run at once: both hold one lock.

How each recall used the work done ahead (`AheadUse`: taken, waited for, or computed because the screen or memory
differed) is kept for the thread that asked (`take_ahead_use`), so that an episode's trace can say it per step.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from guimem.types import AheadUse, Observation, Task
from guimem.types.ui import noted_source, same_screen, screen_key
from guimem.vectors import Hit, VectorIndex

log = logging.getLogger(__name__)
T = TypeVar("T")
_USE = threading.local()


def take_ahead_use() -> tuple[AheadUse | None, float]:
    """How this thread's last recall since the previous call used the recall done ahead (None: no recall of a
    memory that recalls ahead ran), and the ms it waited for one under way; forgets both."""
    use: tuple[AheadUse | None, float] = getattr(_USE, "last", (None, 0.0))
    _USE.last = (None, 0.0)
    return use


def _used(use: AheadUse, waited_ms: float = 0.0) -> None:
    _USE.last = (use, round(waited_ms, 3))


class RecallAhead:
    """One memory's recall for the screen the env previews, run on a background thread, the last answer kept."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # a recall (or search), a change of the memory, the kept answers
        self._changes = 0
        self._recalled: tuple[int, tuple[Task, Hashable], Observation, Any] | None = None
        self._pending: tuple[Future[bool], tuple[Task, Hashable], Observation] | None = None  # the last asked ahead
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False
        self.recalls_taken = 0
        """Recalls found done ahead (`recalled`)."""

    @contextmanager
    def changing(self) -> Iterator[None]:
        """Hold around every change of what a recall reads (an index, the kept bodies, the adjacency): no recall
        runs meanwhile, and no answer found before it is given after it (reentrant)."""
        with self._lock:
            self._forget()
            self._changes += 1
            yield

    def _forget(self) -> None:
        self._recalled = None

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Hold around a read that keeps what it read where a recall looks (no recall runs meanwhile); nothing
        changes, so the kept answers stay (reentrant)."""
        with self._lock:
            yield

    def _submit(self, work: Callable[..., T], *args: Any) -> Future[T] | None:
        if self._closed:
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="guimem-ahead")
        return self._pool.submit(work, *args)

    def recall_ahead(self, task: Task, observation: Observation, recall: Callable[[], Any], also: Hashable = None
                     ) -> None:
        """Run ``recall`` (the memory's recall for ``task`` on the previewed ``observation``, without its side
        effects) on the background thread and keep its answer for `recalled`; returns at once; nothing once
        closed. ``also``: whatever else the answer depends on (the stack's trial slot). What fails is logged
        (recall runs again itself)."""
        key = (task, also)
        if self._pending is not None:  # a newer preview: the last one's work, if not started, is not needed
            self._pending[0].cancel()
        future = self._submit(self._recall_run, key, observation, recall)
        if future is not None:
            self._pending = (future, key, observation)

    def _recall_run(self, key: tuple[Task, Hashable], observation: Observation, recall: Callable[[], Any]) -> bool:
        """Recall ahead and keep the answer; whether it was kept."""
        try:
            with self._lock:
                if self._closed:
                    return False
                changes = self._changes
                answer = recall()
                self._recalled = (changes, key, observation, answer)
            if noted_source(observation) is None:  # else `recalled` compares the texts the env noted
                screen_key(observation)  # what `recalled` compares, worked out now rather than on the agent's time
            return True
        except Exception as exc:  # recall runs again itself
            log.warning("recalling ahead failed (recall runs itself): %s", exc)
            return False

    def recalled(self, task: Task, observation: Observation, recall: Callable[[], T], also: Hashable = None) -> T:
        """What ``recall`` gives for ``task`` on ``observation``: the answer `recall_ahead` kept when it was for
        the same task (and ``also``) on the same screen (`same_screen`) and nothing changed since (`changing`),
        else computed now. Either way under the lock: a recall ahead in flight is waited for, never run beside;
        one not started yet is waited for when it is for this task and screen, and dropped when it is not."""
        key = (task, also)
        pending, self._pending = self._pending, None
        asked = False  # a recall ahead was asked for this task and screen since the last recall
        kept_ahead = False  # and it kept its answer
        waited = 0.0  # ms waited for it to finish
        if pending is not None:
            future, for_task, for_screen = pending
            if for_task == key and same_screen(for_screen, observation):
                asked, under_way, t = True, not future.done(), time.perf_counter()
                with suppress(CancelledError):  # closed meanwhile: recall runs itself
                    kept_ahead = future.result()  # this very recall, started or about to be: `_recall_run` logs
                if under_way:
                    waited = (time.perf_counter() - t) * 1000
            else:
                future.cancel()  # for another screen: dropped if not started (the lock waits for one that has)
        with self._lock:
            kept = self._recalled
            if kept is not None and kept[0] == self._changes and kept[1] == key and same_screen(kept[2], observation):
                self.recalls_taken += 1
                _used(AheadUse.WAITED if waited else AheadUse.TAKEN, waited)
                answer: T = kept[3]
                return answer
            if pending is not None and not asked:
                _used(AheadUse.OTHER_SCREEN)
            elif kept_ahead:  # kept, then forgotten by a change of memory (`changing`)
                _used(AheadUse.CHANGED, waited)
            else:  # nothing asked ahead since the last recall, or it failed (or memory closed)
                _used(AheadUse.NONE, waited)
            return recall()

    def settle(self) -> None:
        """Wait for the searches ahead asked for so far."""
        if self._pool is not None:
            self._pool.submit(lambda: None).result()

    def close(self) -> None:
        """Wait for a recall in flight, drop those not started, stop the background thread and forget the kept
        answers; nothing is recalled ahead after (idempotent)."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            self._forget()


class SearchAhead(RecallAhead):
    """A `RecallAhead` that also keeps the last search of one index (the one ``index`` gives at each call): a
    recall on another screen with the same query vector takes it.

    Args:
        index: Gives the index searched now (a memory may replace its index when it reopens).
    """

    def __init__(self, index: Callable[[], VectorIndex]) -> None:
        super().__init__()
        self._index = index
        self._kept: tuple[int, bytes, int, list[Hit]] | None = None
        self.taken = 0
        """Searches recall found done ahead."""

    def _forget(self) -> None:
        super()._forget()
        self._kept = None

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
