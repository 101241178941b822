"""AT-SPI nodes (as the bridge reads them, `Node`) → guimem `UIElement`s and one `Observation`.

- Roles: AT-SPI's role names onto guimem's `Role`; unnamed layout containers are left out.
- While a modal dialog is open, only the dialog is the screen: a person cannot act on the window
  behind it, and an action sent there would bypass the modality.
- Names are stripped (mousepad's menu names carry trailing spaces); the session's home folder
  reads as ``~`` so titles do not change from one session to the next.
- An unnamed row that can be selected (the file chooser's Places) takes the name of the label inside
  it and can be clicked, as a person clicks "Home"; the label is then left out.
- Refs are numbers handed out per episode by `RefTable`, stable while the element lives.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from guimem.types import Bounds, Observation, Role, UIElement

ROLES = {
    "push button": Role.BUTTON, "toggle button": Role.BUTTON, "button": Role.BUTTON, "link": Role.LINK,
    "text": Role.TEXTBOX, "entry": Role.TEXTBOX, "password text": Role.TEXTBOX, "spin button": Role.TEXTBOX,
    "check box": Role.CHECKBOX, "radio button": Role.RADIO, "page tab": Role.TAB, "combo box": Role.COMBOBOX,
    "menu": Role.MENUITEM, "menu item": Role.MENUITEM, "check menu item": Role.MENUITEM,
    "radio menu item": Role.MENUITEM, "tearoff menu item": Role.MENUITEM, "list item": Role.LISTITEM,
    "table cell": Role.LISTITEM, "tree item": Role.LISTITEM, "icon": Role.IMAGE, "image": Role.IMAGE,
    "heading": Role.HEADING, "label": Role.TEXT, "static": Role.TEXT, "caption": Role.TEXT,
    "table column header": Role.BUTTON, "list item ": Role.LISTITEM,
}
WINDOWS = frozenset({"frame", "dialog", "file chooser", "alert", "window", "color chooser", "font chooser"})
CHECKABLE = frozenset({"check box", "radio button", "check menu item", "radio menu item"})
SKIPPED = frozenset({"scroll bar", "separator", "menu bar", "tool bar", "status bar"})
ROW_ROLES = frozenset({"list item"})
PREFERRED_ACTIONS = ("click", "press", "activate", "toggle", "jump")


@dataclass(frozen=True)
class Node:
    """One accessible node as the bridge read it.

    Attributes:
        key: Its identity within the session (app process and object path).
        parent: The index of its parent in the same read, -1 for a window.
        role: AT-SPI's role name (``push button``, ``text``, ...).
        name: Its accessible name.
        states: AT-SPI's state names (``sensitive``, ``editable``, ``modal``, ...).
        bounds: ``(x, y, w, h)`` in screen pixels, None when it is not on the screen.
        actions: The names of its actions (``click``, ``activate``, ...).
        text: Its Text interface's content, when it has one.
        value: Its Value interface's current value, when it has one.
        editable_text: Whether it offers EditableText.
    """

    key: str
    parent: int
    role: str
    name: str = ""
    states: frozenset[str] = frozenset()
    bounds: tuple[int, int, int, int] | None = None
    actions: tuple[str, ...] = ()
    text: str | None = None
    value: float | None = None
    editable_text: bool = False

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> Node:
        """A node from the bridge's JSON.

        Raises:
            ValueError: A field is missing or of the wrong type.
        """
        try:
            bounds = raw.get("bounds")
            return cls(key=str(raw["key"]), parent=int(raw["parent"]), role=str(raw["role"]),
                       name=str(raw.get("name") or ""), states=frozenset(map(str, raw.get("states", ()))),
                       bounds=None if bounds is None else (int(bounds[0]), int(bounds[1]), int(bounds[2]),
                                                           int(bounds[3])),
                       actions=tuple(map(str, raw.get("actions", ()))),
                       text=None if raw.get("text") is None else str(raw["text"]),
                       value=None if raw.get("value") is None else float(raw["value"]),
                       editable_text=bool(raw.get("editable_text")))
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"malformed node from the AT-SPI bridge: {exc!r}") from exc


@dataclass
class RefTable:
    """Element refs for one episode: the same AT-SPI node keeps its ref until the episode ends."""

    refs: dict[str, str] = field(default_factory=dict)

    def ref(self, key: str) -> str:
        """The ref of the node ``key`` (a new one the first time it is seen)."""
        if key not in self.refs:
            self.refs[key] = str(len(self.refs) + 1)
        return self.refs[key]

    def clear(self) -> None:
        """Forget every ref (a new episode)."""
        self.refs.clear()


@dataclass(frozen=True)
class Screen:
    """One observation and the nodes its elements came from.

    Attributes:
        observation: What the agent sees.
        nodes: The bridge's node of each element, by ref (the env acts on them).
        window: The bounds of the window the agent sees (where keys and scrolls are sent).
        raw: Every node read, the hidden ones included (checkers read state from it).
    """

    observation: Observation
    nodes: dict[str, Node]
    window: Bounds
    raw: tuple[Node, ...]


def _clean(text: str, home: str) -> str:
    return (text.replace(home, "~") if home else text).strip()


def _visible_part(nodes: list[Node]) -> list[int]:
    """Indices of the nodes a person can act on: the last modal window's subtree if one is open."""
    modal = [i for i, n in enumerate(nodes) if n.role in WINDOWS and "modal" in n.states]
    if not modal:
        return list(range(len(nodes)))
    root = modal[-1]
    inside = {root}
    for i in range(root + 1, len(nodes)):
        if nodes[i].parent in inside:
            inside.add(i)
    return sorted(inside)


def _container(nodes: list[Node], index: int, home: str) -> str:
    parent = nodes[index].parent
    while parent >= 0:
        name = _clean(nodes[parent].name, home)
        if name:
            return name
        parent = nodes[parent].parent
    return ""


def _named_rows(nodes: list[Node], keep: list[int]) -> dict[int, int]:
    """Label index → index of the unnamed selectable row it names (the first label inside the row)."""
    rows = {i for i in keep if nodes[i].role in ROW_ROLES and not nodes[i].name.strip()
            and "selectable" in nodes[i].states}
    out: dict[int, int] = {}
    for i in keep:
        if nodes[i].role != "label" or not nodes[i].name.strip():
            continue
        parent = nodes[i].parent
        while parent >= 0 and parent not in rows:
            parent = nodes[parent].parent
        if parent >= 0 and parent not in out.values():
            out[i] = parent
    return out


def _element(node: Node, ref: str, container: str, home: str) -> UIElement | None:
    role_name = node.role
    role = ROLES.get(role_name, Role.CONTAINER)
    name = _clean(node.name, home)
    states = node.states
    editable = "editable" in states and node.editable_text
    if role is Role.TEXTBOX and not editable:
        role = Role.TEXT
    text = "" if role is Role.TEXTBOX else name or _clean(node.text or "", home)
    if role_name in SKIPPED or (role is Role.CONTAINER and not (name and role_name in WINDOWS)):
        return None
    if node.bounds is None or (role is not Role.TEXTBOX and not text):
        return None
    x, y, w, h = node.bounds
    checked = ("checked" in states) if role_name in CHECKABLE or "checkable" in states else None
    value = node.text if role is Role.TEXTBOX else (None if node.value is None else str(node.value))
    return UIElement(ref=ref, role=role, text=text, label=name if role is Role.TEXTBOX else "",
                     value=value, bounds=Bounds(x=x, y=y, w=w, h=h),
                     clickable=bool(node.actions) or (role_name in ROW_ROLES and "selectable" in states),
                     editable=editable, checked=checked, focused="focused" in states,
                     enabled="sensitive" in states or "enabled" in states, container=container)


def _labelled(elements: list[UIElement]) -> list[UIElement]:
    """Unnamed text boxes take the text of the label just left of them on the same row (``Name:``)."""
    out = []
    for el in elements:
        if el.role is Role.TEXTBOX and not el.label:
            row = [t for t in elements if t.role is Role.TEXT and t.bounds.x + t.bounds.w <= el.bounds.x + 1
                   and abs(t.bounds.center[1] - el.bounds.center[1]) < max(el.bounds.h, 1) / 2]
            if row:
                nearest = max(row, key=lambda t: t.bounds.x + t.bounds.w)
                el = el.model_copy(update={"label": nearest.text.rstrip(":").strip()})
        out.append(el)
    return out


def build_screen(nodes: list[Node], refs: RefTable, app: str, home: str = "") -> Screen:
    """The screen the agent sees from the bridge's nodes."""
    keep = _visible_part(nodes)
    named = _named_rows(nodes, keep)
    nodes = list(nodes)
    for label, row in named.items():
        nodes[row] = replace(nodes[row], name=nodes[label].name)
    elements: list[UIElement] = []
    acted: dict[str, Node] = {}
    for i in keep:
        if i in named:
            continue
        ref = refs.ref(nodes[i].key)
        el = _element(nodes[i], ref, _container(nodes, i, home), home)
        if el is not None:
            elements.append(el)
            acted[ref] = nodes[i]
    top = nodes[keep[0]] if keep else None
    location = _clean(top.name, home) if top else ""
    window = Bounds(**dict(zip("xywh", top.bounds, strict=True))) if top and top.bounds else Bounds()
    obs = Observation(app=app, location=location, elements=tuple(_labelled(elements)), timestamp=time.time())
    return Screen(observation=obs, nodes=acted, window=window, raw=tuple(nodes))


def open_popups(nodes: tuple[Node, ...] | list[Node]) -> list[tuple[int, int, int, int]]:
    """The bounds of the popups open on the screen (a combo box's list): unnamed top-level windows that show.
    While one is open it holds the pointer: a click anywhere else only closes it."""
    return [n.bounds for n in nodes if n.parent == -1 and n.role == "window" and not n.name.strip()
            and "showing" in n.states and n.bounds is not None and n.bounds[2] > 0 and n.bounds[3] > 0]


def popup_owns(popup: tuple[int, int, int, int], el: UIElement) -> bool:
    """Is ``el`` one of the open ``popup``'s (``x, y, w, h``) items? Its centre lies in the popup and it is a menu
    item or lies wholly within (2 px spared). A dialog's button the popup only covers in part (the file chooser's
    Save button under its list of file types) is not: the popup takes a click meant for it. (A combo box's list
    shows its items under the combo box in the tree too, so where the tree puts an item does not tell.)"""
    x, y, w, h = popup
    b = el.bounds
    cx, cy = b.center
    if not (x <= cx < x + w and y <= cy < y + h):
        return False
    spare = 2
    return el.role is Role.MENUITEM or (x - spare <= b.x and y - spare <= b.y and b.x + b.w <= x + w + spare
                                         and b.y + b.h <= y + h + spare)


def action_index(node: Node) -> int | None:
    """The index of the node's default action (click, press, activate, ...), or None if it has none."""
    names = list(node.actions)
    for wanted in PREFERRED_ACTIONS:
        if wanted in names:
            return names.index(wanted)
    return 0 if names else None
