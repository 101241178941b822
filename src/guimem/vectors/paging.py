"""A memory-mapped index file's pages brought into this process after a load, ahead of the searches.

A memory opened from its index cache views its files memory-mapped: nothing is read at open, and its first
searches fault in the pages they touch one at a time, from the disk when the file is not in the page cache.
Measured at 1M items (docs/performance.md): the first search of the 874 MB graph took 470-750 ms, against about
2 ms once it is resident. An index records the address ranges its load mapped (`regions`, the maps before and
after: only its own mappings); `warm` then pages them in on a background thread, 16 MB at a time: a read through
the file (`_read_through`), then ``MADV_POPULATE_READ`` (Linux 5.14+) to map what was read. One warm-up runs at a
time in a process, and all they hold stays under `SHARE_OF_AVAILABLE` of the memory available; past that a file
is left to fault in on demand. The pages are the file's (clean, shared with the page cache): the kernel may drop
them again under pressure, and no search waits for a warm-up. The owner cancels one whose mapping it lets go
(`Warming.cancel`). Turned off with the setting ``warm_indexes`` (``GUIMEM_WARM_INDEXES=false``).
"""

from __future__ import annotations

import ctypes
import enum
import logging
import mmap
import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, Protocol, TypeVar, runtime_checkable

import numpy as np

log = logging.getLogger(__name__)
T = TypeVar("T")

MADV_POPULATE_READ = 22
EINVAL = 22
PAGE = mmap.PAGESIZE
SMALLEST = 1 << 20
"""Files below this size are not warmed: their few pages fault in faster than a thread starts."""
SHARE_OF_AVAILABLE = 0.5
"""What this process's warm-ups hold together stays under this share of ``MemAvailable``."""
CHUNK = 16 << 20
"""Bytes read, then populated, per step: few enough steps that the thread seldom waits for the GIL (2 MB steps took
3.6-4.3 s for 874 MB beside a busy main thread), and a populate of pages already read holds the address space
briefly (populating 64 MB straight from the disk stalled the main thread's allocations up to 56 ms)."""

_MAPS_LINE = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) ([0-9a-f]+):([0-9a-f]+) (\d+)(?:\s+(.*))?$")


class Outcome(enum.StrEnum):
    """How a warm-up ended."""

    POPULATED = "populated"
    """Every page mapped into the process and read once."""
    READ = "read"
    """The kernel lacks ``MADV_POPULATE_READ``: the file read into the page cache; the searches map the pages."""
    LEFT = "left"
    """Too large for the memory available: left to fault in on demand."""
    CANCELLED = "cancelled"
    """The owner let the mapping go first."""
    FAILED = "failed"
    """An error (`Warming.detail`): the searches fault the pages in, as without a warm-up."""


class Region(NamedTuple):
    """One mapping of a file in this process."""

    start: int
    end: int
    offset: int
    """Where in the file it starts."""
    inode: int
    """The mapped file's: a file put in its place since is not the one read through."""


@runtime_checkable
class Warmable(Protocol):
    """An index that views files memory-mapped and can page them in (`guimem.memory.indexcache` calls it)."""

    def warm(self) -> list[Warming]:
        """Start paging in what the last load mapped; the warm-ups started (none: nothing mapped)."""
        ...


class Warming:
    """A warm-up under way or over: `wait` for it, `cancel` it; `outcome` (and `detail`) once `done` is set."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done = threading.Event()
        self.outcome: Outcome | None = None
        self.detail = ""
        self._cancelled = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the warm-up is over; False if ``timeout`` passed first."""
        return self.done.wait(timeout)

    def cancel(self) -> None:
        """Stop at the next chunk (the owner lets the mapping go)."""
        self._cancelled.set()

    def _finish(self, outcome: Outcome, detail: str = "") -> None:
        self.outcome, self.detail = outcome, detail
        self.done.set()


def regions(path: Path) -> frozenset[Region]:
    """This process's mappings of ``path`` now (by its path as ``/proc/self/maps`` shows it). Empty off Linux and
    for a file under `SMALLEST` (never warmed): call it before and after mapping a file, and the difference is
    the new mapping, whoever else maps the same file."""
    if not sys.platform.startswith("linux"):
        return frozenset()
    try:
        if os.stat(path).st_size < SMALLEST:
            return frozenset()
        real = os.path.realpath(path)
        found = set()
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                match = _MAPS_LINE.match(line.rstrip("\n"))
                if match is not None and match.group(7) == real:
                    found.add(Region(int(match.group(1), 16), int(match.group(2), 16), int(match.group(3), 16),
                                     int(match.group(6))))
    except OSError:
        return frozenset()
    return frozenset(found)


def warm(path: Path, mapped: frozenset[Region] | list[Region], keep: object) -> Warming | None:
    """Page in ``mapped`` (the mappings of ``path`` a load made, `regions`) on a daemon thread; None when there is
    nothing to warm. ``keep``: the object that owns the mappings (a usearch index, a NumPy memmap), held until the
    warm-up ends so they outlive it."""
    if not mapped:
        return None
    warming = Warming(path)
    with _PROCESS.lock:
        _PROCESS.pending.add(warming)
    try:
        threading.Thread(target=_run, args=(warming, sorted(mapped), keep), name=f"guimem-warm-{path.name}",
                         daemon=True).start()
    except RuntimeError as exc:  # no thread to be had (a limit, the interpreter ending): the searches fault
        with _PROCESS.lock:
            _PROCESS.pending.discard(warming)
        warming._finish(Outcome.FAILED, f"no thread: {exc}")
    return warming


class Pages:
    """The files an index mapped at its last load (`track`) and their warm-ups: `warm` starts them, `let_go`
    stops them and forgets the files (the index changed, or loads others)."""

    def __init__(self) -> None:
        self._files: list[tuple[Path, frozenset[Region], object]] = []
        self._warmings: list[Warming] = []

    def track(self, path: Path, load: Callable[[], T], keep: object = None) -> T:
        """``load()``, which maps ``path``; the mappings it added are remembered, with ``keep`` (default: what
        ``load`` returned), the object that owns them."""
        before = regions(path)
        loaded = load()
        owner = loaded if keep is None else keep
        mapped = regions(path) - before
        try:
            weakref.ref(owner)  # the budget follows the owner's life: one a weak reference cannot follow is not warmed
        except TypeError:
            return loaded
        if mapped:
            self._files.append((path, mapped, owner))
        return loaded

    def load_array(self, path: Path) -> Any:
        """``np.load(path, mmap_mode="r")``, tracked (`track`)."""
        return self.track(path, partial(np.load, path, mmap_mode="r"))

    def warm(self) -> list[Warming]:
        """Start paging in every tracked file (warm-ups already under way are cancelled first)."""
        self._cancel()
        self._warmings = [w for path, mapped, keep in self._files if (w := warm(path, mapped, keep)) is not None]
        return list(self._warmings)

    def let_go(self) -> None:
        """Stop the warm-ups and forget the files."""
        self._cancel()
        self._files = []

    def _cancel(self) -> None:
        for warming in self._warmings:
            warming.cancel()
        self._warmings = []


class _Process:
    """What the warm-ups of one process share: one runs at a time, and the bytes they hold (each warmed mapping
    counts until its owner is freed). Process-wide by nature: it is the process's memory."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.one_at_a_time = threading.Lock()
        self.held = 0
        self.pending: weakref.WeakSet[Warming] = weakref.WeakSet()
        self.libc: ctypes.CDLL | None = None
        self.told_no_populate = False

    def release(self, size: int) -> None:
        with self.lock:
            self.held = max(0, self.held - size)  # a forked child starts from 0 while its parent's owners live on

    def after_fork(self) -> None:
        """In a forked child: the parent's warm-up threads are not there; their warm-ups end as failed."""
        self.lock, self.one_at_a_time, self.held = threading.Lock(), threading.Lock(), 0
        for warming in list(self.pending):
            warming._finish(Outcome.FAILED, "the process forked during it")
        self.pending = weakref.WeakSet()


_PROCESS = _Process()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_PROCESS.after_fork)


def _run(warming: Warming, mapped: list[Region], keep: object) -> None:
    try:
        with _PROCESS.one_at_a_time:
            outcome, detail = _populate(warming, mapped, keep)
    except Exception as exc:  # a warm-up is an optimisation: whatever fails, the searches fault the pages in
        outcome, detail = Outcome.FAILED, str(exc)
    log.debug("warming %s: %s %s", warming.path, outcome, detail)
    with _PROCESS.lock:
        _PROCESS.pending.discard(warming)
    warming._finish(outcome, detail)


def _populate(warming: Warming, mapped: list[Region], keep: object) -> tuple[Outcome, str]:
    if warming._cancelled.is_set():  # let go while it waited for its turn
        return Outcome.CANCELLED, ""
    total = sum(r.end - r.start for r in mapped)
    available = _available()
    with _PROCESS.lock:
        if available is not None and _PROCESS.held + total > SHARE_OF_AVAILABLE * available:
            log.info("%s (%d MB) is left to fault in on demand: %d MB of memory available, %d MB already warmed",
                     warming.path, total >> 20, available >> 20, _PROCESS.held >> 20)
            return Outcome.LEFT, f"{total >> 20} MB, {available >> 20} MB available"
        _PROCESS.held += total
    try:
        held = weakref.finalize(keep, _PROCESS.release, total)  # counted while the owner lives
    except TypeError:
        _PROCESS.release(total)
        return Outcome.FAILED, "an owner whose life cannot be followed"
    began = time.perf_counter()
    try:
        with open(warming.path, "rb") as file:
            outcome = _page_in(warming, mapped, file)
    except OSError as exc:
        outcome = Outcome.FAILED, str(exc)
    if outcome[0] not in (Outcome.POPULATED, Outcome.READ):
        held()  # nothing (or not all) was paged in: not counted against the next ones
    log.debug("warmed %s (%d MB) in %.2f s", warming.path, total >> 20, time.perf_counter() - began)
    return outcome


def _page_in(warming: Warming, mapped: list[Region], file: BinaryIO) -> tuple[Outcome, str]:
    """Read each region through ``file`` a chunk at a time, then map the chunk (``MADV_POPULATE_READ``): read first,
    so that the populate finds the pages in the page cache and holds the address space only briefly."""
    # anonymous memory, not a bytearray: a bytearray is zeroed under the GIL (16 MB for each file warmed held a
    # fresh process's first recall beside it from 4 to 11 ms), where the kernel zeroes these pages in the reads
    with mmap.mmap(-1, min(CHUNK, max(r.end - r.start for r in mapped))) as buffer:
        return _page_in_through(warming, mapped, file, buffer)


def _page_in_through(warming: Warming, mapped: list[Region], file: BinaryIO, buffer: mmap.mmap
                     ) -> tuple[Outcome, str]:
    same = os.fstat(file.fileno()).st_ino
    populate = True
    for region in mapped:
        if region.inode != same:  # another file is at the path now: populating would read the disk unpaced
            return Outcome.LEFT, "the file was replaced since it was mapped"
        at = region.start
        while at < region.end:
            if warming._cancelled.is_set():
                return Outcome.CANCELLED, ""
            length = min(len(buffer), region.end - at)
            _read_through(file, buffer, region.offset + (at - region.start), length)
            if warming._cancelled.is_set():  # let go during the read (a narrower window, not closed: the owner is
                # kept alive meanwhile, so a populate that starts just after a cancel maps what still exists)
                return Outcome.CANCELLED, ""
            err = _madvise(at, length, MADV_POPULATE_READ) if populate else 0
            if err == EINVAL:
                if not _PROCESS.told_no_populate:
                    _PROCESS.told_no_populate = True
                    log.info("this kernel has no MADV_POPULATE_READ (Linux 5.14+): memory-mapped indexes are read "
                             "into the page cache, and their first searches map the pages")
                populate = False
            elif err:
                return Outcome.FAILED, f"madvise: {os.strerror(err)}"
            at += length
    return (Outcome.POPULATED if populate else Outcome.READ), ""


def _read_through(file: BinaryIO, buffer: mmap.mmap, offset: int, length: int) -> None:
    """Read a part of the file into ``buffer``: the same page-cache pages the mapping shows, each read once.
    A page the kernel has just mapped is not yet cheap for the processor on a virtual machine (its host maps guest
    memory on first access): measured on this project's VM, the first thirty searches of a 1M graph populated but
    not read took 4.6-7.5 ms p50 after the page cache was dropped, against 2-2.5 ms read (docs/performance.md).
    Through the file, not the mapping: nothing can fault, whatever happens to the mapping meanwhile."""
    with memoryview(buffer) as view, view[:length] as part:  # released: the buffer is unmapped after
        os.preadv(file.fileno(), [part], offset)


def _madvise(start: int, length: int, advice: int) -> int:
    """``madvise`` on a range of this process; 0, or the errno. ctypes releases the GIL for the call."""
    libc = _PROCESS.libc
    if libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        libc.madvise.restype = ctypes.c_int
        _PROCESS.libc = libc  # published once it is set up (warm-ups run one at a time, but tests call this)
    if libc.madvise(start, length, advice) == 0:
        return 0
    return ctypes.get_errno()


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
    real = os.path.realpath(path)
    total, counting = 0, False
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as smaps:
        for line in smaps:
            match = _MAPS_LINE.match(line.rstrip("\n"))
            if match is not None:
                counting = match.group(7) == real
            elif counting and line.startswith("Rss:"):
                total += int(line.split()[1]) * 1024
    return total
