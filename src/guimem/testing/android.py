"""A fake Android device: replays uiautomator dumps and records every shell command issued."""

from __future__ import annotations

import re
from collections.abc import Mapping

_PNG_1PX = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


class FakeAdbDevice:
    """Answers the shell commands `AndroidEnv` sends, from recorded screens.

    Args:
        screens: Screen name → uiautomator XML dump.
        start: The screen shown first.
        transitions: ``(screen, command regex) → next screen``; the first match wins.
        activities: Screen name → ``package/activity`` reported by ``dumpsys window``.
    """

    def __init__(self, screens: Mapping[str, str], start: str,
                 transitions: Mapping[tuple[str, str], str] | None = None,
                 activities: Mapping[str, str] | None = None, serial: str = "fake-0") -> None:
        self.screens = dict(screens)
        self.current = start
        self.start = start
        self.transitions = dict(transitions or {})
        self.activities = dict(activities or {})
        self.commands: list[str] = []
        self._serial = serial

    @property
    def serial(self) -> str:
        """The fake serial."""
        return self._serial

    def shell(self, command: str) -> str:
        """Record ``command`` and answer it."""
        self.commands.append(command)
        if command.startswith("uiautomator dump"):
            return "UI hierchary dumped to: /sdcard/window_dump.xml\n" + self.screens[self.current]
        if command.startswith("dumpsys window"):
            act = self.activities.get(self.current, "com.example/.Main")
            return f"  mCurrentFocus=Window{{1a2b3c u0 {act}}}\n"
        if command.startswith("monkey -p"):
            self.current = self.start
        for (screen, pattern), nxt in self.transitions.items():
            if screen == self.current and re.search(pattern, command):
                self.current = nxt
                break
        return ""

    def screencap(self) -> bytes:
        """A 1×1 PNG."""
        return _PNG_1PX

    def actions(self) -> list[str]:
        """The commands that act on the UI (not dumps or focus queries)."""
        return [c for c in self.commands if c.startswith(("input ", "monkey ", "am "))]
