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


def extract_json(reply: str) -> object:
    """The first JSON value in ``reply``: a fenced block, else the first balanced ``{...}`` / ``[...]``.

    Raises:
        LLMResponseError: No JSON value could be parsed.
    """
    candidates = [m.group(1) for m in _FENCE.finditer(reply)] + [reply]
    decoder = json.JSONDecoder()
    for text in candidates:
        for start, ch in enumerate(text):
            if ch in "{[":
                try:
                    value, _ = decoder.raw_decode(text[start:])
                    return value
                except json.JSONDecodeError:
                    continue
    raise LLMResponseError("the reply contains no JSON object", reply=reply)


def validate_reply(reply: str, model: type[T]) -> T:
    """The JSON in ``reply`` validated against ``model``.

    Raises:
        LLMResponseError: No JSON, or invalid JSON for the model (the message names the field).
    """
    value = extract_json(reply)
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise LLMResponseError(f"field {where!r}: {first['msg']}", reply=reply) from None


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
