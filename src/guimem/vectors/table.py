"""Vectors looked up by key, of which only a small part is ever in memory.

The stack keeps the vector of every text it embedded (a million items' texts at a million items). An
`ExactIndex` would hold them all in one growable matrix, and growing it copies it: at a million rows of 384
floats that is 1.5 GB, and 2.3 GB while it doubles. A `VectorTable` keeps what was saved memory-mapped
read-only, and what is added in a block of rows in memory; a full block is appended to a spill file on
disk and read back through a read-only map when asked for, so memory holds one block and the pages that
lookups touch.

`save` writes segments: the rows of its last load stay where they were (each saved file hard-linked into the new
folder, not copied), and what was added since goes to a new segment. Saving after a round that embedded a
thousand texts writes those thousand rows, not the million before them. Trailing segments no larger than what is
written are merged into it, so a table holds O(log n) segments and every row is rewritten O(log n) times over
its life (a binary counter). The first segment is ``vectors.npy`` and ``ids.npy``, as `ExactIndex.save` writes
them, so an `ExactIndex` entry opens as a table; a table of one segment opens as an `ExactIndex`.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
from numpy.typing import NDArray

from guimem.errors import StoreError
from guimem.vectors import paging

log = logging.getLogger(__name__)
BLOCK = 8192
"""Rows added in memory before they go to the spill file (12 MB at 384 dimensions)."""
_COPY = 1 << 22  # bytes copied per write when saving
SEGMENTS_FILE = "segments.json"
"""How many segments a saved table has (absent: one)."""
MAX_SEGMENTS = 64
"""Segments a table keeps (more are merged when saving; a saved table claiming more is refused)."""


def _names(i: int) -> tuple[str, str]:
    """The vectors and ids files of segment ``i``."""
    return ("vectors.npy", "ids.npy") if i == 0 else (f"vectors.{i}.npy", f"ids.{i}.npy")


@dataclass
class _Segment:
    """Saved rows: memory-mapped read-only, their file held open (a save copies from it when it cannot link it)."""

    matrix: NDArray[np.float32]
    file: IO[bytes]
    offset: int  # where the rows start in the file
    ids_file: IO[bytes]  # its keys' file, held open too: the next save links both files it loaded
    start: int  # its first row in the table

    @property
    def rows(self) -> int:
        return int(self.matrix.shape[0])


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
        self._segments: list[_Segment] = []  # the saved rows, in order
        self._starts: list[int] = []  # each segment's first row
        self._saved = 0  # rows in the segments
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._block = np.zeros((0, dim), dtype=np.float32)
        self._filled = 0
        self._spill: IO[bytes] | None = None
        self._spilled = 0  # rows in the spill file
        self._spill_map: NDArray[np.float32] | None = None
        self._pages = paging.Pages()  # the loaded rows' mappings, to page in (`warm`)

    @property
    def dim(self) -> int:
        """The vectors' dimension."""
        return self._dim

    @property
    def segments(self) -> int:
        """How many saved segments the rows of the last load are in."""
        return len(self._segments)

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
        vec: NDArray[np.float32]
        if row < self._saved:
            segments = self._segments
            segment = segments[0] if len(segments) == 1 else segments[bisect_right(self._starts, row) - 1]
            vec = segment.matrix[row - segment.start]
        elif row - self._saved >= self._spilled:
            vec = self._block[row - self._saved - self._spilled]
        else:
            if self._spill_map is None or self._spill_map.shape[0] <= row - self._saved:
                assert self._spill is not None
                self._spill.flush()
                self._spill_map = np.memmap(self._spill, dtype=np.float32, mode="r",
                                            shape=(self._spilled, self._dim))
            vec = self._spill_map[row - self._saved]
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
        """Write the table into ``path`` as segments (the module's docstring): the loaded segments kept are
        hard-linked (copied from the files held open where a link cannot be made: another file system, or the
        entry replaced since), and the trailing ones merged with what was added since are written as one new
        segment, streaming (the saved rows read from their files, not through the map, so saving reads nothing
        into memory). A file already in ``path`` is replaced, never written through (it may be a link)."""
        path.mkdir(parents=True, exist_ok=True)
        kept = list(self._segments)
        new = len(self._ids) - self._saved
        merged: list[_Segment] = []
        while kept and (kept[-1].rows <= new + sum(s.rows for s in merged) or len(kept) >= MAX_SEGMENTS):
            merged.insert(0, kept.pop())
        for i, segment in enumerate(kept):
            if not _link(segment, path, i):
                log.info("vector table: %d saved rows copied into %s (their files could not be linked)",
                         segment.rows, path)
                self._write(path, i, [segment], added=False)
        count = len(kept)
        if merged or new or not kept:
            self._write(path, count, merged, added=True)
            count += 1
        kept_names = {name for i in range(count) for name in _names(i)}
        for left in (*path.glob("vectors.*.npy"), *path.glob("ids.*.npy"), path / SEGMENTS_FILE):
            if left.name not in kept_names:  # what an earlier save into this folder left
                left.unlink(missing_ok=True)
        if count > 1:
            with _create(path / SEGMENTS_FILE) as out:
                out.write(json.dumps({"segments": count}).encode())

    def _write(self, path: Path, i: int, segments: list[_Segment], added: bool) -> None:
        """Write segment ``i``: the rows of ``segments`` copied from their files, then (``added``) the rows added
        since the last load (spilled, then held)."""
        vectors_name, ids_name = _names(i)
        rows = sum(s.rows for s in segments) + (len(self._ids) - self._saved if added else 0)
        first = segments[0].start if segments else self._saved
        for name in (vectors_name, ids_name):
            (path / name).unlink(missing_ok=True)  # a link to a saved file is replaced, never written through
        with _create(path / vectors_name) as out:
            np.lib.format.write_array_header_1_0(out, {"descr": "<f4", "fortran_order": False,
                                                        "shape": (rows, self._dim)})
            for segment in segments:  # through the handle: the entry may have been replaced since
                segment.file.seek(segment.offset)
                _copy(segment.file, out, segment.rows * self._dim * 4)
            if added:
                if self._spill is not None and self._spilled:
                    self._spill.flush()
                    self._spill.seek(0)
                    _copy(self._spill, out, self._spilled * self._dim * 4)
                out.write(self._block[: self._filled].tobytes())
        ids = self._ids[first:first + rows]
        with _create(path / ids_name) as out:
            np.save(out, np.asarray(ids, dtype=str) if ids else np.zeros(0, dtype="<U1"))

    def load(self, path: Path) -> None:
        """Open what `save` (or `ExactIndex.save`) wrote, memory-mapped read-only; anything added is dropped."""
        count = _segment_count(path)
        pages = paging.Pages()
        segments: list[_Segment] = []
        ids: list[str] = []
        try:
            for i in range(count):
                vectors_name, ids_name = _names(i)
                segment = self._open_segment(pages, path / vectors_name, path / ids_name, len(ids))
                if segment is None:
                    continue
                segments.append(segment[0])
                ids += segment[1]
            if len(set(ids)) != len(ids):
                raise StoreError(f"vector table at {path} holds a key twice")
        except BaseException:
            for done in segments:
                done.file.close()
                done.ids_file.close()
            raise
        self.close()
        self._segments = segments
        self._starts = [s.start for s in segments]
        self._saved = len(ids)
        self._pages = pages
        self._ids = ids
        self._row = {key: row for row, key in enumerate(ids)}

    def _open_segment(self, pages: paging.Pages, vectors: Path, ids_path: Path, start: int
                      ) -> tuple[_Segment, list[str]] | None:
        """One segment's rows (memory-mapped, its file held open) and keys; None when it has no rows."""
        try:
            matrix = pages.load_array(vectors)
            keys = np.load(ids_path)
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot load vector table from {vectors.parent}: {exc}") from exc
        if keys.ndim != 1 or keys.dtype.kind not in "US":
            raise StoreError(f"vector table at {vectors.parent}: {ids_path.name} is not a list of keys")
        ids = [str(i) for i in keys.tolist()]
        if matrix.ndim != 2 or len(ids) != matrix.shape[0] or (matrix.shape[0] and matrix.shape[1] != self._dim):
            raise StoreError(f"vector table at {vectors.parent} does not match: {matrix.shape} for {len(ids)} ids, "
                             f"dimension {self._dim}")
        if matrix.dtype != np.dtype("<f4") or (matrix.shape[0] and (
                not isinstance(matrix, np.memmap) or not matrix.flags.c_contiguous)):
            raise StoreError(f"vector table at {vectors.parent} is not a row-major little-endian float32 file")
        if not matrix.shape[0]:
            return None
        try:
            handle = open(vectors, "rb")  # noqa: SIM115  (held: `save` links or copies from it)
        except OSError as exc:
            raise StoreError(f"cannot load vector table from {vectors.parent}: {exc}") from exc
        try:
            ids_handle = open(ids_path, "rb")  # noqa: SIM115  (held: `save` links it)
        except OSError as exc:
            handle.close()
            raise StoreError(f"cannot load vector table from {vectors.parent}: {exc}") from exc
        return _Segment(matrix, handle, int(matrix.offset), ids_handle, start), ids

    def warm(self) -> list[paging.Warming]:
        """Page in the rows the last `load` mapped, on a background thread (`paging.warm`)."""
        return self._pages.warm()

    def close(self) -> None:
        """Close the files it holds (the spill file goes with them) and empty the table; vectors handed out
        stay readable."""
        self._pages.let_go()
        for file in (self._spill, *(f for s in self._segments for f in (s.file, s.ids_file))):
            if file is not None:
                file.close()
        self._reset()


def _segment_count(path: Path) -> int:
    """How many segments the table saved in ``path`` has (`SEGMENTS_FILE`; a file from elsewhere is read
    bounded and checked)."""
    file = path / SEGMENTS_FILE
    try:
        with open(file, "rb") as f:
            raw = f.read(4097)
    except FileNotFoundError:
        return 1
    except OSError as exc:
        raise StoreError(f"cannot load vector table from {path}: {exc}") from exc
    try:
        count = json.loads(raw) if len(raw) <= 4096 else None
    except (ValueError, RecursionError):  # RecursionError: brackets nested thousands deep
        count = None
    count = count.get("segments") if isinstance(count, dict) else None
    if type(count) is not int or not 1 <= count <= MAX_SEGMENTS:
        raise StoreError(f"vector table at {path}: {SEGMENTS_FILE} does not give a segment count from 1 to "
                         f"{MAX_SEGMENTS}")
    return count


def _link(segment: _Segment, path: Path, i: int) -> bool:
    """Hard-link the files ``segment`` was loaded from into ``path`` as segment ``i``: through the files it holds open
    (``/proc/self/fd``: the very files loaded, even if another worker's entry replaced the folder they were in and
    the folder was swept, as long as a newer entry links them), else through the names they were loaded from, if
    those still name them. Whether it was linked (else the caller copies)."""
    targets = [path / name for name in _names(i)]
    held = [os.fstat(f.fileno()) for f in (segment.file, segment.ids_file)]
    try:
        if all((t.st_dev, t.st_ino) == (h.st_dev, h.st_ino) for t, h in zip(map(os.stat, targets), held, strict=True)):
            return True  # saving into the folder it was loaded from: the files are already there
    except OSError:
        pass
    for target in targets:
        target.unlink(missing_ok=True)
    for source in (_fd_path, _name_path):
        try:
            for file, target, was in zip((segment.file, segment.ids_file), targets, held, strict=True):
                found = source(file)
                if found is None:
                    raise OSError("no path")
                _hard_link(found, target)
                now = os.stat(target)
                if (now.st_dev, now.st_ino) != (was.st_dev, was.st_ino):  # another file had taken the name
                    raise OSError("not the file loaded")
            return True
        except OSError:
            for target in targets:
                target.unlink(missing_ok=True)
    return False


def _hard_link(source: str, target: Path) -> None:
    """Link ``target`` to the file ``source`` names, following a symbolic link (``linkat`` with
    ``AT_SYMLINK_FOLLOW``: ``os.link`` calls plain ``link`` without a directory descriptor, which links a
    ``/proc/self/fd`` entry itself and fails across devices)."""
    if os.link in os.supports_dir_fd and os.link in os.supports_follow_symlinks:
        folder = os.open(target.parent, os.O_RDONLY)
        try:
            os.link(source, target.name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=True)
        finally:
            os.close(folder)
    else:
        os.link(source, target)


def _fd_path(file: IO[bytes]) -> str | None:
    """A path naming the open ``file`` itself (Linux), for `os.link` to follow."""
    path = f"/proc/self/fd/{file.fileno()}"
    return path if os.path.exists(path) else None


def _name_path(file: IO[bytes]) -> str | None:
    """The name ``file`` was opened by."""
    return str(file.name) if isinstance(file.name, str) else None


def _create(path: Path) -> IO[bytes]:
    """A new file at ``path`` for writing, created exclusively: never an existing file or a link that took the name."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    return os.fdopen(os.open(path, flags, 0o644), "wb")


def _copy(src: IO[bytes], out: IO[bytes], size: int) -> None:
    """Copy ``size`` bytes in bounded pieces."""
    left = size
    while left > 0:
        piece = src.read(min(left, _COPY))
        if not piece:
            raise StoreError(f"a vector file ended {left} bytes early")
        out.write(piece)
        left -= len(piece)
