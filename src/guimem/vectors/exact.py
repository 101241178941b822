"""Exact cosine search with NumPy: one matrix product per query."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from guimem.errors import StoreError
from guimem.vectors.base import Hit


class ExactIndex:
    """A growable float32 matrix; removal swaps in the last row so rows stay dense."""

    def __init__(self, dim: int) -> None:
        self._dim = dim
        self._matrix = np.zeros((16, dim), dtype=np.float32)
        self._ids: list[str] = []
        self._rows: dict[str, int] = {}

    @property
    def dim(self) -> int:
        """The vector dimension."""
        return self._dim

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, ident: object) -> bool:
        return ident in self._rows

    def add(self, ids: Sequence[str], vectors: NDArray[np.float32]) -> None:
        """Add or replace vectors."""
        vecs = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self._dim)
        need = len(self._ids) + len(ids)
        if need > self._matrix.shape[0]:
            grown = np.zeros((max(need, 2 * self._matrix.shape[0]), self._dim), dtype=np.float32)
            grown[: len(self._ids)] = self._matrix[: len(self._ids)]
            self._matrix = grown
        for ident, vec in zip(ids, vecs, strict=True):
            row = self._rows.get(ident)
            if row is None:
                row = len(self._ids)
                self._ids.append(ident)
                self._rows[ident] = row
            self._matrix[row] = vec

    def remove(self, ids: Sequence[str]) -> None:
        """Remove ids (unknown ones are ignored)."""
        for ident in ids:
            row = self._rows.pop(ident, None)
            if row is None:
                continue
            last = len(self._ids) - 1
            if row != last:
                moved = self._ids[last]
                self._matrix[row] = self._matrix[last]
                self._ids[row] = moved
                self._rows[moved] = row
            self._ids.pop()

    def search(self, query: NDArray[np.float32], k: int) -> list[Hit]:
        """Exact top-k by dot product (cosine for normalised vectors)."""
        n = len(self._ids)
        if n == 0 or k <= 0:
            return []
        scores = self._matrix[:n] @ np.asarray(query, dtype=np.float32).reshape(self._dim)
        k = min(k, n)
        top = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
        top = top[np.argsort(-scores[top], kind="stable")]
        return [Hit(self._ids[i], float(scores[i])) for i in top]

    def save(self, path: Path) -> None:
        """Write ``vectors.npy`` and ``ids.json`` into ``path``."""
        path.mkdir(parents=True, exist_ok=True)
        np.save(path / "vectors.npy", self._matrix[: len(self._ids)])
        (path / "ids.json").write_text(json.dumps(self._ids))

    def load(self, path: Path) -> None:
        """Load what `save` wrote."""
        try:
            matrix = np.load(path / "vectors.npy")
            ids = json.loads((path / "ids.json").read_text())
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot load exact index from {path}: {exc}") from exc
        self.__init__(int(matrix.shape[1]) if matrix.size else self._dim)  # type: ignore[misc]
        self.add(ids, matrix)
