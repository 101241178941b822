"""One private desktop session: an Xvfb display, a session bus and an accessibility bus of its own.

Nothing is shared with another session or with the user's desktop: the display is picked free by
Xvfb itself (``-displayfd``), the session bus has no service directories (so nothing is auto-started
on it, not even a second accessibility launcher), and ``HOME`` and ``XDG_RUNTIME_DIR`` live in the
session's own folder. Every process the session starts runs in one process group and carries the
session's folder in its environment (`MARKER`), so `DesktopSession.stop` and the sweep of the next
start find them all, including those the buses start on their own (``at-spi2-registryd``), which
leave the group's parent behind when it is killed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from guimem.errors import EnvError, EnvNotReadyError
from guimem.processes import owned_tempdir, sweep_orphans

log = logging.getLogger(__name__)

SESSION_PREFIX = "guimem-desktop-"
MARKER = "GUIMEM_DESKTOP_SESSION"
APT_PACKAGES = ("xvfb", "dbus-daemon", "at-spi2-core", "gir1.2-atspi-2.0", "xdotool", "mousepad", "galculator",
                "gedit")
INSTALL_HINT = "sudo apt-get install -y --no-install-recommends " + " ".join(APT_PACKAGES)
BUS_LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
PROGRAMS = ("Xvfb", "dbus-daemon", "at-spi-bus-launcher", "xdotool")
_BUS_CONF = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={dir}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


def binary(name: str) -> str:
    """The path of a program the desktop stack needs.

    Raises:
        EnvNotReadyError: It is not installed (the fix is the apt-get line).
    """
    path = BUS_LAUNCHER if name == "at-spi-bus-launcher" else shutil.which(name)
    if path is None or not os.access(path, os.X_OK):
        raise EnvNotReadyError(f"{name} is not installed", suggestion=INSTALL_HINT)
    return path


def _marked(folder: Path) -> list[int]:
    """This user's live processes whose environment names ``folder`` as their session."""
    needle = f"{MARKER}={folder}\0".encode()
    out = []
    for env_file in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in env_file.read_bytes():
                out.append(int(env_file.parent.name))
        except (OSError, ValueError):
            continue
    return [p for p in out if p != os.getpid()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _kill(pids: Sequence[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue


def _free_display(number: int | None) -> None:
    """Remove the socket and lock file of display ``number`` when no live server holds the lock."""
    if number is None:
        return
    lock = Path(f"/tmp/.X{number}-lock")
    try:
        holder = int(lock.read_text().strip())
    except (OSError, ValueError):
        holder = None
    if holder is not None and _alive(holder):
        return
    for path in (lock, Path(f"/tmp/.X11-unix/X{number}")):
        path.unlink(missing_ok=True)


def _display_of(folder: Path) -> int | None:
    try:
        return int((folder / "display").read_text().strip())
    except (OSError, ValueError):
        return None


def end_processes(folder: Path, grace_s: float = 3.0) -> int:
    """SIGTERM every process of the session in ``folder``, SIGKILL what is left after ``grace_s``; returns
    how many there were. Its display's socket is freed too."""
    pids = _marked(folder)
    _kill(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    left = [p for p in pids if _alive(p)] + [p for p in _marked(folder) if p not in pids]
    if left:
        _kill(left, signal.SIGKILL)
        deadline = time.monotonic() + grace_s
        while any(_alive(p) for p in left) and time.monotonic() < deadline:
            time.sleep(0.02)
    _free_display(_display_of(folder))
    return len(pids)


def sweep_sessions() -> int:
    """Stop the processes and free the displays of sessions whose owner was killed; returns how many."""
    def stop(folder: Path) -> None:
        end_processes(folder, grace_s=0.5)

    return sweep_orphans(SESSION_PREFIX, before_remove=stop)


def read_line(fd: int, timeout_s: float, what: str) -> str:
    """One line from ``fd`` (a pipe a starting server writes its address to), within ``timeout_s``."""
    data = b""
    deadline = time.monotonic() + timeout_s
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise EnvError(f"{what} did not start within {timeout_s:.0f}s")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise EnvError(f"{what} exited while starting")
        data += chunk
    return data.decode().strip()


class DesktopSession:
    """A private X display with its session and accessibility buses.

    Args:
        width: Screen width (1920: at smaller sizes GTK's Save As dialog hangs off the screen).
        height: Screen height.
        start_timeout_s: How long each server may take to start.
    """

    def __init__(self, width: int = 1920, height: int = 1080, start_timeout_s: float = 10.0) -> None:
        self.width = width
        self.height = height
        self.start_timeout_s = start_timeout_s
        self.folder: Path | None = None
        self.display: int | None = None
        self.env: dict[str, str] = {}
        self._group: int | None = None
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def running(self) -> bool:
        """True between `start` and `stop`."""
        return self.folder is not None

    @property
    def framebuffer(self) -> Path:
        """The display's screen as Xvfb keeps it (an XWD file, for screenshots).

        Raises:
            EnvError: The session is not running.
        """
        if self.folder is None:
            raise EnvError("the desktop session is not running")
        return self.folder / "Xvfb_screen0"

    def start(self) -> None:
        """Sweep what killed sessions left, then start the display and both buses.

        Raises:
            EnvNotReadyError: Xvfb, dbus-daemon or the accessibility bus launcher is not installed.
            EnvError: One of them did not start (everything already started is stopped again).
        """
        if self.running:
            return
        programs = [binary(n) for n in ("Xvfb", "dbus-daemon", "at-spi-bus-launcher")]
        swept = sweep_sessions()
        if swept:
            log.info("stopped %d desktop sessions left by killed processes", swept)
        self.folder = Path(owned_tempdir(SESSION_PREFIX))
        try:
            self._start(*programs)
        except BaseException:
            self.stop()
            raise

    def _base_env(self, folder: Path) -> dict[str, str]:
        runtime, home, tmp = folder / "run", folder / "home", folder / "tmp"
        runtime.mkdir(mode=0o700)
        home.mkdir()
        tmp.mkdir()
        keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
        return {**keep, "HOME": str(home), "TMPDIR": str(tmp), "XDG_RUNTIME_DIR": str(runtime),
                "XDG_CONFIG_HOME": str(home / ".config"),
                "XDG_DATA_HOME": str(home / ".local/share"), "XDG_CACHE_HOME": str(home / ".cache"),
                "GSETTINGS_BACKEND": "memory", "GTK_USE_PORTAL": "0", "GDK_BACKEND": "x11",
                "LANG": os.environ.get("LANG", "C.UTF-8"), MARKER: str(folder)}

    def _start(self, xvfb: str, dbus: str, launcher: str) -> None:
        assert self.folder is not None
        self.env = self._base_env(self.folder)
        read, write = os.pipe()
        try:
            self._spawn([xvfb, "-displayfd", str(write), "-screen", "0", f"{self.width}x{self.height}x24",
                         "-nolisten", "tcp", "-noreset", "-fbdir", str(self.folder)], pass_fds=(write,))
            os.close(write)
            write = -1
            self.display = int(read_line(read, self.start_timeout_s, "Xvfb"))
        finally:
            os.close(read)
            if write >= 0:
                os.close(write)
        (self.folder / "display").write_text(f"{self.display}\n")
        self.env["DISPLAY"] = f":{self.display}"
        conf = self.folder / "session.conf"
        conf.write_text(_BUS_CONF.format(dir=self.env["XDG_RUNTIME_DIR"]))
        bus = self._spawn([dbus, f"--config-file={conf}", "--nofork", "--print-address=1"], stdout=subprocess.PIPE)
        assert bus.stdout is not None
        self.env["DBUS_SESSION_BUS_ADDRESS"] = read_line(bus.stdout.fileno(), self.start_timeout_s, "dbus-daemon")
        self._spawn([launcher, "--launch-immediately", "--a11y=1"])

    def _spawn(self, argv: list[str], *, pass_fds: tuple[int, ...] = (), stdin: int | None = subprocess.DEVNULL,
               stdout: int | None = subprocess.DEVNULL, cwd: Path | None = None) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, env=self.env, stdin=stdin, stdout=stdout,
                                stderr=subprocess.DEVNULL, pass_fds=pass_fds, cwd=cwd,
                                process_group=0 if self._group is None else self._group)
        if self._group is None:
            self._group = proc.pid
        self._procs.append(proc)
        return proc

    def launch(self, argv: list[str], *, cwd: Path | None = None, stdin: int | None = subprocess.DEVNULL,
               stdout: int | None = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
        """Start a program inside the session (same display, buses, home and process group).

        Raises:
            EnvError: The session is not running.
        """
        if not self.running:
            raise EnvError("the desktop session is not running")
        return self._spawn(argv, cwd=cwd, stdin=stdin, stdout=stdout)

    def stop(self) -> None:
        """Stop every process of the session and remove its folder (idempotent)."""
        folder, self.folder = self.folder, None
        if self._group is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._group, signal.SIGTERM)
        if folder is not None:
            end_processes(folder)
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
        self._procs.clear()
        self._group = None
        _free_display(self.display)
        self.display = None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
