"""Texts for views: shortened at a word boundary, saying how much was left out (stores keep full texts);
counts with their noun in the right number."""

from __future__ import annotations


def shorten(text: str, limit: int) -> str:
    """``text`` cut at the last word boundary before ``limit`` characters, with ``…`` and a count of what
    was left out; unchanged when it fits. A single word longer than the limit is cut inside it."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    cut = cut if cut > limit // 2 else limit
    return f"{text[:cut].rstrip()} … ({len(text) - cut} more characters)"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``"1 round"``, ``"2 rounds"``: ``count`` and ``noun``, in the plural (``many``, default noun + s) unless 1."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"
