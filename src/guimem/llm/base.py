"""The `LLMClient` protocol and the chat message types (text and image parts)."""

from __future__ import annotations

import base64
import mimetypes
from enum import StrEnum
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from guimem.registry import Registry, default_registry
from guimem.settings import LLMSettings


class ContentPart(BaseModel):
    """One part of a multimodal message: text, or an image as a data URL."""

    model_config = ConfigDict(frozen=True)

    type: Literal["text", "image_url"]
    text: str | None = None
    image_url: dict[str, str] | None = None


class ChatMessage(BaseModel):
    """One chat message in the OpenAI wire shape."""

    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str | tuple[ContentPart, ...]

    def text(self) -> str:
        """The text content (image parts left out)."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text or "" for p in self.content if p.type == "text")


class Usage(BaseModel):
    """Token usage as reported by the endpoint."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class ChatResult(BaseModel):
    """A model reply."""

    text: str
    usage: Usage = Usage()
    model: str = ""
    latency_ms: float = 0.0
    truncated: bool = False
    """The server stopped at ``max_tokens`` (``finish_reason: length``): the reply is cut."""


@runtime_checkable
class LLMClient(Protocol):
    """Sends chat messages, returns the reply text and usage."""

    @property
    def name(self) -> str:
        """Backend and model identity, recorded in run specs."""
        ...

    def chat(self, messages: list[ChatMessage], *, temperature: float | None = None,
             max_tokens: int | None = None) -> ChatResult:
        """One completion."""
        ...


class OutputMode(StrEnum):
    """How a reply is constrained to a JSON schema (negotiated per endpoint)."""

    JSON_SCHEMA = "json_schema"
    JSON_OBJECT = "json_object"
    TEXT = "text"


@runtime_checkable
class StructuredChat(Protocol):
    """A client that can constrain a reply to a JSON schema (an optional ability of `LLMClient`).

    ``mode`` is how it constrains replies (None until it has found out).
    """

    mode: OutputMode | None

    def chat_structured(self, messages: list[ChatMessage], schema: dict[str, object], *,
                        temperature: float | None = None, max_tokens: int | None = None) -> ChatResult:
        """One completion whose text is JSON following ``schema`` when the server can ensure it."""
        ...


def text_message(role: Literal["system", "user", "assistant"], text: str) -> ChatMessage:
    """A plain-text message."""
    return ChatMessage(role=role, content=text)


def image_part(path: Path | str) -> ContentPart:
    """An image file as an OpenAI ``image_url`` part (base64 data URL)."""
    p = Path(path)
    mime = mimetypes.guess_type(p.name)[0] or "image/png"
    data = base64.b64encode(p.read_bytes()).decode()
    return ContentPart(type="image_url", image_url={"url": f"data:{mime};base64,{data}"})


def create_llm(settings: LLMSettings, registry: Registry | None = None) -> LLMClient:
    """The configured chat model (``GUIMEM_LLM__BACKEND``, default ``openai``), through the registry."""
    client: LLMClient = (registry or default_registry()).create("llm", settings.backend, settings=settings)
    return client
