"""Int8 codes of an exact index's rows, read before the float32 rows, for an answer that is still exact.

A query's exact search is bound by memory bandwidth once the matrix leaves the processor's caches, as it does
beside a browser between two steps: at 10k rows of 384 float32 (15 MB) a cold matrix product took 0.63 ms
here where a warm one took 0.15 ms. One signed byte a component reads a quarter of that. Each row ``x`` is
kept as ``s·c`` (``c`` int8, ``s`` its scale) with the norm ``e`` of what that leaves out, the query ``q`` as
``t·d``; then ``|x·q − s·t·(c·d)| ≤ e·|q| + |s·c|·|q − t·d|``, so every row whose upper bound reaches the k-th
best lower bound is read again in float32, and the top k of those is the exact top k (ties to the lower row;
the scores up to float32 rounding). Where the bounds leave more than a sixth of the rows (vectors too close
together for int8 to tell apart, as near copies of one item are), the float32 product over every row answers
instead: reading a row again one by one costs about six times a row of the contiguous product (measured: 20k of
36,842 rows gathered from a memory-mapped matrix in 6.9 ms, all of them multiplied in 2.2 ms). The int8 products
are NumKong's (a dependency of usearch, `guimem[hnsw]`); without it, or for a small matrix, the float32 product
answers alone.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from guimem.vectors import paging

CODED_FROM = 2048
"""Below this many rows the float32 product is as fast and nothing is coded."""
_CHUNK = 65536  # rows coded at a time (bounded temporaries at a million rows)
GATHER_UP_TO = 6
"""Rows are read again one by one only while fewer than 1/GATHER_UP_TO of them are left (see the module docstring)."""
_SLACK = 1e-4  # relative room for float32 rounding in the exact products the bounds are compared with (and
# dim·2⁻²² more: a float32 dot product of dim terms is off by at most about dim·2⁻²⁴·|x|·|q|)


_UNSET: Any = object()
_NK: Any = _UNSET  # NumKong, or None where it is not installed: imported on first need (it takes ~0.1 s)


def _kernels() -> Any | None:
    global _NK
    if _NK is not _UNSET:
        return _NK
    try:
        import numkong
    except ImportError:
        _NK = None
        return None
    # AMX tiles need the process to ask the kernel first; a library that skips that dies of SIGILL on machines
    # that have them (seen with llama.cpp here). Int8 vector products need no tiles.
    for capability in ("sapphireamx", "graniteamx"):
        with contextlib.suppress(Exception):  # an older or newer NumKong without it: nothing to disable
            numkong.disable_capability(capability)
    _NK = numkong
    return numkong


def available() -> bool:
    """Can coded search run here (NumKong importable)?"""
    return _kernels() is not None


class Codes:
    """Int8 codes of the leading rows of a float32 matrix, recoded where rows changed."""

    def __init__(self, dim: int) -> None:
        self._dim = dim
        self._pages = paging.Pages()  # the loaded codes' mapping, to page in (`warm`)
        self._codes = np.zeros((0, dim), dtype=np.int8)
        self._scales = np.zeros(0, dtype=np.float64)
        self._errors = np.zeros(0, dtype=np.float64)  # |x − s·c|
        self._norms = np.zeros(0, dtype=np.float64)  # |s·c|
        self._coded = 0  # rows [0, _coded) are in step with the matrix, but for _dirty
        self._dirty: set[int] = set()
        self._slack = _SLACK + dim * 2.0**-22
        self._lock = threading.Lock()  # a search codes rows: two at once must not race

    def changed(self, row: int) -> None:
        """Row ``row`` of the matrix was written (replaced, or another row moved into it)."""
        if row < self._coded:
            self._dirty.add(row)

    def truncated(self, n: int) -> None:
        """The matrix now has ``n`` rows."""
        self._coded = min(self._coded, n)
        self._dirty = {r for r in self._dirty if r < n}

    def clear(self) -> None:
        """Every row is to be coded again (a new matrix)."""
        self._pages.let_go()
        self._coded = 0
        self._dirty.clear()

    def save(self, path: Path, matrix: NDArray[np.float32], n: int) -> None:
        """Write ``codes.npy`` and ``code_norms.npy`` (scales, errors, norms) for the first ``n`` rows into ``path``,
        so that an index loaded from it searches coded from its first query."""
        self._sync(matrix, n)
        np.save(path / "codes.npy", np.ascontiguousarray(self._codes[:n]))
        np.save(path / "code_norms.npy", np.stack([self._scales[:n], self._errors[:n], self._norms[:n]]))

    @staticmethod
    def remove(path: Path) -> None:
        """Delete what `save` wrote into ``path``, if anything."""
        for name in ("codes.npy", "code_norms.npy"):
            (path / name).unlink(missing_ok=True)

    def load(self, path: Path, n: int) -> None:
        """Take what `save` wrote (memory-mapped) when it is there and codes ``n`` rows; else code on first need."""
        self.clear()
        pages = paging.Pages()
        try:
            codes = pages.load_array(path / "codes.npy")
            norms = np.load(path / "code_norms.npy", mmap_mode="r")
        except (OSError, ValueError):
            return  # an index saved without codes (or before them): coded on its first search
        if codes.shape != (n, self._dim) or codes.dtype != np.int8 or norms.shape != (3, n):
            return
        self._codes, (self._scales, self._errors, self._norms) = codes, norms
        self._coded = n
        self._pages = pages

    def warm(self) -> list[paging.Warming]:
        """Page in the codes the last `load` mapped (`paging.warm`)."""
        return self._pages.warm()

    def _sync(self, matrix: NDArray[np.float32], n: int) -> None:
        if n == self._coded and not self._dirty:
            return
        if not self._codes.flags.writeable:  # loaded: copied into memory before it changes
            self._pages.let_go()
            self._codes = np.array(self._codes)
            self._scales, self._errors, self._norms = (np.array(a) for a in (self._scales, self._errors, self._norms))
        if n > self._codes.shape[0]:
            grow = max(n, 2 * self._codes.shape[0])
            self._codes = np.resize(self._codes, (grow, self._dim)) if self._codes.size else \
                np.zeros((grow, self._dim), dtype=np.int8)
            for name in ("_scales", "_errors", "_norms"):
                setattr(self, name, np.resize(getattr(self, name), grow))
        for start in range(self._coded, n, _CHUNK):
            self._code(matrix, np.arange(start, min(n, start + _CHUNK)))
        if self._dirty:
            self._code(matrix, np.fromiter(sorted(self._dirty), dtype=np.int64))
        self._coded, self._dirty = n, set()

    def _code(self, matrix: NDArray[np.float32], rows: NDArray[np.int64]) -> None:
        x = np.asarray(matrix[rows], dtype=np.float32)  # float32 is close enough for the norms: _SLACK covers it
        top = np.abs(x).max(axis=1)
        scales = np.where(top > 0, top / np.float32(127.0), np.float32(1.0)).astype(np.float32)
        codes = np.rint(x / scales[:, None])
        np.clip(codes, -127, 127, out=codes)
        approx = codes * scales[:, None]
        self._codes[rows] = codes.astype(np.int8)
        self._scales[rows] = scales
        self._norms[rows] = np.linalg.norm(approx, axis=1)
        approx -= x
        self._errors[rows] = np.linalg.norm(approx, axis=1)

    def top(self, matrix: NDArray[np.float32], n: int, query: NDArray[np.float32], k: int
            ) -> tuple[NDArray[np.int64], NDArray[np.float32]] | None:
        """The exact top ``k`` rows of ``matrix[:n] @ query`` and their float32 scores (up to float32 rounding),
        best first, ties to the lower row; 0 < k < n. None where a bound is not finite (a NaN or an infinity in
        the query or a row), or where the bounds leave more than ``n / GATHER_UP_TO`` rows: then the float32
        product answers."""
        with self._lock:
            return self._top(matrix, n, query, k)

    def _top(self, matrix: NDArray[np.float32], n: int, query: NDArray[np.float32], k: int
             ) -> tuple[NDArray[np.int64], NDArray[np.float32]] | None:
        kernels = _kernels()
        assert kernels is not None
        self._sync(matrix, n)
        q = np.asarray(query, dtype=np.float64)
        peak = float(np.abs(q).max())
        t = peak / 127.0 if peak > 0 else 1.0
        d = np.clip(np.rint(q / t), -127, 127)
        q_norm = float(np.linalg.norm(q))
        q_error = float(np.linalg.norm(q - d * t))
        dots = np.asarray(kernels.cdist(d.astype(np.int8)[None, :], self._codes[:n], metric="dot"))[0]
        approx = dots * (self._scales[:n] * t)
        # e·|q| + |s·c|·|q − t·d|, and room for rounding: slack·|q|·(|s·c| + e) ≥ slack·|q|·|x|
        slack = self._slack
        bound = self._errors[:n] * (q_norm * (1 + slack)) + self._norms[:n] * (q_error + slack * q_norm)
        bound += 1e-9
        upper = approx + bound
        if not np.isfinite(upper).all():
            return None
        lower = approx - bound
        kth = lower.max() if k == 1 else np.partition(lower, n - k)[n - k]
        rows = np.flatnonzero(upper >= kth)
        if len(rows) * GATHER_UP_TO > n:
            return None
        exact = np.asarray(matrix[rows], dtype=np.float32) @ np.asarray(query, dtype=np.float32)
        order = np.lexsort((rows, -exact))[:k]
        return rows[order], exact[order]
