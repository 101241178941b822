"""Prompt templates of the memory layer (files under ``memory/prompts``)."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def memory_template(name: str) -> str:
    """The template ``memory/prompts/<name>.txt``."""
    return (resources.files("guimem.memory") / "prompts" / f"{name}.txt").read_text(encoding="utf-8")
