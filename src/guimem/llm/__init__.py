"""Chat models behind one protocol: any OpenAI-compatible endpoint, plus structured (JSON) replies."""

from guimem.llm.base import (
    ChatMessage,
    ChatResult,
    ContentPart,
    LLMClient,
    Usage,
    create_llm,
    image_part,
    text_message,
)
from guimem.llm.structured import complete_json, extract_json, validate_reply

__all__ = [
    "ChatMessage",
    "ChatResult",
    "ContentPart",
    "LLMClient",
    "Usage",
    "complete_json",
    "create_llm",
    "extract_json",
    "image_part",
    "text_message",
    "validate_reply",
]
