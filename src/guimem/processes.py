"""Stop the processes this process started (browsers, drivers, workers) when a run is interrupted.

A browser that is still starting when a signal arrives has no driver object yet to quit, so
closing the workbench alone can leave it running; this walks the process tree instead (Linux
``/proc``; elsewhere it does nothing).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

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


def descendants(pid: int | None = None) -> list[int]:
    """Live descendants of ``pid`` (this process by default), parents before children."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    out: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for p in pids:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            continue


def stop_descendants(grace_s: float = 10.0, passes: int = 5) -> int:
    """SIGTERM every descendant, wait up to ``grace_s``, then SIGKILL what is left; returns how many there were.

    Repeated while descendants remain (up to ``passes`` times): a process started while the first pass
    ran — a pool replacing a worker that just exited, a worker launching a browser — is caught by the next.
    """
    total = 0
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
