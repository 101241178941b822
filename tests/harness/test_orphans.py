"""A process whose parent dies while it is being stopped is stopped too.

chromedriver, SIGTERMed while it launches Chromium, can fork the browser and die: the browser's parent is
gone, so it would be re-parented to init, no longer a descendant, and outlive the run (CI saw nine
Chromium processes left after a SIGTERM to `guimem eval --workers 2`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreapers are Linux's")

# A child that, when SIGTERMed, starts a grandchild and exits at once (as chromedriver launching Chromium).
CHILD = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    def on_term(*_):
        g = subprocess.Popen(["sleep", "300"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        open(sys.argv[1], "w").write(str(g.pid))
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)
    open(sys.argv[1] + ".ready", "w").write("1")
    time.sleep(300)
""")

# How the child is stopped: the sweep of everything (`stop_descendants`), or the child alone inside
# `orphans_adopted(stop_adopted=True)` (as the pool's abort stops its workers).
STOPPER = textwrap.dedent("""
    import subprocess, sys, time
    from pathlib import Path
    from guimem.processes import adopt_orphans, orphans_adopted, stop_descendants
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
    while not Path(sys.argv[2] + ".ready").exists():
        time.sleep(0.02)
    if sys.argv[3] == "sweep":
        stop_descendants(grace_s=30.0)
    else:
        with orphans_adopted(stop_adopted=True):
            child.terminate()
            child.wait()
    child.wait()
    print("subreaper after:", adopt_orphans(False))
""")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _is_our_sleep(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x00300\x00"
    except OSError:
        return False


@pytest.mark.parametrize("how", ["sweep", "adopted"])
def test_a_process_orphaned_while_its_parent_is_stopped_is_stopped_too(tmp_path, how):
    marker = tmp_path / "grandchild"
    run = subprocess.run([sys.executable, "-c", STOPPER, CHILD, str(marker), how], timeout=120,
                         capture_output=True)
    assert run.returncode == 0, run.stderr.decode()
    assert marker.exists(), f"the child was stopped before it could start its grandchild: {run.stderr.decode()}"
    grandchild = int(marker.read_text())
    try:
        deadline = time.monotonic() + 5  # the stopper has exited; its zombie grandchild goes to init, reaped
        while time.monotonic() < deadline and _alive(grandchild):
            time.sleep(0.05)
        assert not _alive(grandchild), "the grandchild started as its parent was stopped outlived the stopper"
        assert b"subreaper after: False" in run.stdout, "a process that goes on living adopts only while stopping"
    finally:
        if _alive(grandchild) and _is_our_sleep(grandchild):
            os.kill(grandchild, 9)
