"""JSON schemas of what a model may answer, generated from the action vocabulary (`ActionKind`).

Servers that constrain output (OpenAI's and vLLM's ``json_schema``, llama.cpp's ``json_object`` with a
schema) then cannot produce an action the code would refuse, nor name an element that is not on the
screen. Kept flat (no ``$ref``) for servers' grammar converters.
"""

from __future__ import annotations

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
    variants = [
        _variant(ActionKind.TAP, ref=ref),
        _variant(ActionKind.TYPE, ref=ref, text=text),
        _variant(ActionKind.KEY, key={"enum": ["enter", "tab", "backspace", "escape", "up", "down", "left", "right",
                                               "space", "delete", "home", "end", "pageup", "pagedown"]}),
        _variant(ActionKind.SCROLL, direction={"enum": ["up", "down", "left", "right"]}),
        _variant(ActionKind.OPEN_APP, app=text),
        _variant(ActionKind.RUN_SKILL, skill=text),
        _variant(ActionKind.ANSWER, text=text),
        _variant(ActionKind.WAIT),
        _variant(ActionKind.DONE),
    ]
    if memory:
        variants += [_variant(ActionKind.MEMORY, op={"const": "add"}, memory_id=text, description=text, text=text),
                     _variant(ActionKind.MEMORY, op={"const": "update"}, memory_id=text, text=text),
                     _variant(ActionKind.MEMORY, op={"const": "delete"}, memory_id=text)]
    return variants


def bounded_text(max_length: int) -> dict[str, object]:
    """A string schema with a length bound: a constrained model must close the string, so a reply can
    not run past its token budget inside one."""
    return {"type": "string", "maxLength": max_length}
