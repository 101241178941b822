"""The processes this process started, and what they leave on disk when they are killed.

- `stop_descendants`: stop the processes this process started (browsers, drivers, workers) when a
  run is interrupted. A browser that is still starting when a signal arrives has no driver object yet
  to quit, so closing the workbench alone can leave it running; this walks the process tree instead
  (Linux ``/proc``; elsewhere it does nothing), and `adopt_orphans` keeps a process whose parent dies
  meanwhile in that tree.
- `owned_tempdir` / `sweep_orphans`: a temporary folder (a Chromium profile, a display's runtime
  dir) names the process that made it, by pid *and* start time (pids are reused), so the next start
  removes the folders of owners that no longer exist — what a SIGKILL left behind.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def _parents() -> dict[int, int]:
    """pid → parent pid of every live (non-zombie) process."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            raw = stat.read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2:].split()
        if fields[0] != "Z":
            out[int(stat.parent.name)] = int(fields[1])
    return out


def _python_helper(pid: int) -> bool:
    """multiprocessing's resource tracker: it ignores SIGTERM by design and ends when its parent does."""
    try:
        return b"multiprocessing.resource_tracker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def descendants(pid: int | None = None) -> list[int]:
    """Live descendants of ``pid`` (this process by default), parents before children (Python's own
    resource tracker left out)."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    out: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        p = todo.pop(0)
        if not _python_helper(p):
            out.append(p)
        todo.extend(children.get(p, []))
    return out


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for p in pids:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            continue


_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37  # <linux/prctl.h>


@functools.cache
def _prctl() -> Any | None:
    """libc's prctl with its argument types, loaded once (not in a signal handler); None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    fn.restype = ctypes.c_int
    return fn


def adopt_orphans(on: bool = True) -> bool | None:
    """Make this process a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``), or stop being one with
    ``on=False``; returns the setting it had (None where it cannot be set: not Linux, or refused).

    A descendant whose parent dies is then re-parented to this process instead of to init, so `descendants`
    still finds it: chromedriver, stopped while it launches Chromium, forks the browser and dies, and the
    browser would otherwise outlive the run. Adopted orphans that exit stay zombies until this process exits
    (nothing here reaps a process it did not start), so a process that goes on living sets it only while it
    stops what it started (`orphans_adopted`); a worker process sets it for its life.
    """
    import ctypes

    prctl = _prctl()
    if prctl is None:
        return None
    was = ctypes.c_int(0)
    if prctl(_PR_GET_CHILD_SUBREAPER, ctypes.addressof(was), 0, 0, 0) != 0 or \
            prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        log.warning("cannot %s a child subreaper: %s", "become" if on else "stop being",
                    os.strerror(ctypes.get_errno()))
        return None
    return bool(was.value)


def _children() -> set[int]:
    me = os.getpid()
    return {pid for pid, parent in _parents().items() if parent == me}


@contextmanager
def orphans_adopted(stop_adopted: bool = False, grace_s: float = 3.0) -> Iterator[None]:
    """`adopt_orphans` for the duration of the block, and the setting before it put back after. With
    ``stop_adopted``, the processes that became this process's children during the block (orphans of what
    it was stopping) are stopped with their own children at its end; otherwise they stay its children."""
    before = _children() if stop_adopted else set()
    was = adopt_orphans()
    try:
        yield
    finally:
        if stop_adopted:
            tree = [p for root in _children() - before for p in (root, *descendants(root))]
            if tree:
                _stop(tree, grace_s)
        if was is False:
            adopt_orphans(False)


def stop_descendants(grace_s: float = 10.0, passes: int = 5) -> int:
    """SIGTERM every descendant, wait up to ``grace_s``, then SIGKILL what is left; returns how many there were.

    Repeated while descendants remain (up to ``passes`` times): a process started while the first pass
    ran — a pool replacing a worker that just exited, a worker launching a browser — is caught by the next,
    and so is one whose parent died under the first (`orphans_adopted`).
    """
    total = 0
    with orphans_adopted():
        for _ in range(passes):
            pids = descendants()
            if not pids:
                break
            total += _stop(pids, grace_s)
    return total


def _stop(pids: list[int], grace_s: float) -> int:
    _signal(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        live = _parents()
        if not any(p in live for p in pids):
            return len(pids)
        time.sleep(0.05)
    live = _parents()
    left = [p for p in pids if p in live]
    log.warning("%d child processes did not stop on SIGTERM; killing them", len(left))
    _signal(left, signal.SIGKILL)
    return len(pids)


OWNER_FILE = ".guimem-owner"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return None if fields[0] == "Z" else fields[19]


def owned_tempdir(prefix: str, root: str | None = None) -> str:
    """A new temporary folder that records its owner (this process), for `sweep_orphans` to judge later."""
    path = tempfile.mkdtemp(prefix=prefix, dir=root)
    Path(path, OWNER_FILE).write_text(f"{os.getpid()} {_start_time(os.getpid()) or ''}\n")
    return path


def _orphaned(folder: Path) -> bool:
    """Its owner is gone (or it records none and is a day old: a folder of an older guimem)."""
    try:
        pid_text, _, started = (folder / OWNER_FILE).read_text().strip().partition(" ")
        pid = int(pid_text)
    except FileNotFoundError:
        try:
            return time.time() - folder.lstat().st_mtime > 86400
        except OSError:
            return False
    except (OSError, ValueError):
        return False
    now = _start_time(pid)
    return now is None or (bool(started) and now != started)


def sweep_orphans(prefix: str, root: str | None = None, before_remove: Callable[[Path], None] | None = None) -> int:
    """Remove the folders ``<root>/<prefix>*`` whose owning process no longer exists; returns how many.

    Only real folders (not links) that this user owns are considered, so a folder planted by someone
    else, or a link to one, is left alone.

    Args:
        prefix: The folders' name prefix.
        root: Where they are (the temporary folder by default).
        before_remove: Called with each orphaned folder before it is removed (to stop the processes
            and free the sockets its owner left, e.g. a display's).
    """
    base = Path(root or tempfile.gettempdir())
    removed = 0
    for folder in base.glob(f"{prefix}*"):
        try:
            st = folder.lstat()
        except OSError:
            continue
        if not folder.is_dir() or folder.is_symlink() or st.st_uid != os.getuid() or not _orphaned(folder):
            continue
        if before_remove is not None:
            before_remove(folder)
        shutil.rmtree(folder, ignore_errors=True)
        removed += 1
        log.info("removed %s: its process is gone", folder)
    return removed
