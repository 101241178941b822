"""A memory-mapped index file's pages brought into this process after a load, ahead of the searches.

A memory opened from its index cache views its files memory-mapped: nothing is read at open, and its first
searches fault in the pages they touch one at a time, from the disk when the file is not in the page cache.
Measured at 1M items (docs/performance.md): the first search of the 874 MB graph took 470-750 ms, against about
2 ms once it is resident. `warm` maps every page of a file's mappings in this process on a background thread,
a chunk at a time: ``MADV_POPULATE_READ`` (Linux 5.14+), then a read of one byte a page (`_touch`); on an older
kernel ``MADV_WILLNEED`` starts the disk reads and the touch maps the pages (said once in the log). A file
larger than `SHARE_OF_AVAILABLE` of the memory available is left to fault in on demand: holding it all would
evict what the machine needs more. The pages are the file's (clean, shared with the page cache): the kernel may
drop them again under pressure, and no search waits for the warm-up. ``GUIMEM_WARM=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import sys
import threading
import time
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

MADV_WILLNEED = 3
MADV_POPULATE_READ = 22
EINVAL = 22
SMALLEST = 1 << 20
"""Files below this size are not warmed: their few pages fault in faster than a thread starts."""
SHARE_OF_AVAILABLE = 0.5
"""A file whose mappings exceed this share of ``MemAvailable`` is left to fault in on demand."""
CHUNK = 2 << 20
PAGE = 4096
"""Pages populated per call: a search faulting the same range waits for one chunk at most."""

_MAPS_LINE = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ ([0-9a-f]+):([0-9a-f]+) (\d+)(?:\s+(.*))?$")
_libc: ctypes.CDLL | None = None
_told_no_populate = False


class Warming:
    """A warm-up under way (or over): `wait` for it; `outcome` says what it did once `done` is set.

    Outcomes: ``off`` (``GUIMEM_WARM=0``), ``populated`` (every page mapped), ``touched`` (the kernel lacks ``MADV_POPULATE_READ``: every page
    read ahead and then read once), ``left ...`` (too large for the memory available), ``small``, ``not mapped``,
    ``unsupported`` (not Linux), ``failed ...`` (an madvise error: the searches fault the pages in, as without it).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done = threading.Event()
        self.outcome = ""

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the warm-up is over; False if ``timeout`` passed first."""
        return self.done.wait(timeout)

    def _finish(self, outcome: str) -> Warming:
        self.outcome = outcome
        self.done.set()
        return self


def warm(path: Path, keep: object) -> Warming:
    """Populate this process's mappings of ``path`` on a daemon thread. ``keep``: the object whose mapping it is
    (a usearch index, a NumPy memmap), held until the warm-up ends so the mapping outlives it."""
    warming = Warming(path)
    if os.environ.get("GUIMEM_WARM", "1") == "0":
        return warming._finish("off")
    if not sys.platform.startswith("linux"):
        return warming._finish("unsupported")
    try:
        if os.stat(path).st_size < SMALLEST:
            return warming._finish("small")
    except OSError as exc:
        return warming._finish(f"failed: {exc}")
    thread = threading.Thread(target=_populate, args=(warming, keep), name=f"guimem-warm-{path.name}", daemon=True)
    thread.start()
    return warming


def _populate(warming: Warming, keep: object) -> None:
    global _told_no_populate
    began = time.perf_counter()
    try:
        ranges = _mappings(warming.path)
        total = sum(end - start for start, end in ranges)
        if not ranges:
            warming._finish("not mapped")
            return
        available = _available()
        if available is not None and total > SHARE_OF_AVAILABLE * available:
            log.info("%s (%d MB) is left to fault in on demand: %d MB of memory available", warming.path,
                     total >> 20, available >> 20)
            warming._finish(f"left: {total >> 20} MB, {available >> 20} MB available")
            return
        advice = MADV_POPULATE_READ
        for start, end in ranges:
            at = start
            while at < end:
                length = min(CHUNK, end - at)
                err = _madvise(at, length, advice)
                if err == EINVAL and advice == MADV_POPULATE_READ:
                    if not _told_no_populate:
                        _told_no_populate = True
                        log.info("this kernel has no MADV_POPULATE_READ (Linux 5.14+): memory-mapped indexes are "
                                 "read ahead with MADV_WILLNEED and paged in by reading them")
                    advice = MADV_WILLNEED
                    continue
                if err:
                    log.debug("warming %s stopped: %s", warming.path, os.strerror(err))
                    warming._finish(f"failed: {os.strerror(err)}")
                    return
                _touch(at, length)
                at += length
        log.debug("warmed %s (%d MB) in %.2f s", warming.path, total >> 20, time.perf_counter() - began)
        warming._finish("populated" if advice == MADV_POPULATE_READ else "touched")
    except Exception as exc:  # a warm-up is an optimisation: whatever fails here, the searches fault pages in
        log.debug("warming %s failed: %s", warming.path, exc)
        warming._finish(f"failed: {exc}")
    finally:
        del keep


def _touch(start: int, length: int) -> None:
    """Read one byte of every page of a mapped range. A page the kernel just mapped may not yet be mapped for the
    processor (a virtual machine's host maps guest memory on first access): measured on this project's VM, the
    first thirty searches of a 1M graph populated but untouched took 4.6-7.5 ms p50 after the page cache was
    dropped, against 2-2.5 ms touched (docs/performance.md). NumPy releases the GIL for the strided sum."""
    pages = np.ctypeslib.as_array((ctypes.c_uint8 * length).from_address(start))
    int(pages[::PAGE].sum(dtype=np.uint64))


def _madvise(start: int, length: int, advice: int) -> int:
    """``madvise`` on a range of this process; 0, or the errno. ctypes releases the GIL for the call."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        _libc.madvise.restype = ctypes.c_int
    if _libc.madvise(start, length, advice) == 0:
        return 0
    return ctypes.get_errno()


def _mappings(path: Path) -> list[tuple[int, int]]:
    """The address ranges where this process maps ``path`` (matched by device and inode, else by its path:
    overlay file systems show the lower file's numbers)."""
    info = os.stat(path)
    real = os.path.realpath(path)
    ranges = []
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            match = _MAPS_LINE.match(line.rstrip("\n"))
            if match is None:
                continue
            start, end, major, minor, inode, name = match.groups()
            same = int(inode) == info.st_ino and (int(major, 16), int(minor, 16)) == (
                os.major(info.st_dev), os.minor(info.st_dev))
            if same or (name or "") == real:
                ranges.append((int(start, 16), int(end, 16)))
    return ranges


def _available() -> int | None:
    """``MemAvailable`` in bytes, or None when the kernel does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def resident(path: Path) -> int:
    """Bytes of ``path`` mapped into this process's memory now (``Rss`` of its mappings in ``/proc/self/smaps``)."""
    ranges = set(_mappings(path))
    total, counting = 0, False
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as smaps:
        for line in smaps:
            match = _MAPS_LINE.match(line.rstrip("\n"))
            if match is not None:
                counting = (int(match.group(1), 16), int(match.group(2), 16)) in ranges
            elif counting and line.startswith("Rss:"):
                total += int(line.split()[1]) * 1024
    return total
