"""Worker processes and their browsers end with the run: after a normal exit and after SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def group_processes(pgid: int) -> list[str]:
    """Command names of the live (non-zombie) processes in a process group."""
    names = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            raw = stat.read_text()
        except OSError:
            continue
        name, rest = raw[raw.index("(") + 1:raw.rindex(")")], raw[raw.rindex(")") + 2:].split()
        if rest[0] != "Z" and int(rest[2]) == pgid:
            names.append(name)
    return names


def browsers(pgid: int) -> list[str]:
    return [n for n in group_processes(pgid) if "chrom" in n]


def _eval(out: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "guimem.cli", "eval", "--suite", "smoke", "--rounds", "1", "--methods", "graph",
           "--workers", "2", "--out", str(out)]
    return subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing"})


def _gone(pgid: int, timeout_s: float = 15.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and browsers(pgid):
        time.sleep(0.2)
    return browsers(pgid)


def test_sigterm_mid_run_stops_every_worker_browser(tmp_path):
    proc = _eval(tmp_path / "run")
    deadline = time.monotonic() + 120
    seen: list[str] = []
    while time.monotonic() < deadline and proc.poll() is None:
        seen = browsers(proc.pid)
        if len([n for n in seen if n == "chromedriver"]) >= 2:
            break
        time.sleep(0.1)
    assert len([n for n in seen if n == "chromedriver"]) >= 2, f"two workers' browsers should run: {seen}"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert b"rerun the same command to resume" in err
    left = _gone(proc.pid)
    assert left == [], f"left running after SIGTERM: {left}"


def test_a_normal_exit_with_two_workers_leaves_no_browser(tmp_path):
    proc = _eval(tmp_path / "run")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    left = _gone(proc.pid)
    assert left == [], f"left running after a normal exit: {left}"
