"""Approximate cosine search with HNSW graphs (usearch), for stores with many thousands of vectors."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from guimem.errors import MissingDependencyError, StoreError
from guimem.vectors import paging
from guimem.vectors.base import Hit

SCALARS = ("f32", "f16")
"""How an index may hold its vectors: float32, or float16 (half the memory; usearch widens them to compute)."""

SPARSEST = 4
"""A saved graph may have given at most this many keys per id it still holds (removed and replaced ones leave
gaps): more is a damaged or hostile file, rebuilt from the store rather than held as a list that long."""


def _new_index(dim: int, connectivity: int, expansion_add: int, expansion_search: int, dtype: str = "f32") -> Any:
    try:
        from usearch.index import Index
    except ImportError as exc:
        raise MissingDependencyError("usearch", "hnsw") from exc
    return Index(
        ndim=dim, metric="cos", dtype=dtype, connectivity=connectivity,
        expansion_add=expansion_add, expansion_search=expansion_search,
    )


class HnswIndex:
    """usearch HNSW with string ids mapped to integer keys.

    Args:
        dim: Vector dimension.
        connectivity: Graph degree (M).
        expansion_add: ef at construction.
        expansion_search: ef at query time (higher = better recall, slower).
        exact_below: Below this many vectors, search by brute force: it is exact, and at that size
            faster than walking the graph (usearch's threaded build is not deterministic).
        dtype: How the graph holds the vectors (`SCALARS`): ``f16`` halves the largest part of a big index.
    """

    def __init__(self, dim: int, connectivity: int = 32, expansion_add: int = 256, expansion_search: int = 320,
                 exact_below: int = 4096, dtype: str = "f32") -> None:
        if dtype not in SCALARS:
            raise ValueError(f"HNSW vectors are one of {SCALARS}, not {dtype!r}")
        self._dim = dim
        self.exact_below = exact_below
        self._params = (connectivity, expansion_add, expansion_search)
        self.dtype = dtype
        self._index = _new_index(dim, *self._params, dtype)
        self._keys: dict[str, int] = {}  # id -> the graph's key
        self._ids: list[str | None] = []  # key -> id (keys are given in order from 0; None once removed)
        self._next = 0
        self._reused: dict[str, int] = {}  # removed ids -> their keys, while this process holds the index
        self._view: Path | None = None
        self._pages = paging.Pages()  # the viewed graph's mapping, to page in (`warm`)

    @property
    def dim(self) -> int:
        """The vector dimension."""
        return self._dim

    @property
    def connectivity(self) -> int:
        """The graph's degree (M), fixed when it was built."""
        return self._params[0]

    @property
    def expansion_search(self) -> int:
        """ef at query time."""
        return self._params[2]

    @expansion_search.setter
    def expansion_search(self, ef: int) -> None:
        self._index.expansion_search = int(ef)
        self._params = (self._params[0], self._params[1], int(ef))

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, ident: object) -> bool:
        return ident in self._keys

    def add(self, ids: Sequence[str], vectors: NDArray[np.float32]) -> None:
        """Add or replace vectors. An id added again keeps its key (a memory adds an item again at every merge
        and status change: new keys each time would leave the key → id list ever sparser, `SPARSEST`)."""
        vecs = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self._dim)
        if len(set(ids)) < len(ids):  # an id twice in one call: its last vector, as one call after another
            last = {ident: n for n, ident in enumerate(ids)}
            ids, vecs = list(last), vecs[list(last.values())]
        if not len(ids):
            return
        self._writable()
        keys = np.empty(len(ids), dtype=np.uint64)
        for n, ident in enumerate(ids):
            key = self._keys.get(ident)
            if key is None:
                key = self._reused.pop(ident, None)
            if key is None:
                key = self._next
                self._next += 1
                self._ids.append(None)
            elif ident in self._keys:
                self._index.remove(key)
            keys[n] = key
            self._keys[ident] = key
            self._ids[key] = ident
        self._index.add(keys, vecs)

    def remove(self, ids: Sequence[str]) -> None:
        """Remove ids (unknown ones are ignored)."""
        if any(i in self._keys for i in ids):
            self._writable()
        for ident in ids:
            key = self._keys.pop(ident, None)
            if key is not None:
                self._ids[key] = None
                self._index.remove(key)
                self._reused[ident] = key  # the id's key if it comes back (a skill rejected, then verified)

    def search(self, query: NDArray[np.float32], k: int) -> list[Hit]:
        """Approximate top-k by cosine similarity."""
        if not self._keys or k <= 0:
            return []
        found = self._index.search(np.asarray(query, dtype=np.float32).reshape(self._dim), min(k, len(self._keys)),
                                   exact=len(self._keys) < self.exact_below)
        hits = []
        for key, dist in zip(found.keys.tolist(), found.distances.tolist(), strict=True):
            ident = self._ids[key] if 0 <= key < len(self._ids) else None
            if ident is not None:
                hits.append(Hit(ident, 1.0 - float(dist)))
        return hits

    def save(self, path: Path) -> None:
        """Write ``hnsw.usearch``, ``ids.npy``/``keys.npy`` and ``meta.json`` into ``path``.

        The graph is written to a temporary file and renamed over the target, never written in place (another
        process may have the target memory-mapped). A graph still viewed (unchanged since `load`) is written from
        its mapping, not read again from the file it was loaded from (an index cache removes a replaced entry,
        perhaps another worker's), and is viewed from the new file from then on; saved onto the very file it
        views, nothing is written."""
        path.mkdir(parents=True, exist_ok=True)
        target = path / "hnsw.usearch"
        if not (self._view is not None and _same_file(self._view, target)):
            part = target.with_name(f".{target.name}.{os.getpid()}.part")
            try:
                self._index.save(str(part))  # an OSError (a full disk): the index cache does not write the entry
                os.replace(part, target)
            finally:
                part.unlink(missing_ok=True)
            if self._view is not None:
                self._pages.let_go()
                try:
                    index = _new_index(self._dim, *self._params, self.dtype)
                    self._pages.track(target, lambda: index.view(str(target)), keep=index)
                except (ValueError, RuntimeError) as exc:
                    raise OSError(f"cannot view the HNSW index just written to {target}: {exc}") from exc
                self._index, self._view = index, target
        ids = list(self._keys)
        np.save(path / "ids.npy", np.asarray(ids, dtype=str) if ids else np.zeros(0, dtype="<U1"))
        np.save(path / "keys.npy", np.asarray([self._keys[i] for i in ids], dtype=np.uint64))
        (path / "meta.json").write_text(json.dumps({"next": self._next, "params": list(self._params),
                                                    "dtype": self.dtype}))

    def load(self, path: Path) -> None:
        """Load what `save` wrote: the graph memory-mapped (read-only) until the first change (`warm` pages it in)."""
        try:
            meta = json.loads((path / "meta.json").read_text())
            ids = np.load(path / "ids.npy").tolist()
            keys = np.load(path / "keys.npy").tolist()
            self._params = tuple(int(p) for p in meta.get("params", self._params))  # type: ignore[assignment]
            dtype = str(meta.get("dtype", "f32"))  # an index saved before it said: float32
            index = _new_index(self._dim, *self._params, dtype)
            pages = paging.Pages()  # the file's own scalar kind is what usearch reads
            pages.track(path / "hnsw.usearch", lambda: index.view(str(path / "hnsw.usearch")), keep=index)
            following = int(meta["next"])
        except (OSError, ValueError, RuntimeError, KeyError, TypeError) as exc:
            raise StoreError(f"cannot load HNSW index from {path}: {exc}") from exc
        if len(ids) != len(keys) or any(not 0 <= k < following for k in keys) or dtype not in SCALARS:
            raise StoreError(f"HNSW index at {path} does not match its ids")
        if following > SPARSEST * len(ids) + 65_536:  # the key -> id list is as long as the keys given
            raise StoreError(f"HNSW index at {path} gave {following:,} keys for {len(ids):,} ids: rebuild it")
        self._pages.let_go()
        self._index, self._pages = index, pages
        self.dtype = dtype
        self._view = path / "hnsw.usearch"
        self._keys = {str(i): int(k) for i, k in zip(ids, keys, strict=True)}
        self._ids = [None] * following
        for ident, key in self._keys.items():
            self._ids[key] = ident
        self._next = following
        self._reused = {}

    def warm(self) -> list[paging.Warming]:
        """Page in the graph the last `load` viewed, on a background thread (`paging.warm`); none once it changed."""
        return self._pages.warm()

    def _writable(self) -> None:
        """A viewed (memory-mapped) graph is copied into memory before it changes: from the mapping, which
        outlives the file (another worker's index cache may have removed it since)."""
        if self._view is not None:
            self._pages.let_go()
            self._index, self._view = self._index.copy(), None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # either is gone (or never was): not the same file
        return False
