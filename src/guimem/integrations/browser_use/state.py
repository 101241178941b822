"""browser-use's browser state as guimem values: its selector map as an `Observation`, its actions as `Action`s.

Refs are browser-use's own element indices (``[12]<button ...>`` in its prompt), valid in one state only; every
recorded action also carries a portable `Selector`, so memory keeps selectors, never indices. Everything here is
read from a web page or a model's reply: any field may be missing, of the wrong type or huge. Nothing raises on
odd input, texts are capped, and an action guimem has no word for is recorded as what it is (a ``wait`` named
after it), never run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlparse

from guimem.envs.browsergym.observation import ROLES
from guimem.types import (
    Action,
    ActionError,
    ActionErrorCode,
    ActionKind,
    Bounds,
    Observation,
    Role,
    Selector,
    UIElement,
)

MAX_TEXT = 120
MAX_LABEL = 80
MAX_TYPED = 500
MAX_ELEMENTS = 500
_SPACE = re.compile(r"\s+")
_TAGS = {"a": Role.LINK, "button": Role.BUTTON, "select": Role.COMBOBOX, "textarea": Role.TEXTBOX,
         "option": Role.OPTION, "img": Role.IMAGE}
_INPUTS = {"checkbox": Role.CHECKBOX, "radio": Role.RADIO, "button": Role.BUTTON, "submit": Role.BUTTON,
           "reset": Role.BUTTON, "image": Role.BUTTON}
_EDITABLE = {Role.TEXTBOX, Role.COMBOBOX}
_ROOT_IDS = {"area", "wrap"}  # MiniWoB's page frame, skipped as guimem's miniwob env skips it


def clean(value: Any, limit: int) -> str:
    """Page or model text as one capped line ("" for anything that is not text or a number)."""
    if not isinstance(value, str):
        value = str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
    return _SPACE.sub(" ", value[: limit * 4]).strip()[:limit]


def location_of(url: Any) -> str:
    """A screen's location from its URL: host and path, without port, query or fragment (a local server's port
    changes between runs; the page does not)."""
    if not isinstance(url, str) or not url:
        return ""
    try:
        parts = urlparse(url[:2000])
        host = parts.hostname or ""
    except ValueError:
        return ""
    return f"{host}{parts.path}".rstrip("/")[:200]


def _attrs(node: Any) -> Mapping[str, Any]:
    attrs = getattr(node, "attributes", None)
    return attrs if isinstance(attrs, Mapping) else {}


def _role(node: Any, tag: str, attrs: Mapping[str, Any]) -> Role:
    ax = getattr(node, "ax_node", None)
    role = ROLES.get(clean(getattr(ax, "role", ""), 40))
    if role is not None:
        return role
    if tag == "input":
        return _INPUTS.get(clean(attrs.get("type"), 20).lower(), Role.TEXTBOX)
    return _TAGS.get(tag, Role.TEXT)


def _checked(node: Any) -> bool | None:
    for prop in getattr(getattr(node, "ax_node", None), "properties", None) or ():
        if getattr(prop, "name", None) == "checked":
            return getattr(prop, "value", None) in (True, "true", "mixed")
    return None


def _container(node: Any) -> str:
    parent = getattr(node, "parent_node", None)
    for _ in range(12):
        if parent is None:
            return ""
        found = clean(_attrs(parent).get("id"), MAX_LABEL)
        if found and found not in _ROOT_IDS:
            return found
        parent = getattr(parent, "parent_node", None)
    return ""


def _bounds(node: Any) -> Bounds:
    rect = getattr(node, "absolute_position", None)
    try:
        return Bounds(x=float(rect.x), y=float(rect.y), w=float(rect.width), h=float(rect.height))  # type: ignore[union-attr]
    except (AttributeError, TypeError, ValueError):
        return Bounds()


def _text(node: Any) -> str:
    try:
        return clean(node.get_all_children_text(), MAX_TEXT)
    except Exception:  # a page can make any DOM walk fail: the element keeps its other fields
        return ""


def element_of(index: Any, node: Any) -> UIElement:
    """One entry of browser-use's selector map (``index -> EnhancedDOMTreeNode``) as a `UIElement`."""
    attrs = _attrs(node)
    tag = clean(getattr(node, "node_name", ""), 20).lower()
    role = _role(node, tag, attrs)
    editable = role in _EDITABLE and tag != "select"
    ax_name = clean(getattr(getattr(node, "ax_node", None), "name", ""), MAX_LABEL)
    text = "" if editable else _text(node)
    label = clean(attrs.get("aria-label") or attrs.get("placeholder"), MAX_LABEL) or (ax_name if ax_name != text
                                                                                     else "")
    value = clean(attrs.get("value"), MAX_TEXT) if editable and "value" in attrs else None
    return UIElement(ref=clean(index, 12), role=role, text=text, label=label,
                     resource_id=clean(attrs.get("id"), MAX_LABEL), value=value, bounds=_bounds(node),
                     clickable=True, editable=editable, checked=_checked(node), container=_container(node))


def observation_of(state: Any, app: str, timestamp: float = 0.0) -> Observation:
    """browser-use's ``BrowserStateSummary`` (its DOM state's selector map and URL) as an `Observation`."""
    selectors = getattr(getattr(state, "dom_state", None), "selector_map", None)
    items = list(selectors.items())[:MAX_ELEMENTS] if isinstance(selectors, Mapping) else []
    elements = tuple(element_of(index, node) for index, node in items)
    return Observation(app=app, location=location_of(getattr(state, "url", "")), elements=elements,
                       timestamp=timestamp)


def _call(action: Any) -> tuple[str, Mapping[str, Any]]:
    """``{"click": {"index": 3}}``: the one action a browser-use ``ActionModel`` holds, and its parameters."""
    try:
        data = action.model_dump(exclude_unset=True)
    except Exception:  # not a pydantic model: nothing to read
        return "", {}
    if isinstance(data, Mapping) and len(data) == 1:
        name, params = next(iter(data.items()))
        return clean(name, 40), params if isinstance(params, Mapping) else {}
    return "", {}


def _on(kind: ActionKind, index: Any, observation: Observation, text: str | None = None) -> Action | None:
    element = observation.element(clean(index, 12)) if index is not None else None
    if element is None:
        return None
    return Action(kind=kind, ref=element.ref, selector=Selector.for_element(element, observation), text=text)


def _option(index: Any, wanted: str, observation: Observation) -> Action | None:
    """A dropdown choice as a tap on the option, as guimem's envs act on selects."""
    for element in observation.elements:
        if element.role is Role.OPTION and element.text == wanted:
            return _on(ActionKind.TAP, element.ref, observation)
    return _on(ActionKind.TAP, index, observation)


def _key(params: Mapping[str, Any], observation: Observation) -> Action | None:
    key = clean(params.get("keys"), 40).lower()
    return Action(kind=ActionKind.KEY, key=key) if key else None


def _typed(params: Mapping[str, Any]) -> str:
    return clean(params.get("text"), MAX_TYPED)


_Mapper = Callable[[Mapping[str, Any], Observation], "Action | None"]
_ACTIONS: dict[str, _Mapper] = {
    "click": lambda p, obs: _on(ActionKind.TAP, p.get("index"), obs),
    "input": lambda p, obs: _on(ActionKind.TYPE, p.get("index"), obs, _typed(p)),
    "select_dropdown": lambda p, obs: _option(p.get("index"), _typed(p), obs),
    "send_keys": _key,
    "go_back": lambda p, obs: Action(kind=ActionKind.KEY, key="back"),
    "scroll": lambda p, obs: Action(kind=ActionKind.SCROLL, direction="up" if p.get("down") is False else "down"),
    "done": lambda p, obs: Action(kind=ActionKind.DONE),  # its text is the model's words: not kept
}


def action_of(action: Any, observation: Observation) -> Action:
    """A browser-use action (``ActionModel``) on ``observation`` as a guimem `Action`."""
    name, params = _call(action)
    mapper = _ACTIONS.get(name)
    mapped = mapper(params, observation) if mapper is not None else None
    return mapped or Action(kind=ActionKind.WAIT, description=f"browser-use {name or 'unreadable'} action")


def error_of(result: Any, action: Action) -> ActionError | None:
    """browser-use's ``ActionResult.error`` as an `ActionError` (the page's or the tool's words, capped)."""
    message = clean(getattr(result, "error", None), 300)
    return ActionError(code=ActionErrorCode.ENV_REJECTED, message=message, action=action.describe()) \
        if message else None
