"""Worker processes and their browsers end with the run: after a normal exit and after SIGTERM."""

from __future__ import annotations

import contextlib
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


def test_sigterm_stops_the_test_suites_own_browsers(tmp_path):
    case = Path(__file__).with_name("sigterm_case.py")
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(case)],
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            cwd=Path(__file__).parents[2])
    assert proc.stdout is not None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and b"browser up" not in proc.stdout.readline():
        assert proc.poll() is None, "the case ended before its browser started"
    assert browsers(proc.pid), "the case's browser should be running"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    left = _gone(proc.pid)
    assert left == [], f"left running after SIGTERM to pytest: {left}\n{out.decode()[-800:]}"


def test_profiles_of_killed_processes_are_swept_and_live_ones_kept(tmp_path):
    from guimem.processes import OWNER_FILE, owned_tempdir, sweep_orphans

    mine = owned_tempdir("guimem-sweep-", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "import sys; from guimem.processes import owned_tempdir; "
                             f"print(owned_tempdir('guimem-sweep-', {str(tmp_path)!r}))"], stdout=subprocess.PIPE)
    theirs = dead.communicate()[0].decode().strip()
    reused = owned_tempdir("guimem-sweep-", str(tmp_path))  # this pid, another start time: a reused pid
    Path(reused, OWNER_FILE).write_text(f"{os.getpid()} 1\n")
    foreign = tmp_path / "guimem-sweep-link"
    foreign.symlink_to(mine)
    assert sweep_orphans("guimem-sweep-", str(tmp_path)) == 2
    assert Path(mine).is_dir() and not Path(theirs).exists() and not Path(reused).exists() and foreign.is_symlink()


def test_the_sweep_hands_each_orphan_to_before_remove_while_it_still_exists(tmp_path):
    from guimem.processes import owned_tempdir, sweep_orphans

    kept = owned_tempdir("guimem-sweep-", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "from guimem.processes import owned_tempdir; "
                             f"print(owned_tempdir('guimem-sweep-', {str(tmp_path)!r}))"], stdout=subprocess.PIPE)
    theirs = dead.communicate()[0].decode().strip()
    seen: list[tuple[str, bool]] = []
    assert sweep_orphans("guimem-sweep-", str(tmp_path), before_remove=lambda f: seen.append((str(f), f.is_dir()))) == 1
    assert seen == [(theirs, True)] and Path(kept).is_dir() and not Path(theirs).exists()


def test_a_browser_profile_left_by_a_sigkilled_process_is_removed_at_the_next_start():
    code = ("import os, signal; from guimem.envs.browser import launch_chrome; from guimem.settings import "
            "BrowserSettings; b = launch_chrome(BrowserSettings()); print(b.profile_dir, flush=True); "
            "os.kill(os.getpid(), signal.SIGKILL)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    profile = proc.communicate(timeout=90)[0].decode().strip()
    assert profile and Path(profile).is_dir(), "the killed process's profile is left behind"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # its browser, orphaned
    from guimem.envs.browser import launch_chrome
    from guimem.settings import BrowserSettings

    launch_chrome(BrowserSettings()).close()
    assert not Path(profile).exists()
