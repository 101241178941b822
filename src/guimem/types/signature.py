"""Screen signatures: the text a UI state is embedded from, stable across episodes of one screen.

Volatile values are masked so that two visits of the same screen in different episodes (other
seed, other random names, other typed text) read almost the same: numbers become ``#``, task
parameter values become ``{v}``, typed values are dropped, and free paragraph text is left out
(its words are content, not structure).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from functools import lru_cache

from guimem.types.ui import Observation, Role, UIElement

_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_SPACE = re.compile(r"\s+")
_MAX_TOKENS = 64
_MAX_TEXT = 40
_STRUCTURAL_ROLES = {Role.BUTTON, Role.LINK, Role.TAB, Role.MENUITEM, Role.OPTION, Role.HEADING, Role.COMBOBOX}


def mask_text(text: str, masks: Iterable[str] = (), limit: int | None = _MAX_TEXT) -> str:
    """Mask volatile parts of ``text``: given values become ``{v}``, numbers ``#``.

    ``limit`` caps the result for screen signatures (a token per element); item texts that people
    read pass ``limit=None`` and are never cut."""
    patterns = _mask_patterns(tuple(masks))
    if len(text) <= _KEPT_TEXT:  # a control's name: the same ones come back on every screen of an app
        return _masked(text, patterns, limit)
    return _mask(text, patterns, limit)


_KEPT_TEXT = 200


@lru_cache(maxsize=256)
def _mask_patterns(masks: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """One whole-word pattern per value, longest first (as `mask_text` applies them)."""
    # whole words only: a password "US" must not turn "username" into "{v}ername"
    return tuple(re.compile(rf"(?<!\w){re.escape(value.strip())}(?!\w)", re.IGNORECASE)
                 for value in sorted((m for m in masks if len(m.strip()) >= 2), key=len, reverse=True))


@lru_cache(maxsize=16384)
def _masked(text: str, patterns: tuple[re.Pattern[str], ...], limit: int | None) -> str:
    return _mask(text, patterns, limit)


def _mask(text: str, patterns: tuple[re.Pattern[str], ...], limit: int | None) -> str:
    out = text
    for pattern in patterns:
        out = pattern.sub("{v}", out)
    out = _NUMBER.sub("#", out)
    out = _SPACE.sub(" ", out).strip()
    return out if limit is None else out[:limit]


def _element_token(el: UIElement, masks: list[str], state: bool = True) -> str | None:
    rid = f"#{mask_text(el.resource_id, masks)}" if el.resource_id else ""
    if el.editable:
        filled = " =filled" if el.value and state else ""
        return f"{el.role.value}{rid} [{mask_text(el.label, masks)}]{filled}"
    if el.role in (Role.CHECKBOX, Role.RADIO):
        return f"{el.role.value}{rid} [{mask_text(el.label or el.text, masks)}]"
    if el.role in _STRUCTURAL_ROLES or (el.clickable and el.role is not Role.TEXT):
        return f"{el.role.value}{rid} {mask_text(el.text or el.label, masks)}".rstrip()
    if rid and el.role is not Role.TEXT:
        return f"{el.role.value}{rid}"
    return None


def screen_signature(observation: Observation, masks: Iterable[str] = (), state: bool = True) -> str:
    """The masked text that identifies ``observation``'s screen.

    Args:
        observation: The screen.
        masks: Volatile strings to hide (task parameter values, quoted goal substrings).
        state: Include whether fields are filled (False gives the coarser "same screen" signature
            used to segment trajectories).

    Returns:
        One line for the app and location, then one line per structural element.
    """
    mask_list = [m for m in masks if m]
    lines = [f"app: {observation.app}", f"screen: {mask_text(observation.location, mask_list)}"]
    seen_last = None
    count = 0
    for el in observation.elements:
        token = _element_token(el, mask_list, state)
        if token is None or token == seen_last:
            continue
        lines.append(token)
        seen_last = token
        count += 1
        if count >= _MAX_TOKENS:
            break
    return "\n".join(lines)


_VIEW_PARTS = 6


def page_view(elements: Iterable[UIElement]) -> str:
    """A page's location from its structure alone: the distinct containers (ids of the nearest ancestors
    with one) of its elements, numbers masked, sorted, at most six, e.g. ``#main #main-header``.

    For an env whose pages have no address of their own (MiniWoB++'s every task is its own file), this
    is the screen's identity: a page is the same page whichever task opened it, and a view that shows
    other containers (an opened e-mail, a dialog) is another screen."""
    parts = sorted({_NUMBER.sub("#", el.container.strip())[:_MAX_TEXT] for el in elements if el.container.strip()})
    return " ".join(f"#{p}" for p in parts[:_VIEW_PARTS])


def structure_hash(observation: Observation) -> str:
    """A structural hash (AutoDroid-style): app, location and the roles and ids of interactive elements."""
    parts = [observation.app, _NUMBER.sub("#", observation.location)]
    parts += sorted(
        f"{el.role.value}#{_NUMBER.sub('#', el.resource_id)}"
        for el in observation.elements
        if el.clickable or el.editable
    )
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:16]
