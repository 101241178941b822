"""An aborting run stops its worker pool even when a worker died holding the pool's task queue lock (a SIGTERM to
the whole process group, as a CI timeout sends, left ``guimem eval --workers 2`` waiting in ``Pool.terminate``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CASE = Path(__file__).with_name("pool_case.py")


def test_a_pool_whose_idle_workers_were_killed_is_terminated():
    try:
        done = subprocess.run([sys.executable, str(CASE)], capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the pool did not stop: {exc.stdout!r} {exc.stderr!r}") from exc
    assert "lock held by a dead worker: True" in done.stdout, "the case must be the one that hangs"
    assert "stopped" in done.stdout and done.returncode == 0, done.stderr
