"""Strict JSON for every entry (HTTP bodies, JSONL lines): finite numbers, bounded nesting, valid text.

Python's ``json`` reads ``NaN``/``Infinity`` literals and turns ``1e400`` into infinity; stored
through pydantic such a number becomes ``null`` and no longer validates. Deep nesting makes any
recursive reader raise `RecursionError`. `loads_strict` refuses all of these before anything
recurses over the value, with a message that never echoes the input.
"""

from __future__ import annotations

import json
import math
import re

MAX_DEPTH = 64
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


class StrictJSONError(ValueError):
    """Text that is not strict JSON; the message names the problem, never the input."""


class LoneSurrogateError(StrictJSONError):
    """JSON whose strings hold a lone surrogate (valid JSON, but not valid Unicode)."""


def _refuse_constant(name: str) -> float:
    raise StrictJSONError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise StrictJSONError("a number is out of range (beyond ±1.8e308)")
    return value


def _check_depth(text: str, limit: int) -> None:
    """Count bracket depth outside strings, without recursion (so it runs before any recursive reader)."""
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                raise StrictJSONError(f"nested deeper than {limit} levels")
        elif token in "]}":
            depth -= 1


def _check_strings(value: object, nul: bool) -> None:
    """Refuse lone surrogates (and NUL characters unless ``nul``) in any key or string, iteratively."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            if not nul and "\x00" in item:
                raise StrictJSONError("a string holds a NUL character (\\u0000)")
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise LoneSurrogateError("a string holds a lone surrogate (\\ud800-\\udfff): "
                                         "not valid Unicode") from None


def loads_strict(text: str, max_depth: int = MAX_DEPTH, nul: bool = False) -> object:
    """Parse ``text`` as strict JSON (``nul``: accept NUL characters in strings, as files guimem
    recorded from real pages may hold them).

    Raises:
        StrictJSONError: Not JSON, a non-finite or out-of-range number, nesting deeper than
            ``max_depth``, a NUL character or a lone surrogate in a string.
    """
    _check_depth(text, max_depth)
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)
    except StrictJSONError:
        raise
    except json.JSONDecodeError as exc:
        raise StrictJSONError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more than 4300 digits
        raise StrictJSONError(f"not valid JSON ({str(exc).splitlines()[0][:120]})") from None
    _check_strings(value, nul)
    return value
