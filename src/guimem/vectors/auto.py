"""Exact search while it is the faster one; HNSW once an index outgrows it (chosen by size, automatically).

Measured with ``benchmarks/recall_end_to_end.py`` on this project's machine (2 cores), 384-d vectors built
from real e5 embeddings of screen and goal texts: exact NumPy top-10 takes 1.6 ms at 50k vectors and
3.6 ms at 100k; HNSW (connectivity 16, expansion_add 128) builds in 8 s / 23 s and answers in 0.26 ms /
0.37 ms at recall@10 0.983 / 0.967 with expansion_search 64. Exact search passes 2 ms near 60k vectors,
so the switch is at 50k. The graph holds its vectors in half precision (`HNSW_DTYPE`) and searches with the
expansion its size was measured to need (`SEARCH_EXPANSION`, up to 1M vectors).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from guimem.errors import MissingDependencyError, StoreError
from guimem.vectors.base import Hit
from guimem.vectors.exact import ExactIndex
from guimem.vectors.paging import Warming

if TYPE_CHECKING:
    from guimem.vectors.hnsw import HnswIndex

log = logging.getLogger(__name__)
SWITCH_AT = 50_000
"""Below this many vectors exact search is used (measured: see the module docstring)."""
HNSW_DTYPE = "f16"
"""How the HNSW graph holds its vectors: half precision halves a big index's largest part (1M × 384 float32 is
1.5 GB); measured with ``benchmarks/recall_end_to_end.py --ann-dtypes f32,f16`` (docs/performance.md)."""


SEARCH_EXPANSION: dict[int, tuple[tuple[int, int], ...]] = {
    16: ((200_000, 64), (1_000_000, 128)),
    24: ((1_000_000, 96),),
}
"""Per graph degree (M): (size, the smallest ef of the measured sweep 16, 32, 64, 96, 128, 256 whose recall@10
reached 0.95 at that size), f16 vectors (``benchmarks/recall_end_to_end.py --ann N --ann-connectivity M``,
docs/performance.md). M 16 is what an index that grew past the switch has: 0.967 at 100k, 0.969 at 200k with
ef 64; at 1M 0.920 with ef 64, 0.961 with ef 128 (1.17 ms p50). M 24: 0.952 at 1M with ef 96 (float32)."""


def search_expansion(size: int, connectivity: int) -> int:
    """The search expansion (ef) for a graph of ``connectivity`` holding ``size`` vectors: the one measured at the
    smallest measured size at or above it (recall only falls as a graph grows), the largest one beyond them."""
    steps = SEARCH_EXPANSION.get(connectivity, SEARCH_EXPANSION[16])
    return next((ef for at, ef in steps if size <= at), steps[-1][1])


def hnsw_params(size: int) -> tuple[int, int, int]:
    """(connectivity, expansion_add, expansion_search) for an index of ``size`` vectors built at once (one that
    grows past `SWITCH_AT` keeps the switch's connectivity; its expansion follows its size, `search_expansion`)."""
    connectivity = 16 if size < 200_000 else 24
    return connectivity, 128, search_expansion(size, connectivity)


class AutoIndex:
    """A `VectorIndex` that is exact below ``switch_at`` vectors and HNSW at or above it.

    Args:
        dim: Vector dimension.
        switch_at: Size at which the exact index is rebuilt as HNSW (never switched back: removals are rare).
        dtype: How the HNSW graph holds its vectors (`guimem.vectors.hnsw.SCALARS`).
    """

    def __init__(self, dim: int, switch_at: int = SWITCH_AT, dtype: str = HNSW_DTYPE) -> None:
        self._dim = dim
        self.switch_at = switch_at
        self.dtype = dtype
        self._exact: ExactIndex | None = ExactIndex(dim)
        self._hnsw: HnswIndex | None = None

    @property
    def backend(self) -> str:
        """``exact`` or ``hnsw``: which search answers now."""
        return "exact" if self._exact is not None else "hnsw"

    @property
    def _active(self):  # type: ignore[no-untyped-def]
        return self._exact if self._exact is not None else self._hnsw

    @property
    def dim(self) -> int:
        """The vector dimension."""
        return self._dim

    def __len__(self) -> int:
        return len(self._active)

    def __contains__(self, ident: object) -> bool:
        return ident in self._active

    def add(self, ids: Sequence[str], vectors: NDArray[np.float32]) -> None:
        """Add or replace vectors (switching to HNSW when the size reaches ``switch_at``)."""
        self._active.add(ids, vectors)
        if self._exact is not None and len(self._exact) >= self.switch_at:
            self._switch()

    def _switch(self) -> None:
        try:
            from guimem.vectors.hnsw import HnswIndex, _new_index

            _new_index(self._dim, 16, 16, 16)
        except MissingDependencyError:
            log.warning("%d vectors: HNSW would be faster, but usearch is not installed "
                        "(pip install 'guimem[hnsw]'); staying exact", len(self))
            self.switch_at = 2**62
            return
        exact = self._exact
        assert exact is not None
        n = len(exact)
        hnsw = HnswIndex(self._dim, *hnsw_params(n), exact_below=0, dtype=self.dtype)
        ids, matrix = exact.arrays()
        hnsw.add(ids, np.asarray(matrix))
        self._hnsw, self._exact = hnsw, None

    def remove(self, ids: Sequence[str]) -> None:
        """Remove ids (unknown ones are ignored)."""
        self._active.remove(ids)

    def search(self, query: NDArray[np.float32], k: int) -> list[Hit]:
        """The ``k`` nearest ids (a graph searched with the expansion its size needs, `search_expansion`)."""
        if self._hnsw is not None:
            ef = search_expansion(len(self._hnsw), self._hnsw.connectivity)
            if ef != self._hnsw.expansion_search:
                self._hnsw.expansion_search = ef
        hits: list[Hit] = self._active.search(query, k)
        return hits

    def save(self, path: Path) -> None:
        """Write the active index and which one it is."""
        path.mkdir(parents=True, exist_ok=True)
        (path / "backend.txt").write_text(self.backend)
        self._active.save(path / self.backend)

    def warm(self) -> list[Warming]:
        """Page in what the last `load` mapped (`guimem.vectors.paging`)."""
        if self._exact is not None:
            return self._exact.warm()
        return self._hnsw.warm() if self._hnsw is not None else []

    def load(self, path: Path) -> None:
        """Load what `save` wrote."""
        try:
            backend = (path / "backend.txt").read_text().strip()
        except OSError as exc:
            raise StoreError(f"cannot load index from {path}: {exc}") from exc
        if backend == "exact":
            exact = ExactIndex(self._dim)
            exact.load(path / "exact")
            self._exact, self._hnsw = exact, None
        elif backend == "hnsw":
            from guimem.vectors.hnsw import HnswIndex

            hnsw = HnswIndex(self._dim, exact_below=0)
            hnsw.load(path / "hnsw")
            self._hnsw, self._exact = hnsw, None
        else:
            raise StoreError(f"unknown index backend {backend!r} in {path}")
