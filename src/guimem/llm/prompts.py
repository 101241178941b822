"""Prompt pieces shared by LLM policies and memory's LLM extractors: templates, and the screen as text.

One place for both, below the agents and memory layers that use them.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from guimem.types import Observation, UIElement

MAX_ELEMENTS = 80


@cache
def template(name: str) -> str:
    """The prompt template ``guimem/llm/templates/<name>.txt``."""
    return (resources.files("guimem.llm") / "templates" / f"{name}.txt").read_text(encoding="utf-8")


def render_element(el: UIElement) -> str:
    """One element as ``[ref] role "text" (label) #id value=... checked``."""
    parts = [f"[{el.ref}] {el.role.value}"]
    if el.text:
        parts.append(f'"{el.text[:60]}"')
    if el.label and el.label != el.text:
        parts.append(f"({el.label})")
    if el.resource_id:
        parts.append(f"#{el.resource_id}")
    if el.value:
        parts.append(f"value={el.value!r}")
    if el.checked is not None:
        parts.append("checked" if el.checked else "unchecked")
    if el.focused:
        parts.append("focused")
    return " ".join(parts)


def render_screen(obs: Observation, limit: int = MAX_ELEMENTS) -> str:
    """The screen as one element per line (at most ``limit``)."""
    lines = [render_element(el) for el in obs.elements[:limit]]
    if len(obs.elements) > limit:
        lines.append(f"... {len(obs.elements) - limit} more elements")
    return "\n".join(lines) or "(no elements)"
