"""Android over ADB: uiautomator XML → `UIElement`s, actions as ``input`` shell commands.

The device is reached through a small `DeviceTransport` (``shell`` and ``screencap``): `AdbTransport`
wraps ``adbutils`` for real devices and emulators; tests use a fake that replays XML dumps and
records the exact commands issued.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from guimem.envs.base import Transition
from guimem.errors import EnvError, EnvNotReadyError, MissingDependencyError
from guimem.settings import GuimemSettings
from guimem.types import (
    Action,
    ActionError,
    ActionErrorCode,
    ActionKind,
    Bounds,
    Observation,
    Outcome,
    Role,
    Task,
    UIElement,
)

DUMP_PATH = "/sdcard/window_dump.xml"
_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")
_FOCUS = re.compile(r"mCurrentFocus=Window\{\S+ \S+ ([^/\s}]+)/?([^\s}]*)")
CLASS_ROLES = {
    "Button": Role.BUTTON, "ImageButton": Role.BUTTON, "EditText": Role.TEXTBOX, "AutoCompleteTextView": Role.TEXTBOX,
    "CheckBox": Role.CHECKBOX, "Switch": Role.CHECKBOX, "ToggleButton": Role.CHECKBOX, "RadioButton": Role.RADIO,
    "Spinner": Role.COMBOBOX, "TextView": Role.TEXT, "ImageView": Role.IMAGE, "CheckedTextView": Role.OPTION,
}
KEYCODES = {
    "back": "KEYCODE_BACK", "home": "KEYCODE_HOME", "enter": "KEYCODE_ENTER", "tab": "KEYCODE_TAB",
    "backspace": "KEYCODE_DEL", "delete": "KEYCODE_FORWARD_DEL", "up": "KEYCODE_DPAD_UP", "down": "KEYCODE_DPAD_DOWN",
    "left": "KEYCODE_DPAD_LEFT", "right": "KEYCODE_DPAD_RIGHT", "menu": "KEYCODE_MENU", "search": "KEYCODE_SEARCH",
    "recent": "KEYCODE_APP_SWITCH", "escape": "KEYCODE_ESCAPE",
}
SuccessCheck = Callable[[Observation, Task], bool]


class DeviceTransport(Protocol):
    """What the env needs from a device."""

    @property
    def serial(self) -> str:
        """The device serial."""
        ...

    def shell(self, command: str) -> str:
        """Run a shell command on the device and return its output."""
        ...

    def screencap(self) -> bytes:
        """A PNG screenshot."""
        ...


class AdbTransport:
    """A real device or emulator through ``adbutils`` (the adb server must be running)."""

    def __init__(self, serial: str | None = None) -> None:
        try:
            import adbutils
        except ImportError as exc:
            raise MissingDependencyError("adbutils", "android") from exc
        try:
            self._device: Any = adbutils.adb.device(serial=serial)
            self._serial = str(self._device.serial)
        except Exception as exc:  # adbutils raises its own error types for "no device"
            raise EnvNotReadyError(f"no Android device: {exc}", suggestion="connect a device or start an emulator; "
                                   "`adb devices` must list it") from exc

    @property
    def serial(self) -> str:
        """The device serial."""
        return self._serial

    def shell(self, command: str) -> str:
        """``adb shell``."""
        return str(self._device.shell(command))

    def screencap(self) -> bytes:
        """``adb exec-out screencap -p``."""
        data: bytes = self._device.shell("screencap -p", encoding=None)
        return data


def _role(cls: str, clickable: bool) -> Role:
    short = cls.rsplit(".", 1)[-1]
    role = CLASS_ROLES.get(short)
    if role is None:
        return Role.BUTTON if clickable else Role.CONTAINER
    if role is Role.TEXT and clickable:
        return Role.BUTTON
    return role


def parse_hierarchy(xml_text: str, app: str = "", location: str = "") -> Observation:
    """uiautomator's window dump → an `Observation` (refs are node indices in document order).

    Raises:
        EnvError: The dump is not valid XML.
    """
    try:
        root = ET.fromstring(xml_text.strip())
    except ET.ParseError as exc:
        raise EnvError(f"uiautomator dump is not valid XML: {exc}") from exc
    elements = []
    for index, node in enumerate(root.iter("node")):
        a = node.attrib
        clickable = a.get("clickable") == "true" or a.get("long-clickable") == "true"
        cls = a.get("class", "")
        role = _role(cls, clickable)
        text, desc = a.get("text", ""), a.get("content-desc", "")
        if role is Role.CONTAINER and not (text or desc or a.get("resource-id")):
            continue
        m = _BOUNDS.match(a.get("bounds", ""))
        x1, y1, x2, y2 = (int(v) for v in m.groups()) if m else (0, 0, 0, 0)
        elements.append(UIElement(
            ref=str(index), role=role, text=text if role is not Role.TEXTBOX else "",
            label=desc or (a.get("hint", "") if role is Role.TEXTBOX else ""),
            resource_id=a.get("resource-id", "").split(":id/")[-1], value=text if role is Role.TEXTBOX else None,
            bounds=Bounds(x=x1, y=y1, w=x2 - x1, h=y2 - y1), clickable=clickable, editable=role is Role.TEXTBOX,
            checked=(a.get("checked") == "true") if a.get("checkable") == "true" else None,
            focused=a.get("focused") == "true", enabled=a.get("enabled", "true") == "true",
        ))
        app = app or a.get("package", "")
    return Observation(app=app, location=location, elements=tuple(elements), timestamp=time.time())


def input_text_arg(text: str) -> str:
    """Escape text for ``input text`` (spaces become ``%s``; shell metacharacters quoted)."""
    return shlex.quote(text.replace(" ", "%s"))


class AndroidEnv:
    """An Android device as an `Env`.

    Args:
        device: The transport (real `AdbTransport` or a fake).
        success_check: Decides success from the final observation; without one, outcomes say so.
        settle_tries: How many dumps to take until two in a row are identical.
        settle_wait_s: Pause between settle dumps.
        screenshots_dir: When set, a PNG per observation is saved there.
    """

    def __init__(self, device: DeviceTransport, success_check: SuccessCheck | None = None, settle_tries: int = 3,
                 settle_wait_s: float = 0.3, screenshots_dir: Path | None = None) -> None:
        self.device = device
        self.success_check = success_check
        self.settle_tries = settle_tries
        self.settle_wait_s = settle_wait_s
        self.screenshots_dir = screenshots_dir
        self._shot_prefix = uuid.uuid4().hex[:8]  # envs sharing a folder (workers) never overwrite each other
        self._task: Task | None = None
        self._obs: Observation | None = None
        self._count = 0

    @classmethod
    def from_settings(cls, settings: GuimemSettings, screenshots_dir: Path | None = None) -> AndroidEnv:
        """Connect to the first attached device."""
        return cls(AdbTransport(), screenshots_dir=screenshots_dir)

    @property
    def name(self) -> str:
        """``android:<serial>``."""
        return f"android:{self.device.serial}"

    @property
    def task(self) -> Task:
        """The current task."""
        if self._task is None:
            raise EnvError("no episode has started: call reset(task) first")
        return self._task

    def reset(self, task: Task) -> Observation:
        """Go home, (re)start the task's app, and observe."""
        self._task = task
        self.device.shell(f"input keyevent {KEYCODES['home']}")
        if task.app and "." in task.app:
            self.device.shell(f"am force-stop {task.app}")
            self.device.shell(f"monkey -p {task.app} -c android.intent.category.LAUNCHER 1")
        return self._observe()

    def _dump(self) -> str:
        out = self.device.shell(f"uiautomator dump {DUMP_PATH} >/dev/null && cat {DUMP_PATH}")
        start = out.find("<?xml")
        return out[start:] if start >= 0 else out

    def _location(self) -> tuple[str, str]:
        m = _FOCUS.search(self.device.shell("dumpsys window | grep mCurrentFocus"))
        return (m.group(1), m.group(2)) if m else ("", "")

    def _observe(self) -> Observation:
        xml_text, last = "", ""
        for attempt in range(self.settle_tries):
            xml_text = self._dump()
            digest = hashlib.sha1(xml_text.encode()).hexdigest()
            if digest == last:
                break
            last = digest
            if attempt + 1 < self.settle_tries:
                time.sleep(self.settle_wait_s)
        package, activity = self._location()
        obs = parse_hierarchy(xml_text, app=package, location=activity)
        if self.screenshots_dir is not None:
            self.screenshots_dir.mkdir(parents=True, exist_ok=True)
            path = self.screenshots_dir / f"obs-{self._shot_prefix}-{self._count:05d}.png"
            path.write_bytes(self.device.screencap())
            obs = obs.model_copy(update={"screenshot": str(path)})
        self._count += 1
        self._obs = obs
        return obs

    def _target(self, action: Action) -> UIElement | ActionError:
        el = self._obs.element(action.ref) if (self._obs and action.ref) else None
        if el is None:
            return ActionError(code=ActionErrorCode.NO_SUCH_ELEMENT, message=f"no element with ref {action.ref}",
                               action=action.describe())
        return el

    def _commands(self, action: Action) -> list[str] | ActionError:
        kind = action.kind
        if kind in (ActionKind.TAP, ActionKind.TYPE):
            el = self._target(action)
            if isinstance(el, ActionError):
                return el
            x, y = (int(v) for v in el.bounds.center)
            if kind is ActionKind.TAP:
                return [f"input tap {x} {y}"]
            if not el.editable:
                return ActionError(code=ActionErrorCode.NOT_EDITABLE, message="element is not editable",
                                   action=action.describe())
            clear = [f"input keyevent {KEYCODES['backspace']}"] * len(el.value or "")
            return [f"input tap {x} {y}", "input keyevent KEYCODE_MOVE_END", *clear,
                    f"input text {input_text_arg(action.text or '')}"]
        if kind is ActionKind.KEY:
            code = KEYCODES.get((action.key or "").lower())
            if code is None:
                return ActionError(code=ActionErrorCode.INVALID_ACTION, message=f"unknown key {action.key!r}",
                                   action=action.describe())
            return [f"input keyevent {code}"]
        if kind is ActionKind.SCROLL:
            y1, y2 = (1500, 500) if (action.direction or "down") == "down" else (500, 1500)
            return [f"input swipe 540 {y1} 540 {y2} 300"]
        if kind is ActionKind.OPEN_APP:
            return [f"monkey -p {action.app} -c android.intent.category.LAUNCHER 1"]
        if kind is ActionKind.WAIT:
            return []
        return ActionError(code=ActionErrorCode.UNSUPPORTED, message=f"android has no {kind.value} action",
                           action=action.describe())

    def step(self, action: Action) -> Transition:
        """Run the action's shell commands, let the UI settle, observe."""
        commands = self._commands(action)
        if isinstance(commands, ActionError):
            return Transition(self._obs or self._observe(), commands)
        for command in commands:
            self.device.shell(command)
        return Transition(self._observe(), None)

    def evaluate(self) -> Outcome:
        """Success per the task's check on the current screen (Android has no built-in reward)."""
        if self.success_check is None or self._obs is None:
            return Outcome(success=False, score=0.0, reason="no success check configured for this task")
        ok = self.success_check(self._obs, self.task)
        return Outcome(success=ok, score=1.0 if ok else 0.0, reason="success check" + ("" if ok else " failed"))

    def close(self) -> None:
        """Nothing to release (the adb server stays)."""
