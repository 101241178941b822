"""The `Embedder` protocol, a content-hash cache around any embedder, and the factory."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
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


class CachedEmbedder:
    """Wraps an embedder with an LRU cache keyed by a hash of (role, text).

    Args:
        inner: The embedder to call on a miss.
        size: How many vectors to keep.
    """

    def __init__(self, inner: Embedder, size: int = 65536) -> None:
        self.inner = inner
        self.size = size
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[bytes, Vectors] = OrderedDict()

    @property
    def name(self) -> str:
        """The wrapped embedder's name."""
        return self.inner.name

    @property
    def dim(self) -> int:
        """The wrapped embedder's dimension."""
        return self.inner.dim

    def embed(self, texts: Sequence[str], role: EmbedRole = EmbedRole.QUERY) -> Vectors:
        """Embed, computing only the texts not already cached (in one batch)."""
        keys = [hashlib.blake2b(f"{role.value}\x00{t}".encode(), digest_size=16).digest() for t in texts]
        todo_texts: dict[bytes, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in self._cache:
                todo_texts.setdefault(key, text)
        fresh: dict[bytes, Vectors] = {}
        if todo_texts:
            fresh = dict(zip(todo_texts, self.inner.embed(list(todo_texts.values()), role), strict=True))
        self.misses += len(todo_texts)
        self.hits += len(texts) - len(todo_texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, key in enumerate(keys):
            vec = fresh.get(key)
            if vec is None:
                vec = self._cache[key]
                self._cache.move_to_end(key)
            out[i] = vec
        for key, vec in fresh.items():
            self._cache[key] = vec
            if len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return out


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
