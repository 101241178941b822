"""The OpenAPI document says what the guard enforces: strings in request bodies hold no NUL character.

The guard refuses ``\\u0000`` in any string of a request body (`guimem.service.guard`); the models do not
say so, and replies may carry NUL (page text recorded from real pages), so the models stay as they are.
Here every schema a request body reaches is copied as ``<Name>Request`` with ``pattern: ^[^\\u0000]*$`` on
each free string (and free object key), and the request bodies point at the copies; replies keep the plain
schemas.
"""

from __future__ import annotations

import copy
from typing import Any

NUL_FREE = "^[^\\u0000]*$"
REF = "#/components/schemas/"


def _refs(node: Any) -> set[str]:
    """The component names ``node`` refers to directly."""
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and ref.startswith(REF):
                found.add(ref.removeprefix(REF))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _reachable(roots: list[Any], components: dict[str, Any]) -> set[str]:
    seen: set[str] = set()
    todo = set().union(*(_refs(r) for r in roots)) if roots else set()
    while todo:
        name = todo.pop()
        if name in seen or name not in components:
            continue
        seen.add(name)
        todo |= _refs(components[name]) - seen
    return seen


def _restrict(node: Any, names: set[str]) -> None:
    """Point refs at the request copies and declare free strings NUL-free, in place."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and ref.removeprefix(REF) in names:
                item["$ref"] = f"{ref}Request"
            if item.get("type") == "string" and not {"pattern", "enum", "const", "format"} & set(item):
                item["pattern"] = NUL_FREE
            if item.get("type") == "object" and item.get("additionalProperties") not in (None, False):
                item.setdefault("propertyNames", {"pattern": NUL_FREE})  # free keys are strings too
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def nul_free_requests(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with its request bodies' strings declared NUL-free (see the module docstring)."""
    components: dict[str, Any] = document.get("components", {}).get("schemas", {})
    bodies = [op["requestBody"] for path in document.get("paths", {}).values() for op in path.values()
              if isinstance(op, dict) and "requestBody" in op]
    names = _reachable(bodies, components)
    for name in names:
        components[f"{name}Request"] = copy.deepcopy(components[name])
    for name in names:
        _restrict(components[f"{name}Request"], names)
    for body in bodies:
        _restrict(body, names)
    return document
