"""BrowserGym observations as guimem `Observation`s (refs are bids): pure functions of BrowserGym's
observation dict, no browser here.

- Elements come from the accessibility tree (``axtree_object``, every node carrying its ``bid``),
  with the DOM snapshot (``dom_object``) adding what the tree lacks (the element's ``id``, tag and
  placeholder) and ``extra_element_properties`` adding visibility, box and clickability.
- Roles, labels, ids and containers follow the same vocabulary as guimem's own ``miniwob`` env, so a
  screen reads the same in both and memory learned in one is recalled in the other.
- Everything here is read from a web page: any field may be missing, of the wrong type or huge.
  Nothing raises on odd input; texts are capped, refs are checked before they reach an action string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlparse

from guimem.types import Bounds, Observation, Role, UIElement, page_view

MAX_TEXT = 120
MAX_LABEL = 80
MAX_NODES = 20_000
BID = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
_SPACE = re.compile(r"\s+")

ROLES: dict[str, Role] = {
    "button": Role.BUTTON, "link": Role.LINK, "textbox": Role.TEXTBOX, "searchbox": Role.TEXTBOX,
    "spinbutton": Role.TEXTBOX, "checkbox": Role.CHECKBOX, "switch": Role.CHECKBOX, "radio": Role.RADIO,
    "tab": Role.TAB, "option": Role.OPTION, "MenuListOption": Role.OPTION, "combobox": Role.COMBOBOX,
    "listbox": Role.COMBOBOX, "menuitem": Role.MENUITEM, "menuitemcheckbox": Role.MENUITEM,
    "menuitemradio": Role.MENUITEM, "listitem": Role.LISTITEM, "treeitem": Role.LISTITEM, "img": Role.IMAGE,
    "image": Role.IMAGE, "heading": Role.HEADING,
}
_INTERACTIVE = {Role.BUTTON, Role.LINK, Role.TEXTBOX, Role.CHECKBOX, Role.RADIO, Role.TAB, Role.OPTION,
                Role.COMBOBOX, Role.MENUITEM}
_TEXT_HOLDERS = {"generic", "paragraph", "LabelText", "cell", "gridcell", "columnheader", "rowheader", "label",
                 "strong", "emphasis", "time", "mark", "definition", "term", "Section", "article", "status",
                 "blockquote", "caption", "code", "DescriptionListTerm", "DescriptionListDetail"}
_FORM_TAGS = {"A", "BUTTON", "INPUT", "SELECT", "TEXTAREA"}
_ROOT_IDS = {"area", "wrap"}  # MiniWoB's page frame, as the miniwob env's containers skip it


def _clean(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        value = "" if value is None else str(value) if isinstance(value, (int, float)) else ""
    return _SPACE.sub(" ", value).strip()[:limit]


def location_of(url: Any) -> str:
    """A screen's location from its URL: host and path without the query. A local file gives nothing: its
    name is the task's (MiniWoB's every task is its own page), and a page is the same page whichever task
    opened it, so the screen's structure (`page_view`) is its location, as in guimem's ``miniwob`` env."""
    if not isinstance(url, str) or not url:
        return ""
    try:
        parts = urlparse(url[:2000])
    except ValueError:
        return ""
    if parts.scheme == "file":
        return ""
    return f"{parts.netloc}{parts.path}".rstrip("/")[:200]


@dataclass(frozen=True)
class DomInfo:
    """What the DOM snapshot knows about one element (by bid)."""

    tag: str = ""
    attrs: Mapping[str, str] = field(default_factory=dict)
    parent: str | None = None  # the bid of the nearest ancestor element that has one
    inner: bool = False  # a link, button or form field is inside it
    leaf: bool = True  # no child element

    @property
    def css_class(self) -> str:
        """The first class name."""
        return (self.attrs.get("class", "").split() or [""])[0]


def dom_info(dom: Any) -> dict[str, DomInfo]:
    """Tag, attributes and the parent bid of every element with a ``bid`` in a DOMSnapshot."""
    out: dict[str, DomInfo] = {}
    if not isinstance(dom, Mapping):
        return out
    strings = dom.get("strings")
    docs = dom.get("documents")
    if not isinstance(strings, list) or not isinstance(docs, list):
        return out

    def s(i: Any) -> str:
        return strings[i] if isinstance(i, int) and 0 <= i < len(strings) and isinstance(strings[i], str) else ""

    for doc in docs[:20]:
        nodes = doc.get("nodes") if isinstance(doc, Mapping) else None
        if isinstance(nodes, Mapping):
            _read_document(nodes, s, out)
    _mark_ancestors(out)
    return out


def _read_document(nodes: Mapping[str, Any], s: Callable[[Any], str], out: dict[str, DomInfo]) -> None:
    names, attrs, parents = nodes.get("nodeName"), nodes.get("attributes"), nodes.get("parentIndex")
    if not (isinstance(names, list) and isinstance(attrs, list) and isinstance(parents, list)):
        return
    bids: list[str | None] = []
    for i in range(min(len(names), len(attrs), len(parents), MAX_NODES)):
        flat = attrs[i] if isinstance(attrs[i], list) else []
        pairs = {s(flat[j]): s(flat[j + 1]) for j in range(0, len(flat) - 1, 2)}
        bid = pairs.get("bid") or None
        bids.append(bid)
        if bid is None:
            continue
        p, parent = parents[i], None
        while isinstance(p, int) and 0 <= p < len(bids):
            if bids[p] is not None:
                parent = bids[p]
                break
            p = parents[p] if p < len(parents) else None
        out[bid] = DomInfo(tag=s(names[i]).upper(), attrs=pairs, parent=parent)


def _mark_ancestors(dom: dict[str, DomInfo]) -> None:
    """Set ``leaf`` and ``inner`` (an interactive element below) from the parent links."""
    parents_of_inner: set[str] = set()
    not_leaf: set[str] = set()
    for info in dom.values():
        if info.parent is not None:
            not_leaf.add(info.parent)
        if info.tag in _FORM_TAGS:
            p, hops = info.parent, 0
            while p is not None and p not in parents_of_inner and hops < 500:
                parents_of_inner.add(p)
                p, hops = (dom[p].parent if p in dom else None), hops + 1
    for bid in not_leaf | parents_of_inner:
        if bid in dom:
            dom[bid] = replace(dom[bid], inner=bid in parents_of_inner, leaf=bid not in not_leaf)


def _props(node: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    raw = node.get("properties")
    for p in raw if isinstance(raw, list) else []:
        if isinstance(p, Mapping) and isinstance(p.get("name"), str):
            value = p.get("value")
            out[p["name"]] = value.get("value") if isinstance(value, Mapping) else None
    return out


def _value(node: Mapping[str, Any], key: str) -> Any:
    field_ = node.get(key)
    return field_.get("value") if isinstance(field_, Mapping) else None


def _walk(nodes: list[Any]) -> Iterator[tuple[Mapping[str, Any], list[Mapping[str, Any]]]]:
    """AX nodes in document order (depth first from the root), each with its children."""
    by_id = {str(n.get("nodeId")): n for n in nodes[:MAX_NODES] if isinstance(n, Mapping)}
    if not by_id:
        return
    root = next(iter(by_id.values()))
    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        key = str(node.get("nodeId"))
        if key in seen:
            continue
        seen.add(key)
        ids = node.get("childIds")
        children = [by_id[str(c)] for c in ids if str(c) in by_id] if isinstance(ids, list) else []
        yield node, children
        stack.extend(reversed(children))


def _all_text(node: Mapping[str, Any], by_id: Mapping[str, Mapping[str, Any]]) -> str:
    """Every text under ``node`` in order (what ``innerText`` gives), capped."""
    parts: list[str] = []
    size, stack, seen = 0, [node], 0
    while stack and size < MAX_TEXT and seen < 2000:
        current = stack.pop()
        seen += 1
        if _value(current, "role") == "StaticText":
            text = _clean(_value(current, "name"), MAX_TEXT)
            parts.append(text)
            size += len(text) + 1
            continue
        ids = current.get("childIds")
        kids = [by_id[str(c)] for c in ids if str(c) in by_id] if isinstance(ids, list) else []
        stack.extend(reversed(kids))
    return _clean(" ".join(p for p in parts if p), MAX_TEXT)


def _own_text(children: list[Mapping[str, Any]]) -> str:
    parts = [_clean(_value(c, "name"), MAX_TEXT) for c in children if _value(c, "role") == "StaticText"]
    return _clean(" ".join(p for p in parts if p), MAX_TEXT)


def _box(extra: Mapping[str, Any]) -> Bounds | None:
    bbox = extra.get("bbox")
    if not (isinstance(bbox, list) and len(bbox) == 4 and all(isinstance(v, (int, float)) for v in bbox)):
        return None
    x, y, w, h = (float(v) for v in bbox)
    return Bounds(x=x, y=y, w=w, h=h) if w > 0 and h > 0 else None


def _container(bid: str, dom: dict[str, DomInfo]) -> str:
    info = dom.get(bid)
    parent = info.parent if info else None
    hops = 0
    while parent is not None and hops < 200:
        p = dom.get(parent)
        if p is None or p.tag in ("BODY", "HTML"):
            return ""
        pid = p.attrs.get("id", "")
        if p.tag == "FORM" or (pid and pid not in _ROOT_IDS):
            return _clean(pid or "form", MAX_LABEL)
        parent, hops = p.parent, hops + 1
    return ""


def _adjust_role(role: Role | None, raw_role: str, info: DomInfo | None, dom: dict[str, DomInfo], clickable: bool,
                 own: str) -> Role | None:
    """The miniwob env's reading of an element (None: not an element of its own).

    An explicit ARIA role around a link or field leaves the role to the inner element (a tab's link is
    the tab); a clicked text span reads as a link and a clicked box as a button; an empty classed leaf
    is an icon button; labels and plain text holders are text."""
    tag = info.tag if info else ""
    if info is not None and info.inner and info.attrs.get("role") and tag not in _FORM_TAGS:
        return None
    if role is Role.LINK and info is not None and _inside_tab(info, dom):
        return Role.TAB
    if role is Role.LISTITEM and not (clickable and info is not None and not info.inner):
        return Role.TEXT if own else None
    if role is not None:
        return role
    if raw_role not in _TEXT_HOLDERS or raw_role in ("LabelText", "label") or tag == "LABEL":
        return Role.TEXT if own and raw_role in _TEXT_HOLDERS else None
    has_class = info is not None and bool(info.css_class)
    if clickable and info is not None and not info.inner:
        return Role.LINK if tag == "SPAN" and own else Role.BUTTON
    if not own and info is not None and info.leaf and tag in ("SPAN", "I", "IMG") and has_class:
        return Role.BUTTON
    return Role.TEXT if own else None


def _inside_tab(info: DomInfo, dom: dict[str, DomInfo]) -> bool:
    p, hops = info.parent, 0
    while p is not None and p in dom and hops < 50:
        if dom[p].attrs.get("role") in ("tab", "tablist"):
            return True
        p, hops = dom[p].parent, hops + 1
    return False


def _option_container(select: str, dom: dict[str, DomInfo]) -> str:
    info = dom.get(select)
    return _clean((info.attrs.get("id", "") if info else "") or "select", MAX_LABEL)


def _label(role: Role, name: str, info: DomInfo | None) -> str:
    attrs = info.attrs if info else {}
    if role is Role.TEXTBOX or role is Role.COMBOBOX:
        out = name or attrs.get("aria-label", "") or attrs.get("placeholder", "")
        if not out and info is not None and info.tag == "INPUT":
            out = attrs.get("id", "")
        return _clean(out, MAX_LABEL)
    if role in (Role.CHECKBOX, Role.RADIO):
        return _clean(name, MAX_LABEL)
    return _clean(attrs.get("aria-label", "") or attrs.get("title", "") or attrs.get("alt", ""), MAX_LABEL)


def _checked(props: Mapping[str, Any], role: Role) -> bool | None:
    raw = props.get("selected") if role is Role.OPTION else props.get("checked")
    if role not in (Role.CHECKBOX, Role.RADIO, Role.OPTION) or raw is None:
        return None
    return raw is True or raw == "true"


@dataclass(frozen=True)
class Parsed:
    """An observation and what the action mapping needs to know about it."""

    observation: Observation
    option_of: Mapping[str, str]  # option bid -> its select's bid
    url: str = ""


class _Reader:
    """Reads AX nodes in document order into elements (state: the open select, clickable ancestors)."""

    def __init__(self, obs: Mapping[str, Any], nodes: list[Any]) -> None:
        self.dom = dom_info(obs.get("dom_object"))
        extras = obs.get("extra_element_properties")
        self.extras: Mapping[str, Any] = extras if isinstance(extras, Mapping) else {}
        self.focused = obs.get("focused_element_bid")
        self.by_id = {str(n.get("nodeId")): n for n in nodes[:MAX_NODES] if isinstance(n, Mapping)}
        self.option_of: dict[str, str] = {}
        self.combo: tuple[str, Bounds] | None = None
        self.seen: set[str] = set()
        self.acting: set[str] = set()  # clickable elements: a clicked text inside one is part of it

    def _place(self, bid: str, role: Role | None) -> Bounds | None:
        found = self.extras.get(bid)
        extra: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        box = _box(extra)
        visible = box is not None and isinstance(extra.get("visibility"), (int, float)) and extra["visibility"] > 0
        if role is Role.OPTION and self.combo is not None and bid in self.dom:
            # a <select>'s options are hidden in a closed popup: listed at the select's box, as in the miniwob env
            self.option_of[bid] = self.combo[0]
            return self.combo[1]
        return box if visible else None

    def element(self, node: Mapping[str, Any], children: list[Mapping[str, Any]]) -> UIElement | None:
        bid, raw_role = node.get("browsergym_id"), _value(node, "role")
        if node.get("ignored") is True or not isinstance(bid, str) or not BID.match(bid) or bid in self.seen \
                or not isinstance(raw_role, str):
            return None
        role = ROLES.get(raw_role)
        box = self._place(bid, role)
        if box is None:
            return None
        info, own = self.dom.get(bid), _own_text(children)
        found = self.extras.get(bid)
        clickable = bool(found.get("clickable") if isinstance(found, Mapping) else False) or role in _INTERACTIVE
        inside_acting = info is not None and info.parent in self.acting
        role = _adjust_role(role, raw_role, info, self.dom, clickable and not (inside_acting and role is None), own)
        if role is None:
            return None
        if role not in (Role.TEXT, Role.TEXTBOX, Role.COMBOBOX) and clickable:
            self.acting.add(bid)
        if role is Role.COMBOBOX and info is not None and info.tag == "SELECT":
            self.combo = (bid, box)
        name = _clean(_value(node, "name"), MAX_TEXT)
        text = self._text(node, role, name, own)
        label = _label(role, name, info)
        if not label and not text and info is not None and role is not Role.TEXTBOX:
            label = _clean(info.css_class, MAX_LABEL)  # an icon: named by its class, as the miniwob env does
        value = _value(node, "value") if role in (Role.TEXTBOX, Role.COMBOBOX) else None
        props = _props(node)
        self.seen.add(bid)
        return UIElement(
            ref=bid, role=role, text=text, label=label,
            resource_id=_clean(info.attrs.get("id", "") if info else "", MAX_LABEL),
            value=value[:500] if isinstance(value, str) else None, bounds=box, clickable=clickable,
            editable=role is Role.TEXTBOX, checked=_checked(props, role), focused=self.focused == bid,
            enabled=props.get("disabled") not in (True, "true"),
            container=_option_container(self.option_of[bid], self.dom) if bid in self.option_of
            else _container(bid, self.dom))

    def _text(self, node: Mapping[str, Any], role: Role, name: str, own: str) -> str:
        if role is Role.TEXT:
            return own
        if role is Role.COMBOBOX:
            return _clean(_value(node, "value"), MAX_TEXT)
        if role in (Role.TEXTBOX, Role.CHECKBOX, Role.RADIO):
            return ""
        if name or own or role not in (Role.LISTITEM, Role.BUTTON, Role.LINK, Role.TAB, Role.MENUITEM):
            return name or own
        return _all_text(node, self.by_id)


def parse_observation(obs: Mapping[str, Any], app: str = "", location: str | None = None,
                      screenshot: str | None = None, timestamp: float = 0.0) -> Parsed:
    """A BrowserGym observation dict as a guimem `Observation` (refs are bids).

    Args:
        obs: BrowserGym's observation (``axtree_object``, ``dom_object``, ``extra_element_properties``,
            ``focused_element_bid``, ``url``); missing or malformed parts give fewer elements, never an error.
        app: The app name (the benchmark, e.g. ``miniwob``).
        location: The screen's location (default: from the URL).
        screenshot: A path to record as the observation's screenshot.
        timestamp: When it was observed.
    """
    raw_url = obs.get("url")
    url = raw_url if isinstance(raw_url, str) else ""
    ax = obs.get("axtree_object")
    nodes = ax.get("nodes") if isinstance(ax, Mapping) else None
    node_list = nodes if isinstance(nodes, list) else []
    reader = _Reader(obs, node_list)
    elements = [el for node, children in _walk(node_list) if (el := reader.element(node, children)) is not None]
    where = (location_of(url) or page_view(elements)) if location is None else location
    return Parsed(Observation(app=app, location=where,
                              elements=tuple(elements), screenshot=screenshot, timestamp=timestamp),
                  reader.option_of, url)
