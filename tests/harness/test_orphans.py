"""`stop_descendants` catches a process whose parent dies while it is being stopped.

chromedriver, SIGTERMed while it launches Chromium, can fork the browser and die: the browser's parent is
gone, so without this it is re-parented to init, no longer a descendant, and outlives the run (CI saw nine
Chromium processes left after a SIGTERM to `guimem eval --workers 2`).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

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

STOPPER = textwrap.dedent("""
    import subprocess, sys, time
    from pathlib import Path
    from guimem.processes import stop_descendants
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
    while not Path(sys.argv[2] + ".ready").exists():
        time.sleep(0.02)
    stop_descendants(grace_s=5.0)
    child.wait()
    from guimem.processes import adopt_orphans
    print("subreaper after:", adopt_orphans(False))
""")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_process_orphaned_while_its_parent_is_stopped_is_stopped_too(tmp_path):
    marker = tmp_path / "grandchild"
    run = subprocess.run([sys.executable, "-c", STOPPER, CHILD, str(marker)], timeout=60, capture_output=True)
    assert run.returncode == 0, run.stderr.decode()
    assert b"subreaper after: False" in run.stdout, "a process that goes on living is a subreaper only while it stops"
    grandchild = int(marker.read_text())
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(grandchild):
            time.sleep(0.05)
        assert not _alive(grandchild), "the grandchild started as its parent was stopped outlived stop_descendants"
    finally:
        if _alive(grandchild):
            subprocess.run(["kill", "-9", str(grandchild)], check=False)
