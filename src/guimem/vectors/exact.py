"""Exact cosine search with NumPy: one matrix product per query."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from guimem.errors import StoreError
from guimem.vectors import coded, paging
from guimem.vectors.base import Hit


class ExactIndex:
    """A growable float32 matrix; removal swaps in the last row so rows stay dense.

    A loaded index is memory-mapped and read-only until it is first changed (then copied into
    memory), so opening one of a million vectors costs milliseconds, not a read of the whole file.
    From `coded.CODED_FROM` rows a search reads int8 codes of the rows first and the float32 rows only
    where they could be among the best (`coded.Codes`): the same answer, a quarter of the bytes.
    """

    def __init__(self, dim: int) -> None:
        self._dim = dim
        self._matrix: NDArray[np.float32] = np.zeros((16, dim), dtype=np.float32)
        self._ids: list[str] = []
        self._row_of: dict[str, int] | None = {}
        self._n = 0
        self._codes: coded.Codes | None = coded.Codes(dim)  # used where NumKong is installed
        self._pages = paging.Pages()  # the loaded vectors' mapping, to page in (`warm`)

    @property
    def dim(self) -> int:
        """The vector dimension."""
        return self._dim

    def __len__(self) -> int:
        return self._n

    @property
    def _rows(self) -> dict[str, int]:
        if self._row_of is None:  # built on first need after a load
            self._row_of = {ident: row for row, ident in enumerate(self._ids)}
        return self._row_of

    def __contains__(self, ident: object) -> bool:
        return ident in self._rows

    def _writable(self, need: int) -> None:
        if need > self._matrix.shape[0] or not self._matrix.flags.writeable:
            grown = np.zeros((max(need, 2 * self._matrix.shape[0], 16), self._dim), dtype=np.float32)
            grown[: self._n] = self._matrix[: self._n]
            self._matrix = grown
            self._pages.let_go()

    def add(self, ids: Sequence[str], vectors: NDArray[np.float32]) -> None:
        """Add or replace vectors."""
        vecs = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self._dim)
        self._writable(self._n + len(ids))
        rows = self._rows
        for ident, vec in zip(ids, vecs, strict=True):
            row = rows.get(ident)
            if row is None:
                row = self._n
                self._ids.append(ident)
                rows[ident] = row
                self._n += 1
            elif self._codes is not None:
                self._codes.changed(row)
            self._matrix[row] = vec

    def remove(self, ids: Sequence[str]) -> None:
        """Remove ids (unknown ones are ignored)."""
        rows = self._rows
        for ident in ids:
            row = rows.pop(ident, None)
            if row is None:
                continue
            self._writable(self._n)
            last = self._n - 1
            if row != last:
                moved = self._ids[last]
                self._matrix[row] = self._matrix[last]
                self._ids[row] = moved
                rows[moved] = row
                if self._codes is not None:
                    self._codes.changed(row)
            self._ids.pop()
            self._n -= 1
            if self._codes is not None:
                self._codes.truncated(self._n)

    def search(self, query: NDArray[np.float32], k: int) -> list[Hit]:
        """Exact top-k by dot product (cosine for normalised vectors)."""
        n = self._n
        if n == 0 or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(self._dim)
        k = min(k, n)
        if self._codes is not None and n >= coded.CODED_FROM and k < n and coded.available():
            found = self._codes.top(self._matrix, n, q, k)
            if found is not None:
                return [Hit(self._ids[int(i)], float(s)) for i, s in zip(*found, strict=True)]
        scores = self._matrix[:n] @ q
        if k == 1:  # the nearest alone (a graph's node): one pass, ties to the lower row
            best = int(np.argmax(scores))
            return [Hit(self._ids[best], float(scores[best]))]
        top = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
        top = top[np.lexsort((top, -scores[top]))]  # best first, ties to the lower row
        return [Hit(self._ids[i], float(scores[i])) for i in top]

    def get(self, ident: str) -> NDArray[np.float32] | None:
        """The vector stored under ``ident`` (a read-only view), or None."""
        row = self._rows.get(ident)
        return None if row is None else self._matrix[row]

    def arrays(self) -> tuple[list[str], NDArray[np.float32]]:
        """The ids and their vectors, row by row (a view, not a copy)."""
        return list(self._ids), self._matrix[: self._n]

    def save(self, path: Path) -> None:
        """Write ``vectors.npy`` and ``ids.npy`` into ``path``."""
        path.mkdir(parents=True, exist_ok=True)
        for name in ("vectors.npy", "ids.npy"):  # replaced, never written through: it may be a link (`VectorTable`)
            (path / name).unlink(missing_ok=True)
        np.save(path / "vectors.npy", np.ascontiguousarray(self._matrix[: self._n]))
        np.save(path / "ids.npy", np.asarray(self._ids, dtype=str) if self._ids else np.zeros(0, dtype="<U1"))
        if self._codes is not None and self._n >= coded.CODED_FROM and coded.available():
            self._codes.save(path, self._matrix, self._n)
        else:  # codes an earlier save left here would not match these rows
            coded.Codes.remove(path)

    def load(self, path: Path) -> None:
        """Load what `save` wrote (the vectors memory-mapped, read-only until changed; `warm` pages them in)."""
        if (path / "segments.json").exists():  # `VectorTable.save` wrote rows in more files than this one reads
            raise StoreError(f"{path} holds a vector table of several segments: open it as a VectorTable")
        pages = paging.Pages()
        try:
            matrix = pages.load_array(path / "vectors.npy")
            ids = np.load(path / "ids.npy").tolist()
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot load exact index from {path}: {exc}") from exc
        if matrix.ndim != 2 or len(ids) != matrix.shape[0] or (matrix.shape[0] and matrix.shape[1] != self._dim):
            raise StoreError(f"exact index at {path} does not match: {matrix.shape} for {len(ids)} ids, "
                             f"dimension {self._dim}")
        self._matrix = matrix if matrix.shape[0] else np.zeros((16, self._dim), dtype=np.float32)
        self._ids = [str(i) for i in ids]
        self._n = len(self._ids)
        self._row_of = None
        self._pages.let_go()
        self._pages = pages
        if self._codes is not None:
            self._codes.load(path, self._n)

    def warm(self) -> list[paging.Warming]:
        """Page in the vectors (and their codes) the last `load` mapped, on a background thread (`paging.warm`)."""
        return self._pages.warm() + (self._codes.warm() if self._codes is not None else [])
