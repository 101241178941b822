"""Vectors looked up by key, of which only a small part is ever in memory.

The stack keeps the vector of every text it embedded (a million items' texts at a million items). An
`ExactIndex` would hold them all in one growable matrix, and growing it copies it: at a million rows of 384
floats that is 1.5 GB, and 2.3 GB while it doubles. A `VectorTable` keeps what was saved memory-mapped
read-only, and what is added in a block of rows in memory; a full block is appended to a spill file on
disk and read back through a read-only map when asked for, so memory holds one block and the pages that
lookups touch. `save` writes the same files as `ExactIndex.save` (``vectors.npy`` and ``ids.npy``) by
streaming, so a saved table opens as either.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import numpy as np
from numpy.typing import NDArray

from guimem.errors import StoreError
from guimem.vectors import paging

BLOCK = 8192
"""Rows added in memory before they go to the spill file (12 MB at 384 dimensions)."""
_COPY = 1 << 22  # bytes copied per write when saving


class VectorTable:
    """Key → float32 vector; add and get, never remove.

    Args:
        dim: The vectors' dimension.
        spill_dir: Where the spill file goes (a nameless temporary file, gone when the table is).
        block: Rows kept in memory before they are spilled.
    """

    def __init__(self, dim: int, spill_dir: Path | None = None, block: int = BLOCK) -> None:
        self._dim = dim
        self._spill_dir = spill_dir
        self._block_rows = max(1, block)
        self._reset()

    def _reset(self) -> None:
        dim = self._dim
        self._base: NDArray[np.float32] = np.zeros((0, dim), dtype=np.float32)  # saved rows, memory-mapped
        self._base_file: tuple[IO[bytes], int] | None = None  # their file (held open) and where their data starts
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._block = np.zeros((0, dim), dtype=np.float32)
        self._filled = 0
        self._spill: IO[bytes] | None = None
        self._spilled = 0  # rows in the spill file
        self._spill_map: NDArray[np.float32] | None = None
        self._pages = paging.Pages()  # the loaded rows' mapping, to page in (`warm`)

    @property
    def dim(self) -> int:
        """The vectors' dimension."""
        return self._dim

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, key: object) -> bool:
        return key in self._row

    def add(self, keys: Sequence[str], vectors: NDArray[np.float32]) -> None:
        """Add vectors under new keys (a key already held keeps its vector: a text's vector never changes)."""
        vecs = np.asarray(vectors, dtype=np.float32).reshape(len(keys), self._dim)
        for key, vec in zip(keys, vecs, strict=True):
            if key in self._row:
                continue
            if self._block.shape[0] == 0:
                self._block = np.zeros((self._block_rows, self._dim), dtype=np.float32)
            self._block[self._filled] = vec
            self._filled += 1
            self._row[key] = len(self._ids)
            self._ids.append(key)
            if self._filled == self._block_rows:
                self._spill_block()

    def get(self, key: str) -> NDArray[np.float32] | None:
        """The vector under ``key`` (a view that no later change alters), or None."""
        row = self._row.get(key)
        if row is None:
            return None
        base = self._base.shape[0]
        vec: NDArray[np.float32]
        if row < base:
            vec = self._base[row]
        elif row - base >= self._spilled:
            vec = self._block[row - base - self._spilled]
        else:
            if self._spill_map is None or self._spill_map.shape[0] <= row - base:
                assert self._spill is not None
                self._spill.flush()
                self._spill_map = np.memmap(self._spill, dtype=np.float32, mode="r",
                                            shape=(self._spilled, self._dim))
            vec = self._spill_map[row - base]
        return vec

    def _spill_block(self) -> None:
        if self._spill is None:
            if self._spill_dir is not None:
                self._spill_dir.mkdir(parents=True, exist_ok=True)
            self._spill = tempfile.TemporaryFile(dir=self._spill_dir, prefix="guimem-vectors-")  # noqa: SIM115
        self._spill.seek(0, 2)
        self._spill.write(self._block[: self._filled].tobytes())
        self._spilled += self._filled
        self._filled = 0
        self._block = np.zeros((0, self._dim), dtype=np.float32)  # a new one: views of this one stay as they are

    def save(self, path: Path) -> None:
        """Write ``vectors.npy`` and ``ids.npy`` into ``path`` as `ExactIndex.save` does, streaming the rows
        (the saved ones read from their file, not through the map, so saving reads nothing into memory)."""
        path.mkdir(parents=True, exist_ok=True)
        rows = len(self._ids)
        with open(path / "vectors.npy", "wb") as out:
            np.lib.format.write_array_header_1_0(out, {"descr": "<f4", "fortran_order": False,
                                                        "shape": (rows, self._dim)})
            if self._base_file is not None:  # through the handle: the entry may have been replaced since
                src, offset = self._base_file
                src.seek(offset)
                _copy(src, out, self._base.shape[0] * self._dim * 4)
            if self._spill is not None and self._spilled:
                self._spill.flush()
                self._spill.seek(0)
                _copy(self._spill, out, self._spilled * self._dim * 4)
            out.write(self._block[: self._filled].tobytes())
        np.save(path / "ids.npy", np.asarray(self._ids, dtype=str) if self._ids else np.zeros(0, dtype="<U1"))

    def load(self, path: Path) -> None:
        """Open what `save` (or `ExactIndex.save`) wrote, memory-mapped read-only; anything added is dropped."""
        pages = paging.Pages()
        try:
            matrix = pages.load_array(path / "vectors.npy")
            ids = [str(i) for i in np.load(path / "ids.npy").tolist()]
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot load vector table from {path}: {exc}") from exc
        if matrix.ndim != 2 or len(ids) != matrix.shape[0] or (matrix.shape[0] and matrix.shape[1] != self._dim):
            raise StoreError(f"vector table at {path} does not match: {matrix.shape} for {len(ids)} ids, "
                             f"dimension {self._dim}")
        if matrix.dtype != np.dtype("<f4") or (matrix.shape[0] and (
                not isinstance(matrix, np.memmap) or not matrix.flags.c_contiguous)):
            raise StoreError(f"vector table at {path} is not a row-major little-endian float32 file")
        handle = None
        if matrix.shape[0]:
            try:
                handle = open(path / "vectors.npy", "rb")  # noqa: SIM115  (held: `save` copies from it)
            except OSError as exc:
                raise StoreError(f"cannot load vector table from {path}: {exc}") from exc
        self.close()
        if handle is not None:
            self._base, self._base_file = matrix, (handle, int(matrix.offset))
            self._pages = pages
        self._ids = ids
        self._row = {key: row for row, key in enumerate(ids)}

    def warm(self) -> list[paging.Warming]:
        """Page in the rows the last `load` mapped, on a background thread (`paging.warm`)."""
        return self._pages.warm()

    def close(self) -> None:
        """Close the files it holds (the spill file goes with them) and empty the table; vectors handed out
        stay readable."""
        self._pages.let_go()
        for file in (self._spill, self._base_file[0] if self._base_file else None):
            if file is not None:
                file.close()
        self._reset()


def _copy(src: IO[bytes], out: IO[bytes], size: int) -> None:
    """Copy ``size`` bytes in bounded pieces."""
    left = size
    while left > 0:
        piece = src.read(min(left, _COPY))
        if not piece:
            raise StoreError(f"a vector file ended {left} bytes early")
        out.write(piece)
        left -= len(piece)
