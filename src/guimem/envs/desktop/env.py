"""`DesktopEnv`: GTK applications on a private Xvfb display, read and driven through AT-SPI.

- One `DesktopSession` (display, session bus, accessibility bus) per env, started on first reset
  and kept across episodes; each episode starts the task's app afresh in a clean home folder.
- The screen is the AT-SPI tree, read by the bridge child process (`bridge.py`).
- Tap: a real click at the element's centre (xdotool); the element's AT-SPI action, sent without
  waiting, when it is not on the screen (a menu item that opens a modal dialog would block a waiting
  caller: the field notes' pitfall). Type: EditableText
  when the element offers it, else a click and real keystrokes. Keys and scrolls: real input (xdotool).
- With ``screenshots_dir``, each observation carries a PNG of the window the agent sees (read from
  Xvfb's own framebuffer file, no extra package).
- An episode is done when its check passes (as MiniWoB's tasks end on success); `evaluate` runs the
  check on the real state.
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from guimem.envs.base import Preview, StartMemo, Transition, show_preview
from guimem.envs.desktop.confine import landlock_abi
from guimem.envs.desktop.observation import (
    Node,
    RefTable,
    Screen,
    action_index,
    build_screen,
    open_popups,
    popup_owns,
)
from guimem.envs.desktop.screenshot import save_screenshot
from guimem.envs.desktop.session import INSTALL_HINT, PROGRAMS, DesktopSession, binary, read_line
from guimem.envs.desktop.tasks import APPS, DesktopTask, DisplayCheck, app_argv, desktop_task, setup_files
from guimem.errors import EnvError, EnvNotReadyError
from guimem.settings import GuimemSettings
from guimem.types import (
    Action,
    ActionError,
    ActionErrorCode,
    ActionKind,
    Observation,
    Outcome,
    Role,
    Task,
    UIElement,
    fill,
)

log = logging.getLogger(__name__)

KEYS = {
    "enter": "Return", "tab": "Tab", "backspace": "BackSpace", "delete": "Delete", "space": "space",
    "up": "Up", "down": "Down", "left": "Left", "right": "Right", "pageup": "Prior", "pagedown": "Next",
    "escape": "Escape", "home": "Home", "end": "End",
}
PYGOBJECT_HINT = ("pip install 'guimem[desktop]' (PyGObject; it builds against Debian's "
                  "libgirepository1.0-dev libcairo2-dev pkg-config gcc)")
_BRIDGE = Path(__file__).with_name("bridge.py")
_CONFINE = Path(__file__).with_name("confine.py")


def missing_parts() -> tuple[list[str], str | None]:
    """The programs the desktop env needs that are not installed, and the fix (None when nothing is missing).

    The apps of every task count; PyGObject in this Python too (its fix is a pip line, not apt-get).
    """
    import importlib.util

    names = [*PROGRAMS, *dict.fromkeys(app.argv[0] for app in APPS.values())]
    missing = []
    for name in names:
        try:
            binary(name)
        except EnvNotReadyError:
            missing.append(name)
    if missing:
        return missing, INSTALL_HINT
    if importlib.util.find_spec("gi") is None:
        return ["PyGObject"], PYGOBJECT_HINT
    return [], None


def xdotool_key(name: str) -> str | None:
    """xdotool's name for a guimem key (``enter``, ``ctrl+s``, ``a``), or None when it is not one."""
    parts = [p.strip() for p in name.split("+")]
    if not all(parts):
        return None
    mods = {"ctrl": "ctrl", "control": "ctrl", "alt": "alt", "shift": "shift", "super": "super"}
    *head, last = parts
    if any(p.lower() not in mods for p in head):
        return None
    key = KEYS.get(last.lower(), last if len(last) == 1 or (last[:1] == "F" and last[1:].isdigit()) else None)
    return None if key is None else "+".join([*(mods[p.lower()] for p in head), key])


POPUP_CLOSE_TRIES = 3
"""How many times a tap outside an open popup presses Escape at most (a submenu closes one level a press)."""
POPUP_CLOSE_WAIT_S = 1.0
"""How long a popup may take to leave the accessibility tree after Escape."""
FOCUS_WAIT_S = 2.0
"""How long a new window may take to give one of its elements the keyboard focus."""


class DesktopEnv:
    """Desktop GTK applications as an `Env`.

    Args:
        settle_s: Pause after each action before the screen is read.
        start_timeout_s: How long the servers and the app may take to start.
        screenshots_dir: When set, a PNG of the window the agent sees is written there for every observation.
    """

    def __init__(self, settle_s: float = 0.4, start_timeout_s: float = 15.0,
                 screenshots_dir: Path | None = None) -> None:
        self.settle_s = settle_s
        self.start_timeout_s = start_timeout_s
        self.screenshots_dir = screenshots_dir
        self.session = DesktopSession(start_timeout_s=start_timeout_s)
        self._bridge: subprocess.Popen[bytes] | None = None
        self._app: subprocess.Popen[bytes] | None = None
        self._refs = RefTable()
        self._task: Task | None = None
        self._spec: DesktopTask | None = None
        self._screen: Screen | None = None
        self._shot_prefix = uuid.uuid4().hex[:8]  # envs sharing a folder (workers) never overwrite each other
        self._shots = 0
        self._preview: Preview | None = None
        self._starts = StartMemo()
        self._read_s = 0.0
        self._landlock = landlock_abi() > 0
        if not self._landlock:
            log.warning("this kernel has no Landlock: desktop apps can write outside their session's folder")

    @classmethod
    def from_settings(cls, settings: GuimemSettings | None = None, screenshots_dir: Path | None = None) -> DesktopEnv:
        """Build for the registry."""
        return cls(screenshots_dir=screenshots_dir)

    @property
    def name(self) -> str:
        """``desktop``."""
        return "desktop"

    @property
    def task(self) -> Task:
        """The current, instantiated task."""
        if self._task is None:
            raise EnvError("no episode has started: call reset(task) first")
        return self._task

    @property
    def home(self) -> Path:
        """The session's home folder (where the task's files are)."""
        return Path(self.session.env["HOME"])

    def preflight(self) -> str:
        """Start the session and the bridge, and read the (empty) desktop.

        Raises:
            EnvNotReadyError: A program or PyGObject is missing.
            EnvError: A server does not start.
        """
        start = time.perf_counter()
        self._ensure_session()
        self._request({"op": "tree"})
        return f"display :{self.session.display} and AT-SPI bridge ready in {time.perf_counter() - start:.2f}s"

    # -- session and bridge -------------------------------------------------------------------------

    def _ensure_session(self) -> None:
        if self.session.running and self._bridge is not None and self._bridge.poll() is None:
            return
        missing, fix = missing_parts()
        if missing:
            raise EnvNotReadyError(f"the desktop env needs {', '.join(missing)}: not installed", suggestion=fix)
        try:
            self.session.start()
            self._bridge = self.session.launch([sys.executable, str(_BRIDGE)], stdin=subprocess.PIPE,
                                               stdout=subprocess.PIPE)
            assert self._bridge.stdout is not None
            first = json.loads(read_line(self._bridge.stdout.fileno(), self.start_timeout_s, "the AT-SPI bridge"))
            if not first.get("ok"):
                raise EnvError(f"the AT-SPI bridge did not start: {first}")
        except BaseException:
            self.close()
            raise

    def _request(self, request: dict[str, Any], timeout_s: float = 20.0) -> dict[str, Any]:
        bridge = self._bridge
        if bridge is None or bridge.stdin is None or bridge.stdout is None or bridge.poll() is not None:
            raise EnvError("the AT-SPI bridge is not running", suggestion="reset the env to start it again")
        try:
            bridge.stdin.write((json.dumps(request) + "\n").encode())
            bridge.stdin.flush()
            reply: dict[str, Any] = json.loads(read_line(bridge.stdout.fileno(), timeout_s, "an AT-SPI reply"))
        except (OSError, ValueError, EnvError) as exc:
            self._stop_bridge()
            raise EnvError(f"the AT-SPI bridge failed: {exc}", suggestion="check `guimem doctor`") from exc
        return reply

    def _stop_bridge(self) -> None:
        bridge, self._bridge = self._bridge, None
        if bridge is None:
            return
        if bridge.poll() is None:
            bridge.kill()
        bridge.wait()
        for pipe in (bridge.stdin, bridge.stdout):
            if pipe is not None:
                pipe.close()

    def _xdotool(self, *args: str) -> None:
        proc = self.session.launch(["xdotool", *args])
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            proc.wait()
            raise EnvError(f"xdotool {' '.join(args)} hung") from exc

    # -- episodes -----------------------------------------------------------------------------------

    def reset(self, task: Task) -> Observation:
        """Start ``task``'s app afresh in a clean home folder and observe its window."""
        spec = desktop_task(task.id)
        params = spec.values(task.seed)
        self._ensure_session()
        self._stop_app()
        self._clean_home()
        setup_files(spec, self.home, params)
        self._task = task.model_copy(update={"goal": fill(spec.goal, params), "params": params, "app": spec.app})
        self._spec = spec
        self._refs.clear()
        self._app = self.session.launch(self._confined(app_argv(spec, self.home, params)), cwd=self.home)
        obs = self._wait_for_window(APPS[spec.app].window)
        self._starts.remember(task, self._task, obs)
        return obs

    def expected_start(self, task: Task) -> tuple[Task, Observation] | None:
        """What the last reset with ``task`` returned (`ForeseeingStart`): an app started with the same files
        most often opens on the same window."""
        return self._starts.expected(task)

    def _confined(self, argv: list[str]) -> list[str]:
        """``argv`` started so that the app may write only inside the session's folder (`confine.py`): the
        file chooser reaches the whole disk, and an agent that saves outside its home must not overwrite
        a real file. Without Landlock in the kernel, the app runs unconfined (with a warning)."""
        if not self._landlock:
            return argv
        return [sys.executable, str(_CONFINE), str(self.session.folder), "--", *argv]

    def _clean_home(self) -> None:
        for child in self.home.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)

    def _stop_app(self) -> None:
        app, self._app = self._app, None
        if app is None:
            return
        if app.poll() is None:
            app.send_signal(signal.SIGTERM)
            try:
                app.wait(timeout=3)
            except subprocess.TimeoutExpired:
                app.kill()
        app.wait()

    def _wait_for_window(self, title: str) -> Observation:
        """Observe until the app's window is up, two reads agree (the app has finished building it) and the
        keyboard focus is in it. GTK moves the focus into a window some time after showing it, so a first screen
        read before or after that differs for the agent: in a 5-round run, one task's first screen had mousepad's
        text view focused in two of its five starts and not in the other three, and the explorer's first step
        differed. A window that gives no element the focus is taken after `FOCUS_WAIT_S`.

        With no window manager the keyboard focus follows the pointer, and the pointer is where the last
        episode left it: so once the window is up the pointer is put just inside its top-left corner (on no
        control), and every start gets the focus a freshly started app has on a desktop."""
        deadline = time.monotonic() + self.start_timeout_s
        focus_by: float | None = None
        last = None
        while time.monotonic() < deadline:
            screen = self._observe()
            elements = screen.observation.elements
            shown = [(e.role, e.text, e.value, e.focused) for e in elements]
            if title in screen.observation.location:
                if focus_by is None:
                    self._xdotool("mousemove", str(int(screen.window.x) + 1), str(int(screen.window.y) + 1))
                    last = None  # a read from before the pointer came in is not one of the two that must agree
                    focus_by = time.monotonic() + FOCUS_WAIT_S
                    time.sleep(0.2)
                    continue
                if shown == last and (any(e.focused for e in elements) or time.monotonic() >= focus_by):
                    return screen.observation
            last = shown
            time.sleep(0.2)
        if self._app is not None and self._app.poll() is not None:
            raise EnvError(f"{self.task.app} exited with {self._app.returncode} while starting")
        raise EnvNotReadyError(f"{self.task.app}'s window did not appear within {self.start_timeout_s:.0f}s",
                               suggestion="check `guimem doctor`")

    def preview_to(self, callback: Preview | None) -> None:
        """Show ``callback``, halfway through every step's settle wait, the screen as it is then (`Previewing`).

        The preview reads the tree and changes nothing: its refs come from a copy of the episode's table, so
        a node first seen in it gets its ref from the settled read as it would without it, and no screenshot
        is taken."""
        self._preview = callback

    def _show_preview(self) -> None:
        callback = self._preview
        if callback is None:
            return
        show_preview(callback, self._read(RefTable(dict(self._refs.refs))).observation)

    def _observe(self) -> Screen:
        screen = self._read(self._refs)
        if self.screenshots_dir is not None:
            path = self.screenshots_dir / f"obs-{self._shot_prefix}-{self._shots:05d}.png"
            save_screenshot(self.session.framebuffer, path, crop=screen.window)
            self._shots += 1
            screen = replace(screen, observation=screen.observation.model_copy(update={"screenshot": str(path)}))
        self._screen = screen
        return screen

    def _read(self, refs: RefTable) -> Screen:
        started = time.monotonic()
        nodes = self._nodes()
        self._read_s = time.monotonic() - started
        return build_screen(nodes, refs, self.task.app, self.session.env.get("HOME", ""))

    def step(self, action: Action) -> Transition:
        """Perform one action; a failed action comes back as an `ActionError` (a dead session raises `EnvError`)."""
        if self._screen is None:
            raise EnvError("no episode has started: call reset(task) first")
        error = self._perform(action)
        if action.kind is not ActionKind.WAIT:
            settled = time.monotonic() + self.settle_s
            # a tree read that takes more than half the settle wait would push the settled one later: no preview
            if self._preview is not None and self._read_s <= self.settle_s / 2:
                time.sleep(self.settle_s / 2)
                self._show_preview()  # memory embeds it while the app settles
            time.sleep(max(0.0, settled - time.monotonic()))
        obs = self._observe().observation
        return Transition(obs, error, done=self._check()[0])

    def _error(self, code: ActionErrorCode, message: str, action: Action) -> ActionError:
        return ActionError(code=code, message=message, action=action.describe())

    def _perform(self, action: Action) -> ActionError | None:
        kind = action.kind
        if kind in (ActionKind.TAP, ActionKind.TYPE):
            el = self._screen.observation.element(action.ref) if (self._screen and action.ref) else None
            if el is None:
                return self._error(ActionErrorCode.NO_SUCH_ELEMENT, f"no element with ref {action.ref}", action)
            return self._tap(el, action) if kind is ActionKind.TAP else self._type(el, action)
        if kind is ActionKind.KEY:
            key = xdotool_key(action.key or "")
            if key is None:
                return self._error(ActionErrorCode.INVALID_ACTION, f"unknown key {action.key!r}", action)
            self._point_at_window()
            self._xdotool("key", "--clearmodifiers", key)
            return None
        if kind is ActionKind.SCROLL:
            button = {"up": "4", "down": "5", "left": "6", "right": "7"}.get(action.direction or "down", "5")
            self._point_at_window()
            self._xdotool("click", "--repeat", "3", button)
            return None
        if kind is ActionKind.WAIT:
            time.sleep(0.5)
            return None
        return self._error(ActionErrorCode.UNSUPPORTED, f"the desktop has no {kind.value} action", action)

    def _point_at_window(self) -> None:
        """Keys go to the window under the pointer (there is no window manager to give focus)."""
        assert self._screen is not None
        x, y = self._screen.window.center
        self._xdotool("mousemove", str(int(x)), str(int(y)))

    def _tap(self, el: UIElement, action: Action) -> ActionError | None:
        """A real click at the element's centre, as a person does; a double click on a list row that can be
        activated (GTK's own cell actions do not activate rows); the AT-SPI action, sent without waiting, when
        the element is not on the screen (a button inside a modal dialog ignores it, a click it does not)."""
        assert self._screen is not None
        if not el.enabled:
            return self._error(ActionErrorCode.ENV_REJECTED, "the element is disabled", action)
        node = self._screen.nodes[el.ref]
        if el.bounds.w > 0 and el.bounds.h > 0:
            self._close_popups_around(el)
            x, y = (str(int(v)) for v in el.bounds.center)
            double = el.role is Role.LISTITEM and "activate" in node.actions
            # the pause lets the app take the pointer's arrival first: the file chooser's Places ignore a
            # click that comes with the pointer
            self._xdotool("mousemove", x, y, "sleep", "0.15", "click",
                          *(("--repeat", "2", "--delay", "80") if double else ()), "1")
            return None
        index = action_index(node)
        if index is None:
            return self._error(ActionErrorCode.ENV_REJECTED, "the element has no action and is not on screen", action)
        reply = self._request({"op": "action", "key": node.key, "index": index})
        if not reply.get("ok"):
            return self._error(ActionErrorCode.ENV_REJECTED, str(reply.get("error", "the action failed")), action)
        return None

    def _close_popups_around(self, el: UIElement) -> None:
        """Close the open popups (a combo box's list) before a click on an element that is not theirs. A popup
        holds the pointer: a click elsewhere only closes it, and a person clicks again; a popup that covers part of
        the element (the file chooser's list of file types hangs over its Save button) takes the click itself. A
        tap is the click that reaches its element: Escape closes a popup as that first click would, without
        choosing in it. Escape is pressed again only while each press closes one (a submenu closes a level a
        press): a press that closed nothing would reach the window beneath, where Escape cancels a dialog."""
        assert self._screen is not None
        popups = open_popups(self._screen.raw)
        if not popups or any(popup_owns(b, el) for b in popups):
            return
        for _ in range(POPUP_CLOSE_TRIES):
            before = len(popups)
            self._xdotool("key", "--clearmodifiers", "Escape")
            deadline = time.monotonic() + POPUP_CLOSE_WAIT_S
            while True:
                time.sleep(0.1)
                popups = open_popups(self._nodes())
                if len(popups) < before or time.monotonic() >= deadline:
                    break
            if not popups:
                return
            if len(popups) >= before:
                break
        log.warning("a popup is still open after Escape: the click on %r may only close it", el.text or el.label)

    def _nodes(self) -> list[Node]:
        """Every node of the tree as it is now (no observation, no refs handed out, the step's timing untouched)."""
        reply = self._request({"op": "tree"})
        if not reply.get("ok"):
            raise EnvError(f"the AT-SPI tree could not be read: {reply.get('error')}")
        try:
            return [Node.from_wire(raw) for raw in reply["nodes"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise EnvError(f"the AT-SPI bridge sent a tree guimem cannot read: {exc}") from exc

    def _type(self, el: UIElement, action: Action) -> ActionError | None:
        assert self._screen is not None
        if not el.editable:
            return self._error(ActionErrorCode.NOT_EDITABLE, "the element is not editable", action)
        node = self._screen.nodes[el.ref]
        if node.editable_text:
            reply = self._request({"op": "set_text", "key": node.key, "text": action.text or ""})
            if reply.get("ok"):
                return None
        x, y = el.bounds.center
        self._close_popups_around(el)
        self._xdotool("mousemove", str(int(x)), str(int(y)), "click", "1")
        self._xdotool("key", "--clearmodifiers", "ctrl+a")
        # galculator drops keys typed 30 ms apart
        self._xdotool("type", "--delay", "100", "--", action.text or "")
        return None

    def _display(self) -> str | None:
        """The calculator's display: the first showing, non-editable text node."""
        assert self._screen is not None
        for node in self._screen.raw:
            if node.role == "text" and "editable" not in node.states and node.bounds is not None:
                return node.text or ""
        return None

    def _check(self) -> tuple[bool, str]:
        if self._spec is None or self._screen is None:
            return False, "no episode has started"
        display = self._display() if isinstance(self._spec.check, DisplayCheck) else None
        return self._spec.check.passed(self.home, self.task.params, display)

    def evaluate(self) -> Outcome:
        """The task's check on the app's real state (a file on disk, the display read through AT-SPI)."""
        if self._screen is not None and self._spec is not None and isinstance(self._spec.check, DisplayCheck):
            self._observe()  # the display as it is now, not as the last step saw it
        ok, why = self._check()
        return Outcome(success=ok, score=1.0 if ok else 0.0, reason=why)

    def close(self) -> None:
        """Stop the app, the bridge and the session (idempotent); a later reset starts them again."""
        if self._bridge is not None and self._bridge.poll() is None and self._bridge.stdin is not None:
            try:
                self._bridge.stdin.write(b'{"op": "quit"}\n')
                self._bridge.stdin.flush()
            except OSError:
                pass
        self._stop_bridge()
        self._stop_app()
        self.session.stop()
        self._screen = None

