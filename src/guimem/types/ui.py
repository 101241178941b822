"""What an agent sees: elements, observations, and portable selectors that survive renumbering."""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Hashable
from contextlib import suppress
from enum import StrEnum
from operator import attrgetter
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SPACE = re.compile(r"\s+")


class Role(StrEnum):
    """What an element is for, across web, Android and desktop."""

    BUTTON = "button"
    LINK = "link"
    TEXTBOX = "textbox"
    CHECKBOX = "checkbox"
    RADIO = "radio"
    TAB = "tab"
    OPTION = "option"
    COMBOBOX = "combobox"
    MENUITEM = "menuitem"
    LISTITEM = "listitem"
    IMAGE = "image"
    HEADING = "heading"
    TEXT = "text"
    CONTAINER = "container"
    OTHER = "other"


class Bounds(BaseModel):
    """An element's box in screen pixels."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0

    @property
    def center(self) -> tuple[float, float]:
        """The centre point ``(x, y)``."""
        return (self.x + self.w / 2, self.y + self.h / 2)


class UIElement(BaseModel):
    """One element of an observation.

    ``ref`` is valid only inside the observation it came from: refs are renumbered every episode,
    so memory never stores refs, only `Selector`s.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    ref: str
    role: Role = Role.OTHER
    text: str = ""
    label: str = ""
    resource_id: str = ""
    value: str | None = None
    bounds: Bounds = Field(default_factory=Bounds)
    clickable: bool = False
    editable: bool = False
    checked: bool | None = None
    focused: bool = False
    enabled: bool = True
    container: str = ""

    @property
    def name(self) -> str:
        """The human-facing name: label if any, else text, else resource id."""
        return self.label or self.text or self.resource_id


class Observation(BaseModel):
    """One screen as the agent sees it."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    app: str = Field(max_length=200)
    """The app's name or package (a task's, a browser page's site): short by nature, and memory embeds it."""
    location: str = ""
    elements: tuple[UIElement, ...] = ()
    screenshot: str | None = None
    timestamp: float = 0.0

    def element(self, ref: str) -> UIElement | None:
        """The element with ``ref``, or None."""
        for el in self.elements:
            if el.ref == ref:
                return el
        return None


def same_screen(a: Observation, b: Observation) -> bool:
    """Do two observations show the same screen: the same app, location and elements (when they were taken and
    their screenshot files aside)? What memory reads of a screen is then the same.

    A recall taken ahead compares the settled screen with the preview on the agent's time, where elements compared
    as models take about 2 µs each: two screens an env noted the same source text of (`note_source`) are the same
    at once, and the rest are compared as plain values (`screen_key`, kept for the last few screens)."""
    if a is b:
        return True
    if a.app != b.app or a.location != b.location:
        return False
    source_a, source_b = noted_source(a), noted_source(b)
    return (source_a is not None and source_a == source_b) or screen_key(a) == screen_key(b)


def normalise_text(text: str) -> str:
    """Case-fold and collapse white space, for comparing visible text."""
    return _SPACE.sub(" ", text).strip().casefold()


def placeholders(template: str) -> list[str]:
    """The ``{param}`` names in ``template``, in order of appearance."""
    return _PLACEHOLDER.findall(template)


def fill(template: str, params: dict[str, str]) -> str:
    """Replace ``{param}`` placeholders; unknown ones are left as they are."""
    if "{" not in template:
        return template
    return _PLACEHOLDER.sub(lambda m: params.get(m.group(1), m.group(0)), template)


_NAMES = ("text", "label", "resource_id")
_NORMALISED: OrderedDict[int, tuple[Observation, tuple[tuple[str, str, str], ...]]] = OrderedDict()
_NORMALISED_KEPT = 8


def _normalised(observation: Observation) -> tuple[tuple[str, str, str], ...]:
    """Each element's (text, label, resource id), normalised (`normalise_text`). A recall matches many selectors
    against one screen, so the last few screens' are kept (by identity: each entry holds its observation, so
    its id is not reused while it is kept; observations are frozen)."""
    return kept_for_screen(_NORMALISED, id(observation), observation, _NORMALISED_KEPT, lambda: tuple(
        (normalise_text(el.text), normalise_text(el.label), normalise_text(el.resource_id))
        for el in observation.elements))


_PLAIN = tuple(name for name in UIElement.model_fields if name != "bounds")
_plain = attrgetter(*_PLAIN)
_SCREEN_KEYS: OrderedDict[int, tuple[Observation, tuple[Any, ...]]] = OrderedDict()
_SCREEN_KEYS_KEPT = 8


def screen_key(observation: Observation) -> tuple[Any, ...]:
    """What `same_screen` compares of the elements (each one's fields with its bounds'), as plain values; kept for
    the last few screens, so that working it out ahead (for a preview) saves it later."""
    return kept_for_screen(_SCREEN_KEYS, id(observation), observation, _SCREEN_KEYS_KEPT, lambda: tuple(
        (_plain(el), tuple(el.bounds.__dict__.values())) for el in observation.elements))


_SOURCES: OrderedDict[int, tuple[Observation, str]] = OrderedDict()
_SOURCES_KEPT = 8


def note_source(observation: Observation, text: str) -> None:
    """Keep ``text``, the exact text an env parsed ``observation`` from (its snapshot, parsed by a function of
    the text alone): `same_screen` then tells two such screens apart by their texts (and app and location), a
    few µs, where comparing their elements takes 1–5 µs an element. Texts that differ say nothing (the elements
    are compared). Only the object given has its source: a copy (``model_copy``) is compared in full."""
    _keep(_SOURCES, id(observation), (observation, text), _SOURCES_KEPT)  # noted again: the last forgotten


def noted_source(observation: Observation) -> str | None:
    """The text `note_source` kept for this very object, if it is still kept (the last few screens noted)."""
    found = _SOURCES.get(id(observation))
    return found[1] if found is not None and found[0] is observation else None


def kept_for_screen(table: OrderedDict[K, tuple[Observation, V]], key: K, observation: Observation, kept: int,
                    compute: Callable[[], V]) -> V:
    """What ``compute`` gives for ``observation``, kept in ``table`` under ``key`` (which holds the screen's
    identity, ``id(observation)``) among the last ``kept`` answers: each entry holds its observation, so the id
    is not reused while it is kept (observations are frozen). Safe to share between threads."""
    found = table.get(key)
    if found is not None and found[0] is observation:
        return found[1]
    value = compute()
    _keep(table, key, (observation, value), kept)
    return value


def _keep(table: OrderedDict[K, tuple[Observation, V]], key: K, entry: tuple[Observation, V], kept: int) -> None:
    """Put ``entry`` in ``table`` as its newest, and forget the oldest beyond ``kept`` (safe between threads)."""
    table[key] = entry
    with suppress(KeyError):  # another thread trimmed it meanwhile
        table.move_to_end(key)
    while len(table) > kept:
        try:
            table.popitem(last=False)
        except KeyError:  # another thread emptied it first
            break


def _reported(el: UIElement) -> bool:
    return el.bounds.w > 0 or el.bounds.h > 0


def _distance(a: UIElement, b: UIElement) -> tuple[float, float]:
    """How far ``b`` is from ``a``: rows first (vertical distance of centres), then columns."""
    (ax, ay), (bx, by) = a.bounds.center, b.bounds.center
    return abs(ay - by), abs(ax - bx)


def _anchor_text(element: UIElement, observation: Observation) -> str:
    """The text of the element nearest ``element`` whose text no other element on the screen has."""
    if not _reported(element):
        return ""
    counts: dict[str, int] = {}
    for el in observation.elements:
        key = normalise_text(el.text)
        counts[key] = counts.get(key, 0) + 1
    unique = [el for el in observation.elements if el.ref != element.ref and _reported(el) and el.text.strip()
              and counts[normalise_text(el.text)] == 1]
    return min(unique, key=lambda el: _distance(element, el)).text if unique else ""


def _nearest(found: list[UIElement], observation: Observation, near: str) -> Resolution:
    """The match nearest the anchor: the one element whose text is ``near``, else the one whose text contains
    it. No such anchor, or several, or two matches as near: no match (ambiguous), unless only one matched."""
    shown = [el for el in observation.elements if near and _reported(el)]
    anchors = [el for el in shown if normalise_text(el.text) == near] or \
        [el for el in shown if near in normalise_text(el.text)]
    ranked = sorted((_distance(anchors[0], el), i) for i, el in enumerate(found) if _reported(el)) \
        if len(anchors) == 1 else []
    if not ranked or (len(ranked) > 1 and ranked[0][0] == ranked[1][0]):
        if len(found) == 1:  # the anchor cannot decide, but there is nothing to decide
            return Resolution(status=MatchStatus.OK, element=found[0], candidates=1)
        return Resolution(status=MatchStatus.NO_MATCH if not anchors else MatchStatus.AMBIGUOUS,
                          candidates=len(found))
    return Resolution(status=MatchStatus.OK, element=found[ranked[0][1]], candidates=len(found))


class MatchStatus(StrEnum):
    """How a selector resolved."""

    OK = "ok"
    NO_MATCH = "no_match"
    AMBIGUOUS = "ambiguous"
    UNBOUND = "unbound"


class Resolution(BaseModel):
    """The result of resolving a `Selector` against an observation."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    status: MatchStatus
    element: UIElement | None = None
    candidates: int = 0
    missing_params: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when exactly one element was found."""
        return self.status is MatchStatus.OK


class Selector(BaseModel):
    """A portable description of an element, resolved anew against each observation.

    Each field may hold ``{param}`` placeholders that are bound from task parameters. Fields left
    empty do not constrain the match, except that a selector naming nothing (no text, label or resource
    id) matches only elements that have none either: it was learned on an unnamed element. ``contains``
    makes ``text`` match as a substring (a row whose text includes a sender's name). ``nth`` picks
    among several matches in document order; ``near`` picks the match nearest an anchor, the one
    element whose text contains ``near`` (the star icon in the row of the e-mail from ``{by}``), so the
    choice follows a value rather than a position.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    role: Role | None = None
    text: str = ""
    label: str = ""
    resource_id: str = ""
    contains: bool = False
    nth: int | None = None
    near: str = Field(default="", max_length=200)

    @classmethod
    def for_element(cls, element: UIElement, observation: Observation | None = None) -> Selector:
        """The most specific selector that names ``element`` (unique in ``observation`` if given): when
        several elements match, both its position (``nth``) and the text of the nearest element whose
        text is unique on the screen (``near``; memory keeps it only when it is a task value)."""
        sel = cls(role=element.role, text=element.text, label=element.label, resource_id=element.resource_id)
        if observation is None:
            return sel
        matches = sel.matches(observation, {})
        if len(matches) > 1:
            sel = sel.model_copy(update={"nth": [m.ref for m in matches].index(element.ref),
                                         "near": _anchor_text(element, observation)[:200]})
        return sel

    def params(self) -> list[str]:
        """Placeholder names used by this selector."""
        return [p for f in (self.text, self.label, self.resource_id, self.near) for p in placeholders(f)]

    def bind(self, params: dict[str, str]) -> Selector:
        """A copy with placeholders filled from ``params`` (itself when it has none to fill)."""
        update = {"text": fill(self.text, params), "label": fill(self.label, params),
                  "resource_id": fill(self.resource_id, params), "near": fill(self.near, params)}
        if all(getattr(self, name) == value for name, value in update.items()):
            return self
        return self.model_copy(update=update)

    def matches(self, observation: Observation, params: dict[str, str]) -> list[UIElement]:
        """Every element the bound selector matches, in document order."""
        bound = self.bind(params)
        want = [(i, normalise_text(getattr(bound, attr))) for i, attr in enumerate(_NAMES)]
        want = [(i, v) for i, v in want if v]
        out = []
        for el, names in zip(observation.elements, _normalised(observation), strict=True):
            if bound.role is not None and el.role is not bound.role:
                continue
            if not want and any(names):  # a selector that names nothing was learned on an unnamed element
                continue
            if all(self._field_matches(_NAMES[i], names[i], value) for i, value in want):
                out.append(el)
        return out

    def _field_matches(self, attr: str, have: str, want: str) -> bool:
        if self.contains and attr == "text":
            return want in have
        return have == want

    def resolve(self, observation: Observation, params: dict[str, str] | None = None) -> Resolution:
        """Find the one element this selector names in ``observation``."""
        params = params or {}
        missing = tuple(p for p in self.params() if p not in params)
        if missing:
            return Resolution(status=MatchStatus.UNBOUND, missing_params=missing)
        found = self.matches(observation, params)
        if self.near and found:
            return _nearest(found, observation, normalise_text(fill(self.near, params)))
        if self.nth is not None and 0 <= self.nth < len(found):
            return Resolution(status=MatchStatus.OK, element=found[self.nth], candidates=len(found))
        if len(found) == 1:
            return Resolution(status=MatchStatus.OK, element=found[0], candidates=1)
        status = MatchStatus.NO_MATCH if not found else MatchStatus.AMBIGUOUS
        return Resolution(status=status, candidates=len(found))

    def describe(self) -> str:
        """A short human-readable form, e.g. ``button "Login"``."""
        role = self.role.value if self.role else "element"
        name = self.label or self.text or (f"#{self.resource_id}" if self.resource_id else "")
        nth = f"[{self.nth}]" if self.nth is not None else ""
        if self.contains and name:
            name = f"*{name}*"
        if self.near:
            nth = f' near "{self.near}"'
        return f'{role} "{name}"{nth}' if name else f"{role}{nth}"
