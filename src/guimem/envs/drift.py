"""UI versions of the same task: an `Env` wrapper that changes what the agent sees, not what it must do.

Apps change under a deployed agent: controls are renamed, buttons swap places, ids change on every
release, the layout moves, a banner must be dismissed first. `DriftEnv` wraps any env and shows version
``v0`` (the page as it is) or a later version: a deterministic rewrite of every observation, seeded by
the task, its seed and the version, of the kinds in `DRIFT_KINDS` (``v1``: all but the interstitial;
``v2`` and later: all of them):

- ``relabel``: a button's or link's word becomes a synonym ("Submit" → "Send"), unless the goal says it;
- ``reorder``: same-container buttons with different names swap places (list order and position);
- ``rename``: element ids and container ids get a release suffix (so the screen's identity changes);
- ``move``: the layout shifts down and right;
- ``interstitial``: a notice covers the page at reset; every action but its dismissal is refused.

It works on the observation: refs are kept, so an action reaches the wrapped env's element as before,
and the task's goal and success check never change. A version is a name (``v0``, ``v1``, ``v2``, ...):
each later one draws its own suffixes and synonyms.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from guimem.envs.base import Env, ForeseeingStart, Preview, Previewing, Transition
from guimem.errors import ConfigError, EnvError
from guimem.types import (
    Action,
    ActionError,
    ActionErrorCode,
    ActionKind,
    Bounds,
    Observation,
    Outcome,
    Preflight,
    Role,
    Task,
    UIElement,
    page_view,
)
from guimem.types.actions import UI_KINDS

DRIFT_KINDS = ("relabel", "reorder", "rename", "move", "interstitial")
"""What a later version changes (`kinds_of`)."""

BASE_VERSION = "v0"
VERSION_PATTERN = re.compile(r"^v(\d{1,3})$")

NOTICE_BASE = 91_000
"""Refs of the interstitial's elements (no wrapped env uses them; `EnvError` if one does)."""
NOTICE_CONTAINER = "notice"

SYNONYMS: dict[str, tuple[str, ...]] = {
    "submit": ("Send", "Done", "Go"),
    "ok": ("Okay", "Got it"),
    "cancel": ("Dismiss", "Never mind"),
    "search": ("Find", "Look up"),
    "login": ("Sign in", "Log on"),
    "log in": ("Sign in", "Log on"),
    "sign in": ("Log in", "Continue"),
    "next": ("Continue", "Forward"),
    "previous": ("Back", "Earlier"),
    "prev": ("Back", "Earlier"),
    "yes": ("Confirm", "Sure"),
    "no": ("Decline", "Not now"),
    "close": ("Dismiss", "Hide"),
    "save": ("Keep", "Store"),
    "send": ("Submit", "Post"),
    "reply": ("Respond", "Answer"),
    "forward": ("Pass on", "Share"),
    "delete": ("Remove", "Discard"),
    "trash": ("Remove", "Bin"),
    "star": ("Favourite", "Mark"),
    "retweet": ("Share", "Repost"),
    "like": ("Favourite", "Heart"),
    "book": ("Reserve", "Purchase"),
    "search flights": ("Find flights", "Look up flights"),
}
"""A control's word → what a redesign may call it (case-folded keys; one is drawn per version)."""

NOTICES = (("This site has a new look.", "Got it"), ("We updated our layout.", "Continue"),
           ("This page uses cookies.", "Accept"))
"""(text, dismiss button) of the interstitial, one drawn per version."""


@runtime_checkable
class Versioned(Protocol):
    """An env whose UI version can be chosen per episode (`DriftEnv`)."""

    def set_version(self, version: str) -> None:
        """Show ``version`` from the next reset on."""
        ...


def check_version(version: str) -> str:
    """``version`` when it names one (``v0`` … ``v999``).

    Raises:
        ConfigError: Another name, with the form it takes.
    """
    if not VERSION_PATTERN.match(version):
        raise ConfigError(f"UI version {version!r} is not v0, v1, v2, ...",
                          suggestion="give v0 (the page as it is), v1, v2 and so on")
    return version


def version_number(version: str) -> int:
    """``n`` of ``vn``."""
    return int(check_version(version)[1:])


def kinds_of(version: str) -> frozenset[str]:
    """What ``version`` changes by default: nothing at ``v0``; the page's words, order, ids and layout at
    ``v1``; and from ``v2`` on also a notice to dismiss first (guimem's explorer never dismisses one on its
    own, so without memory every episode fails there)."""
    n = version_number(version)
    return frozenset() if n == 0 else frozenset(DRIFT_KINDS) - {"interstitial"} if n == 1 else frozenset(DRIFT_KINDS)


def version_for_round(round_index: int, drift_at: int, to: str = "v1") -> str:
    """The version round ``round_index`` (0-based) shows when drift starts at round ``drift_at``
    (counted from 1; 0: never): ``v0`` before it, ``to`` from it on."""
    return check_version(to) if drift_at > 0 and round_index + 1 >= drift_at else BASE_VERSION


def _draw(*parts: object) -> int:
    """A number fixed by ``parts`` (the same in every process and run)."""
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8], "big")


def _mentioned(word: str, goal: str) -> bool:
    return re.search(rf"(?<![a-z]){re.escape(word)}(?![a-z])", goal.lower()) is not None


@dataclass(frozen=True)
class Rewrite:
    """How one version rewrites one task's pages (drawn once per reset).

    Attributes:
        version: The version's name.
        kinds: Which changes it makes (`DRIFT_KINDS`).
        suffix: What ids and containers are renamed with (``rename``).
        pick: Which synonym and notice are drawn.
        shift: (dx, dy) of the layout (``move``).
        goal: The task's goal (a word it says is never relabelled).
    """

    version: str
    kinds: frozenset[str]
    suffix: str
    pick: int
    shift: tuple[float, float]
    goal: str

    @classmethod
    def of(cls, version: str, kinds: frozenset[str], task: Task) -> Rewrite:
        """The rewrite of ``task`` (its id and seed) at ``version``."""
        n = version_number(version)
        draw = _draw(task.id, task.seed, version)
        letters = "".join(chr(ord("a") + (draw >> (5 * i)) % 26) for i in range(3))
        return cls(version=version, kinds=kinds, suffix=f"{letters}{'x' * n}", pick=draw,
                   shift=(float(8 * n), float(20 + 10 * (draw % 3))), goal=task.goal)

    def label(self, text: str) -> str:
        """``text`` relabelled: its synonym, unless the goal names it (then the task still says what to press)."""
        key = " ".join(text.lower().split())
        options = SYNONYMS.get(key)
        if not options or _mentioned(key, self.goal):
            return text
        new = options[self.pick % len(options)]
        return new.upper() if text.isupper() and len(text) > 1 else new

    def rename(self, name: str) -> str:
        """An id or container after the release."""
        return f"{name}-{self.suffix}" if name else name

    def notice(self) -> tuple[str, str]:
        """(text, dismiss button) of this version's interstitial."""
        return NOTICES[self.pick % len(NOTICES)]


def _relabel(el: UIElement, rw: Rewrite) -> UIElement:
    if not el.clickable:
        return el
    return el.model_copy(update={"text": rw.label(el.text), "label": rw.label(el.label)})


def _reorder(elements: list[UIElement]) -> list[UIElement]:
    """Same-container buttons with different names swap places (each group rotated by one)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, el in enumerate(elements):
        if el.role is Role.BUTTON and el.clickable and el.name:
            groups[el.container].append(i)
    out = list(elements)
    for idx in groups.values():
        if len(idx) < 2 or len({elements[i].name for i in idx}) < len(idx):
            continue
        rotated = idx[1:] + idx[:1]
        for at, src in zip(idx, rotated, strict=True):  # the element from src now sits where at was
            out[at] = elements[src].model_copy(update={"bounds": elements[at].bounds})
    return out


def rewrite(obs: Observation, rw: Rewrite) -> Observation:
    """``obs`` as version ``rw.version`` shows it (the interstitial is added by `DriftEnv`)."""
    if rw.version == BASE_VERSION or not rw.kinds:
        return obs
    elements = list(obs.elements)
    if "relabel" in rw.kinds:
        elements = [_relabel(el, rw) for el in elements]
    if "reorder" in rw.kinds:
        elements = _reorder(elements)
    if "rename" in rw.kinds:
        elements = [el.model_copy(update={"resource_id": rw.rename(el.resource_id),
                                          "container": rw.rename(el.container)}) for el in elements]
    if "move" in rw.kinds:
        dx, dy = rw.shift
        elements = [el if el.bounds == Bounds() else el.model_copy(update={"bounds": el.bounds.model_copy(
            update={"x": el.bounds.x + dx, "y": el.bounds.y + dy})}) for el in elements]
    location = page_view(elements) if "rename" in rw.kinds and obs.location == page_view(obs.elements) \
        else obs.location
    return obs.model_copy(update={"elements": tuple(elements), "location": location})


def _uses_notice_refs(obs: Observation) -> bool:
    return any(el.ref.isdigit() and NOTICE_BASE <= int(el.ref) < NOTICE_BASE + 10 for el in obs.elements)


def _opens_notice(rw: Rewrite | None) -> bool:
    """Does a reset at this rewrite's version open its notice over the page?"""
    return rw is not None and "interstitial" in rw.kinds


def _show(obs: Observation, rw: Rewrite | None, notice_open: bool) -> Observation:
    """``obs`` as a version shows it: rewritten by ``rw`` (None: unchanged), under its notice while open."""
    if rw is None:
        return obs
    out = rewrite(obs, rw)
    if not notice_open:
        return out
    text, button = rw.notice()
    notice = (UIElement(ref=str(NOTICE_BASE), role=Role.TEXT, text=text, container=NOTICE_CONTAINER,
                        bounds=Bounds(x=10, y=10, w=300, h=18)),
              UIElement(ref=str(NOTICE_BASE + 1), role=Role.BUTTON, text=button, clickable=True,
                        container=NOTICE_CONTAINER, bounds=Bounds(x=10, y=34, w=80, h=22)))
    elements = (*notice, *out.elements)
    return out.model_copy(update={"elements": elements, "location": page_view(elements)})


@dataclass
class DriftEnv:
    """Any env shown at a chosen UI version (`set_version`; ``v0``: unchanged).

    Args:
        inner: The wrapped env.
        version: The version shown from the next reset on.
        kinds: The changes a later version makes (`DRIFT_KINDS`; None: the version's own, `kinds_of`).
    """

    inner: Env
    version: str = BASE_VERSION
    kinds: frozenset[str] | None = None
    notice_open: bool = False
    _rewrite: Rewrite | None = field(default=None, repr=False)
    _last: Observation | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_version(self.version)
        unknown = set(self.kinds or ()) - set(DRIFT_KINDS)
        if unknown:
            raise ConfigError(f"unknown drift kinds {sorted(unknown)}",
                              suggestion=f"use some of {', '.join(DRIFT_KINDS)}")

    @property
    def name(self) -> str:
        """The wrapped env's name (a version is a state of the same app, not another env)."""
        return self.inner.name

    @property
    def task(self) -> Task:
        """The wrapped env's task (the goal never changes)."""
        return self.inner.task

    def set_version(self, version: str) -> None:
        """Show ``version`` from the next reset on."""
        self.version = check_version(version)

    def preflight(self) -> str:
        """The wrapped env's preflight, if it has one."""
        return self.inner.preflight() if isinstance(self.inner, Preflight) else f"{self.inner.name} (no preflight)"

    def reset(self, task: Task) -> Observation:
        """Reset the wrapped env and draw this version's rewrite of the task's pages.

        Raises:
            EnvError: The wrapped env uses the interstitial's refs.
        """
        obs = self.inner.reset(task)
        if _uses_notice_refs(obs):
            raise EnvError(f"{self.inner.name} uses refs from {NOTICE_BASE} up, which the drift notice needs")
        self._rewrite = self._rewrite_of(self.inner.task)
        self.notice_open = _opens_notice(self._rewrite)
        self._last = obs
        return self._shown(obs)

    def expected_start(self, task: Task) -> tuple[Task, Observation] | None:
        """The wrapped env's guess when it makes one (`ForeseeingStart`), as this version will show it: the
        rewrite is drawn from the task's id and seed and the version, so the guess is rewritten as the reset
        will be (notice included); None otherwise."""
        guess = self.inner.expected_start(task) if isinstance(self.inner, ForeseeingStart) else None
        if guess is None or _uses_notice_refs(guess[1]):
            return None
        started, obs = guess
        rw = self._rewrite_of(started)
        return started, _show(obs, rw, _opens_notice(rw))

    def _rewrite_of(self, task: Task) -> Rewrite | None:
        kinds = kinds_of(self.version) if self.kinds is None else self.kinds
        return Rewrite.of(self.version, kinds, task) if self.version != BASE_VERSION else None

    def _shown(self, obs: Observation) -> Observation:
        return _show(obs, self._rewrite, self.notice_open)

    def step(self, action: Action) -> Transition:
        """While the notice is open only its dismissal acts (any other action is refused, as a covered
        page would); afterwards every action goes to the wrapped env by its ref."""
        if self.notice_open and self._last is not None and action.kind in UI_KINDS:
            if action.kind is ActionKind.TAP and action.ref == str(NOTICE_BASE + 1):
                self.notice_open = False
                return Transition(self._shown(self._last))
            if action.kind is ActionKind.TAP and action.ref == str(NOTICE_BASE):
                return Transition(self._shown(self._last))  # tapping the notice's text does nothing
            error = ActionError(code=ActionErrorCode.ENV_REJECTED, action=action.describe(),
                                message="a notice covers the page: dismiss it first")
            return Transition(self._shown(self._last), error)
        result = self.inner.step(action)
        self._last = result.observation
        return Transition(self._shown(result.observation), result.error, result.done)

    def preview_to(self, callback: Preview | None) -> None:
        """Forward to the wrapped env when it previews (`Previewing`), each preview as this version shows it."""
        if isinstance(self.inner, Previewing):
            self.inner.preview_to(None if callback is None else lambda obs: callback(self._shown(obs)))

    def evaluate(self) -> Outcome:
        """The wrapped env's outcome (the success check never changes)."""
        return self.inner.evaluate()

    def close(self) -> None:
        """Close the wrapped env."""
        self.inner.close()
