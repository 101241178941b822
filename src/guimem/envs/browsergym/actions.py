"""guimem `Action`s as BrowserGym action strings, and BrowserGym action strings back as `Action`s.

`to_browsergym` writes what the ``browsergym`` env sends; `parse_action` is its inverse, for a loop
that is not guimem's (`guimem.integrations.browsergym`). Nothing from the page or the agent is trusted:
action strings are parsed as literals (never evaluated), unknown ones are recorded as what they are.
"""

from __future__ import annotations

import ast
from typing import Any

from guimem.envs.browsergym.observation import BID, Parsed
from guimem.types import Action, ActionKind, Selector

# guimem key names -> Playwright's
KEYS = {
    "enter": "Enter", "tab": "Tab", "backspace": "Backspace", "delete": "Delete", "space": " ", "up": "ArrowUp",
    "down": "ArrowDown", "left": "ArrowLeft", "right": "ArrowRight", "pageup": "PageUp", "pagedown": "PageDown",
    "escape": "Escape", "home": "Home", "end": "End",
}

_PLAYWRIGHT_KEYS = {v: k for k, v in KEYS.items()}


class UnmappableActionError(ValueError):
    """A guimem action BrowserGym cannot express (the env turns it into an `ActionError`)."""


def _lit(text: str) -> str:
    """A Python string literal for BrowserGym's action parser (``repr`` quotes and escapes anything)."""
    return repr(str(text))


def _on_element(action: Action, parsed: Parsed) -> str:
    ref = action.ref or ""
    if not ref and action.selector is not None:  # a portable target: resolved on this screen
        found = action.selector.resolve(parsed.observation)
        ref = found.element.ref if found.ok and found.element is not None else ""
    element = parsed.observation.element(ref) if BID.match(ref) else None
    if element is None:
        raise UnmappableActionError(f"no element with ref {ref[:40]!r} on this screen")
    if action.kind is ActionKind.TYPE:
        if not element.editable:
            raise UnmappableActionError(f"element {ref} is not editable")
        return f"fill({_lit(ref)}, {_lit(action.text or '')})"
    if ref in parsed.option_of:
        return f"select_option({_lit(parsed.option_of[ref])}, {_lit(element.text)})"
    return f"click({_lit(ref)})"


def to_browsergym(action: Action, parsed: Parsed) -> str:
    """The BrowserGym action string for ``action`` on the screen ``parsed``.

    Raises:
        UnmappableActionError: The action names no element of this screen, or has no BrowserGym equivalent.
    """
    kind = action.kind
    if kind in (ActionKind.TAP, ActionKind.TYPE):
        return _on_element(action, parsed)
    if kind is ActionKind.KEY:
        name = (action.key or "").strip()
        key = KEYS.get(name.lower(), name if len(name) == 1 else None)
        if key is None:
            raise UnmappableActionError(f"unknown key {name[:20]!r}")
        return f"keyboard_press({_lit(key)})"
    if kind is ActionKind.SCROLL:
        dy = -100 if action.direction == "up" else 100
        return f"scroll(0, {dy})"
    if kind is ActionKind.WAIT:
        return "noop(500)"
    raise UnmappableActionError(f"BrowserGym has no {kind.value} action")


def _read_call(raw: str) -> tuple[str, list[Any], dict[str, Any]] | None:
    """``name(literal, ...)`` as its parts, or None (anything else is never evaluated)."""
    try:
        call = ast.parse(raw, mode="eval").body
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            return None
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    return call.func.id, args, kwargs


def _target(ref: str, parsed: Parsed | None, kind: ActionKind = ActionKind.TAP, text: str | None = None) -> Action:
    obs = parsed.observation if parsed else None
    element = obs.element(ref) if obs is not None else None
    selector = Selector.for_element(element, obs) if element is not None and obs is not None else None
    return Action(kind=kind, ref=ref, selector=selector, text=text)


def _option(select: str, wanted: Any, parsed: Parsed | None) -> Action:
    """``select_option(select, option)`` as a tap on the option (as guimem's envs act on selects)."""
    wanted = wanted[0] if isinstance(wanted, list) and wanted else wanted
    for ref, owner in (parsed.option_of.items() if parsed else ()):
        element = parsed.observation.element(ref) if parsed else None
        if owner == select and element is not None and element.text == str(wanted):
            return _target(ref, parsed)
    return _target(select, parsed)


def parse_action(action: str, parsed: Parsed | None) -> Action:
    """A BrowserGym action string as a guimem `Action` (the target's selector from the screen it acted on).

    Only literal arguments are read (``ast.literal_eval``); anything else is kept as a described
    ``wait`` so the step is still recorded."""
    raw = action.strip()[:2000]
    read = _read_call(raw)
    if read is None:
        return Action(kind=ActionKind.WAIT, description=f"unparsed: {raw[:200]}")
    name, args, kwargs = read
    first = str(args[0]) if args else str(kwargs.get("bid", ""))
    if name in ("click", "dblclick") and first:
        return _target(first, parsed)
    if name == "fill" and first:
        return _target(first, parsed, ActionKind.TYPE, str(args[1] if len(args) > 1 else kwargs.get("value", "")))
    if name == "select_option" and first:
        return _option(first, args[1] if len(args) > 1 else kwargs.get("options", ""), parsed)
    if name in ("press", "keyboard_press"):
        key = str(args[-1] if args else kwargs.get("key_comb", kwargs.get("key", "")))
        return Action(kind=ActionKind.KEY, key=_PLAYWRIGHT_KEYS.get(key, key.lower())[:40])
    if name in ("scroll", "scroll_at"):
        dy = args[1] if name == "scroll" and len(args) > 1 else (args[3] if len(args) > 3 else 0)
        return Action(kind=ActionKind.SCROLL, direction="up" if isinstance(dy, (int, float)) and dy < 0 else "down")
    if name == "send_msg_to_user":
        return Action(kind=ActionKind.ANSWER, text=str(first)[:2000])
    return Action(kind=ActionKind.WAIT, description=None if name == "noop" else f"{name}(...)"[:200])
