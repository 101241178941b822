"""Structured replies: pull JSON out of a model reply, validate it, ask once more with the error."""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from guimem.errors import LLMResponseError
from guimem.llm.base import ChatMessage, LLMClient, StructuredChat, text_message

T = TypeVar("T", bound=BaseModel)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def json_values(reply: str) -> list[object]:
    """Every top-level JSON value in ``reply``, fenced blocks first, in order.

    Lenient as models need: control characters inside strings (a raw newline) are accepted.
    """
    decoder = json.JSONDecoder(strict=False)
    out: list[object] = []
    for text in [m.group(1) for m in _FENCE.finditer(reply)] + [reply]:
        start = 0
        while start < len(text):
            if text[start] not in "{[":
                start += 1
                continue
            try:
                value, end = decoder.raw_decode(text, start)
            except json.JSONDecodeError:
                start += 1
                continue
            out.append(value)
            start = end
    return out


def extract_json(reply: str) -> object:
    """The first JSON value in ``reply``: a fenced block, else the first balanced ``{...}`` / ``[...]``.

    Raises:
        LLMResponseError: No JSON value could be parsed.
    """
    values = json_values(reply)
    if not values:
        raise LLMResponseError("the reply contains no JSON object", reply=reply)
    return values[0]


def validate_reply(reply: str, model: type[T]) -> T:
    """The first JSON value in ``reply`` that validates against ``model`` — or, when the reply split one
    object into several (``{"thought": …}{"action": …}``), their union.

    Raises:
        LLMResponseError: No JSON, or none valid for the model (the message names the first bad field).
    """
    values = json_values(reply)
    if not values:
        raise LLMResponseError("the reply contains no JSON object", reply=reply)
    objects = [v for v in values if isinstance(v, dict)]
    merged: dict[str, object] = {k: v for obj in objects for k, v in obj.items()}
    first_error: ValidationError | None = None
    for value in [*values, *([merged] if len(objects) > 1 else [])]:
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            first_error = first_error or exc
    assert first_error is not None
    problem = first_error.errors()[0]
    where = ".".join(str(p) for p in problem["loc"]) or "<root>"
    raise LLMResponseError(f"field {where!r}: {problem['msg']}", reply=reply) from None


def complete_json(client: LLMClient, messages: list[ChatMessage], model: type[T], *, retries: int = 1) -> T:
    """Ask for a reply that validates against ``model`` (constrained to its schema when the client can);
    on failure, ask again showing the error, at a higher temperature.

    Raises:
        LLMResponseError: Still invalid after ``retries`` corrections.
    """
    convo = list(messages)
    temperature: float | None = None
    for attempt in range(retries + 1):
        if isinstance(client, StructuredChat):
            reply = client.chat_structured(convo, model.model_json_schema(), temperature=temperature).text
        else:
            reply = client.chat(convo, temperature=temperature).text
        try:
            return validate_reply(reply, model)
        except LLMResponseError as exc:
            if attempt == retries:
                raise
            schema = json.dumps(model.model_json_schema())
            convo += [
                text_message("assistant", reply),
                text_message("user", f"Your reply was not valid: {exc.message}. Reply with one JSON object "
                                     f"matching this schema, nothing else:\n{schema}"),
            ]
            temperature = min(1.0, (temperature or 0.0) + 0.7)
    raise AssertionError("unreachable")  # pragma: no cover
