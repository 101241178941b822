"""JSON schemas of what a model may answer, generated from the action vocabulary (`ActionKind`).

Servers that constrain output (OpenAI's and vLLM's ``json_schema``, llama.cpp's ``json_object`` with a
schema) then cannot produce an action the code would refuse, nor name an element that is not on the
screen. Kept flat (no ``$ref``) for servers' grammar converters.
"""

from __future__ import annotations

import json

from guimem.types import ActionKind, Observation


def _variant(kind: ActionKind, **fields: dict[str, object]) -> dict[str, object]:
    return {"type": "object", "properties": {"kind": {"const": kind.value}, **fields},
            "required": ["kind", *fields], "additionalProperties": False}


def action_variants(obs: Observation, memory: bool = False) -> list[dict[str, object]]:
    """One schema per action kind with that kind's required fields (``ref`` limited to this screen's
    elements); ``memory`` adds ConAct's memory actions."""
    refs = [el.ref for el in obs.elements]
    ref: dict[str, object] = {"enum": refs} if refs else {"type": "null"}
    text = bounded_text(80)
    name = bounded_text(80, min_length=1)  # what `Action` refuses empty: a constrained model must not write ""
    variants = [
        _variant(ActionKind.TAP, ref=ref),
        _variant(ActionKind.TYPE, ref=ref, text=text),
        _variant(ActionKind.KEY, key={"enum": ["enter", "tab", "backspace", "escape", "up", "down", "left", "right",
                                               "space", "delete", "home", "end", "pageup", "pagedown"]}),
        _variant(ActionKind.SCROLL, direction={"enum": ["up", "down", "left", "right"]}),
        _variant(ActionKind.OPEN_APP, app=name),
        _variant(ActionKind.RUN_SKILL, skill=name),
        _variant(ActionKind.ANSWER, text=text),
        _variant(ActionKind.WAIT),
        _variant(ActionKind.DONE),
    ]
    if memory:
        variants += [_variant(ActionKind.MEMORY, op={"const": "add"}, memory_id=text, description=text, text=text),
                     _variant(ActionKind.MEMORY, op={"const": "update"}, memory_id=name, text=text),
                     _variant(ActionKind.MEMORY, op={"const": "delete"}, memory_id=name)]
    return variants


def bounded_text(max_length: int, min_length: int = 0) -> dict[str, object]:
    """A string schema with a length bound: a constrained model must close the string, so a reply can
    not run past its token budget inside one."""
    return {"type": "string", "maxLength": max_length, **({"minLength": min_length} if min_length else {})}


# A conservative count of a constrained reply's tokens: one token per character of a string's value (true
# for ASCII text under every byte-level tokenizer), one per two characters of keys and punctuation, and one
# per whitespace slot the grammar allows between them.
_INT_TOKENS = 16  # llama.cpp's grammar allows integers of up to 16 digits


def worst_tokens(schema: dict[str, object]) -> int:
    """The most tokens a reply that follows ``schema`` can take (for the schemas these modules build)."""
    if "anyOf" in schema:
        return max(worst_tokens(dict(v)) for v in _dicts(schema["anyOf"]))
    if "const" in schema or "enum" in schema:
        options = [schema["const"]] if "const" in schema else list(_items(schema["enum"]))
        return max(len(json.dumps(o)) // 2 + 1 for o in options)
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties")
        fields = props if isinstance(props, dict) else {}
        return 2 + sum((len(k) + 4) // 2 + 2 + worst_tokens(dict(v)) for k, v in fields.items())
    if kind == "array":
        items = schema.get("items")
        count = schema.get("maxItems")
        each = worst_tokens(dict(items)) if isinstance(items, dict) else 0
        return 2 + (int(count) if isinstance(count, int) else 64) * (each + 2)
    if kind == "string":
        limit = schema.get("maxLength")
        return 2 + (int(limit) if isinstance(limit, int) else 4096)
    if kind == "integer":
        return _INT_TOKENS
    return 1


def fit_to_budget(schema: dict[str, object], reply_tokens: int) -> dict[str, object]:
    """``schema`` with its strings' ``maxLength`` scaled down (never below their ``minLength``, nor 8) until
    the longest reply it allows fits ``reply_tokens``: a reply cut at ``max_tokens`` is not JSON, so a
    schema that allows a longer reply than the budget makes an unparseable reply possible."""
    if worst_tokens(schema) <= reply_tokens:
        return schema
    low, high = 0.0, 1.0
    for _ in range(12):
        mid = (low + high) / 2
        if worst_tokens(_scaled(schema, mid)) <= reply_tokens:
            low = mid
        else:
            high = mid
    return _scaled(schema, low)


def _scaled(schema: dict[str, object], factor: float) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in schema.items():
        if isinstance(value, dict):
            out[key] = _scaled(value, factor) if key != "properties" else \
                {k: _scaled(dict(v), factor) for k, v in value.items()}
        elif isinstance(value, list) and key == "anyOf":
            out[key] = [_scaled(dict(v), factor) for v in _dicts(value)]
        else:
            out[key] = value
    limit = schema.get("maxLength")
    if schema.get("type") == "string" and isinstance(limit, int):
        floor = max(8, int(str(schema.get("minLength", 0))))
        out["maxLength"] = max(min(floor, limit), int(limit * factor))
    return out


def _dicts(value: object) -> list[dict[str, object]]:
    return [dict(v) for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _items(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []
