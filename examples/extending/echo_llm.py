"""An LLM backend of your own: any class with ``name`` and ``chat`` that the registry can build.

Select it with ``GUIMEM_LLM__BACKEND=examples.extending.echo_llm:WaitingLLM``.
"""

from __future__ import annotations

from guimem.llm import ChatMessage, ChatResult, Usage
from guimem.settings import LLMSettings


class WaitingLLM:
    """Answers every step with a ``wait`` action (a stand-in for a client of your own model server)."""

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self.calls = 0

    @property
    def name(self) -> str:
        return f"waiting:{self.settings.model}"

    def chat(self, messages: list[ChatMessage], *, temperature: float | None = None,
             max_tokens: int | None = None) -> ChatResult:
        self.calls += 1
        text = '{"action": {"kind": "wait"}, "thought": "nothing to do yet"}'
        return ChatResult(text=text, usage=Usage(prompt_tokens=sum(len(m.text().split()) for m in messages),
                                                 completion_tokens=8), model=self.settings.model)
