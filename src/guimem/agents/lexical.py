"""Word overlap between element text and the goal: the explorer's prior (no model, no task rules)."""

from __future__ import annotations

import re

_WORD = re.compile(r"[\w@#.'-]+", re.UNICODE)
STOPWORDS = frozenset(
    """a an the to and or of on in into at for from with by is are be it this that then your you
    click select find press enter type use""".split()
)


def words(text: str) -> set[str]:
    """Lower-cased content words of ``text`` (punctuation at word ends stripped)."""
    out = set()
    for raw in _WORD.findall(text.casefold()):
        w = raw.strip(".'-")
        if w and w not in STOPWORDS:
            out.add(w)
    return out


def overlap(text: str, target: set[str]) -> float:
    """Fraction of ``text``'s content words that occur in ``target`` (0 when text has none)."""
    ws = words(text)
    if not ws:
        return 0.0
    return len(ws & target) / len(ws)
