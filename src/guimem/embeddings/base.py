"""The `Embedder` protocol, a content-hash cache around any embedder, and the factory."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from enum import StrEnum
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from guimem.registry import Registry, default_registry
from guimem.settings import EmbedderSettings

Vectors = NDArray[np.float32]


class EmbedRole(StrEnum):
    """How a text is used: e5 prefixes ``query:`` / ``passage:`` accordingly.

    Use QUERY for both sides of a symmetric comparison (state vs state, intent vs intent) and
    for the query side of an asymmetric search; PASSAGE for stored documents searched by a query.
    """

    QUERY = "query"
    PASSAGE = "passage"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def name(self) -> str:
        """A stable identity (backend and model), recorded in run specs."""
        ...

    @property
    def dim(self) -> int:
        """The vector dimension."""
        ...

    def embed(self, texts: Sequence[str], role: EmbedRole = EmbedRole.QUERY) -> Vectors:
        """Embed a batch; returns shape ``(len(texts), dim)``, rows L2-normalised."""
        ...


def normalise_rows(vectors: NDArray[np.floating]) -> Vectors:
    """L2-normalise each row (zero rows stay zero)."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim == 1:
        v = v[None, :]
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (v / norms).astype(np.float32)
    return out


def cosine(a: NDArray[np.floating], b: NDArray[np.floating]) -> float:
    """Cosine similarity of two vectors."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 or nb == 0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


_CLOCK = threading.local()
CHUNK = 32
"""Texts per call into an embedder. Bulk work (a first open, an import, `learn` of many trajectories) goes in
chunks of this size: e5's rate is flat from 8 texts a call upwards (`benchmarks/embeddings.py --only-bulk`: 45
texts/s at 32 and 46 at 1,024 on this project's 2-core machine under load, 29 one at a time), so chunks cost
nothing, keep the engine's scratch memory bounded, and let a recall that needs the embedder meanwhile wait for
one chunk, not for the whole bulk job."""


def embedding_ms() -> float:
    """Milliseconds this thread has spent in `CachedEmbedder.embed` computing vectors or waiting for prefetched
    ones (cache hits cost nothing here): read before and after a call to see what embedding cost it."""
    return float(getattr(_CLOCK, "ms", 0.0))


@runtime_checkable
class Prefetching(Protocol):
    """An embedder that can start embedding texts ahead of the `embed` call that will ask for them."""

    def prefetch(self, texts: Sequence[str], role: EmbedRole = EmbedRole.QUERY) -> None:
        """Start embedding ``texts`` without waiting; a later `embed` of them takes the result."""
        ...


class CachedEmbedder:
    """Wraps an embedder with an LRU cache keyed by a hash of (role, text), and embeds ahead on request.

    `prefetch` starts embedding texts on a background thread and returns at once; a later `embed` of the
    same text takes that vector (waiting only for what is left of it) instead of computing it again. A
    vector is a function of (role, text) alone, so what was prefetched never changes what `embed` returns:
    it only moves the work earlier (the env's settle wait, while the agent waits anyway). Calls into the
    wrapped embedder are serialised, in chunks of `CHUNK` texts, and the cache is safe to share between threads;
    no lock is held while the wrapped embedder computes, except its own.

    Args:
        inner: The embedder to call on a miss.
        size: How many vectors to keep.
    """

    def __init__(self, inner: Embedder, size: int = 65536) -> None:
        self.inner = inner
        self.size = size
        self.hits = 0
        self.misses = 0
        self.prefetched = 0
        """Texts `embed` found embedded ahead by `prefetch` (waiting for the rest of the work, if any)."""
        self._cache: OrderedDict[bytes, Vectors] = OrderedDict()
        self._lock = threading.Lock()  # the cache, the counters and the pending table
        self._inner_lock = threading.Lock()  # one call into the wrapped embedder at a time
        self._pending: dict[bytes, Future[Vectors]] = {}
        self._unasked: set[bytes] = set()  # prefetched into the cache, not yet asked for
        self._ahead: ThreadPoolExecutor | None = None

    @property
    def name(self) -> str:
        """The wrapped embedder's name."""
        return self.inner.name

    @property
    def dim(self) -> int:
        """The wrapped embedder's dimension."""
        return self.inner.dim

    @staticmethod
    def _key(text: str, role: EmbedRole) -> bytes:
        return hashlib.blake2b(f"{role.value}\x00{text}".encode(), digest_size=16).digest()

    def _compute(self, texts: list[str], role: EmbedRole) -> Vectors:
        """The wrapped embedder's vectors, a chunk at a time (no lock of this cache held)."""
        if len(texts) <= CHUNK:
            with self._inner_lock:
                return self.inner.embed(texts, role)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), CHUNK):
            with self._inner_lock:
                out[start:start + CHUNK] = self.inner.embed(texts[start:start + CHUNK], role)
        return out

    def prefetch(self, texts: Sequence[str], role: EmbedRole = EmbedRole.QUERY) -> None:
        """Start embedding the texts not already cached or under way, on a background thread; returns at once.

        A failure there is not raised here: `embed` computes the text again, and fails loudly, if it asks."""
        todo: dict[bytes, str] = {}
        with self._lock:
            for text in texts:
                key = self._key(text, role)
                if key not in self._cache and key not in self._pending:
                    todo.setdefault(key, text)
            if not todo:
                return
            if self._ahead is None:
                self._ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="guimem-embed-ahead")
            future = self._ahead.submit(self._compute, list(todo.values()), role)
            for i, key in enumerate(todo):
                self._pending[key] = _row(future, i)

    def embed(self, texts: Sequence[str], role: EmbedRole = EmbedRole.QUERY) -> Vectors:
        """Embed, computing only the texts not already cached or prefetched (in one batch)."""
        keys = [self._key(t, role) for t in texts]
        started = time.perf_counter()
        waiting, todo, cached, ahead = self._look(keys, texts)  # cached vectors are taken here, under the lock
        fresh: dict[bytes, Vectors] = {}
        for key, future in waiting.items():
            try:
                fresh[key] = future.result()
            except Exception:
                todo.setdefault(key, texts[keys.index(key)])
        waited = len(fresh)
        if todo:
            fresh.update(zip(todo, self._compute(list(todo.values()), role), strict=True))
        computed = len(todo)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, key in enumerate(keys):
            out[i] = fresh[key] if key in fresh else cached[key]
        if fresh:
            _CLOCK.ms = embedding_ms() + (time.perf_counter() - started) * 1000
        with self._lock:
            self.misses += computed
            self.prefetched += ahead + waited
            self.hits += len(texts) - computed - waited
            for key, vec in fresh.items():
                self._pending.pop(key, None)
                self._put(key, vec)
            self._settle_pending()
        return out

    def _look(self, keys: list[bytes], texts: Sequence[str]
              ) -> tuple[dict[bytes, Future[Vectors]], dict[bytes, str], dict[bytes, Vectors], int]:
        """For each key: which are under way (their futures), which must be computed (their
        texts), which are cached (their vectors), and how many of those were prefetched and are asked for the
        first time."""
        waiting: dict[bytes, Future[Vectors]] = {}
        todo: dict[bytes, str] = {}
        found: dict[bytes, Vectors] = {}
        ahead = 0
        with self._lock:
            for key, text in zip(keys, texts, strict=True):
                if key in found or key in waiting or key in todo:
                    continue
                vec = self._cache.get(key)
                if vec is not None:
                    self._cache.move_to_end(key)
                    found[key] = vec
                    if key in self._unasked:
                        self._unasked.discard(key)
                        ahead += 1
                elif key in self._pending:
                    waiting[key] = self._pending[key]
                else:
                    todo.setdefault(key, text)
        return waiting, todo, found, ahead

    def _put(self, key: bytes, vec: Vectors) -> None:
        """Cache a vector (under ``_lock``), evicting the least recently used."""
        self._cache[key] = vec
        if len(self._cache) > self.size:
            old, _ = self._cache.popitem(last=False)
            self._unasked.discard(old)

    def _settle_pending(self) -> None:
        """Move finished prefetches into the cache (under ``_lock``); texts never asked for age out like any."""
        for key, future in list(self._pending.items()):
            if future.done():
                del self._pending[key]
                if not future.cancelled() and future.exception() is None:
                    self._put(key, future.result())
                    self._unasked.add(key)

    def close(self) -> None:
        """Stop the background thread (waiting for the prefetch under way); embedding still works afterwards."""
        with self._lock:
            ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.shutdown(wait=True)


def _row(batch: Future[Vectors], i: int) -> Future[Vectors]:
    """A future of row ``i`` of a batch's future (which always resolves, cancelled or failed included)."""
    row: Future[Vectors] = Future()

    def done(f: Future[Vectors]) -> None:
        try:
            if f.cancelled():
                row.set_exception(RuntimeError("the prefetch was cancelled"))
            elif (exc := f.exception()) is not None:
                row.set_exception(exc)
            else:
                row.set_result(f.result()[i])
        except BaseException as exc:
            if not row.done():
                row.set_exception(exc)

    batch.add_done_callback(done)
    return row


def create_embedder(settings: EmbedderSettings, registry: Registry | None = None) -> CachedEmbedder:
    """Build the configured embedder, wrapped in a cache."""
    reg = registry or default_registry()
    kwargs: dict[str, object] = {}
    if settings.name == "hashing":
        kwargs["dim"] = settings.dim
    elif settings.name == "openai":
        kwargs.update(base_url=settings.base_url, model=settings.model)
    inner: Embedder = reg.create("embedder", settings.name, **kwargs)
    return CachedEmbedder(inner, size=settings.cache_size)
