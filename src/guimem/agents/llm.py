"""The ``llm`` policy: any OpenAI-compatible chat model as the frozen agent.

Each step the prompt holds the goal, memory's injection, the in-task context (strategy: ``react``
appends every step, ``truncate`` keeps the last N, ``none`` keeps nothing, ``conact`` folds), and
the screen. The reply is parsed into a typed action; a malformed reply is shown to the model once
more with the problem, and if it is still malformed the step fails as data (never a crash).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from guimem.agents.base import Decision, Policy, PolicyInput
from guimem.errors import LLMResponseError
from guimem.llm import ChatMessage, LLMClient, create_llm, image_part, text_message, validate_reply
from guimem.llm.base import ContentPart
from guimem.llm.prompts import render_screen, template
from guimem.settings import GuimemSettings
from guimem.tokens import TiktokenCounter, TokenCounter
from guimem.types import Action, ActionError, ActionErrorCode, ActionKind, Preflight, Step, Task


class Reply(BaseModel):
    """The JSON a model must answer with."""

    action: Action
    thought: str | None = None
    intent: str | None = None


def parse_reply(text: str) -> Reply:
    """Parse a model reply.

    Raises:
        LLMResponseError: No JSON, or the JSON is not a valid reply (the message says which field).
    """
    return validate_reply(text, Reply)


def render_history(history: tuple[Step, ...], strategy: str, keep_last: int) -> str:
    """Previous steps for the ``react`` / ``truncate`` / ``none`` strategies."""
    if strategy == "none" or not history:
        return ""
    shown = history[-keep_last:] if strategy == "truncate" else history
    lines = [f"{s.index}. {s.action.describe()}" + (f"  -> error: {s.error.message}" if s.error else "")
             for s in shown]
    skipped = len(history) - len(shown)
    head = f"Previous steps ({skipped} earlier steps not shown):" if skipped else "Previous steps:"
    return head + "\n" + "\n".join(lines)


@dataclass
class LLMPolicySettings:
    """Prompt and context options of the ``llm`` policy."""

    context: str = "react"
    keep_last: int = 5
    screenshots: bool = False
    retries_on_bad_reply: int = 1


class LLMPolicy:
    """A chat model as the frozen agent.

    Args:
        client: The model endpoint.
        settings: Context strategy and prompt options.
        counter: Token counter for prompt sizes.
    """

    def __init__(self, client: LLMClient, settings: LLMPolicySettings | None = None,
                 counter: TokenCounter | None = None) -> None:
        self.client = client
        self.settings = settings or LLMPolicySettings()
        if self.settings.context not in ("react", "truncate", "none"):
            from guimem.errors import ConfigError

            raise ConfigError(f"unknown context strategy {self.settings.context!r} for the JSON llm policy",
                              suggestion="use react, truncate or none (conact has its own policy: --context conact)")
        self.counter = counter or TiktokenCounter()

    @classmethod
    def from_settings(cls, settings: GuimemSettings, seed: int = 0, context: str = "react",
                      screenshots: bool = False, **_: object) -> Policy:
        """Build with the configured model from the registry (``conact`` uses the five-part protocol)."""
        client = create_llm(settings.llm)
        counter = TiktokenCounter(settings.token_encoding)
        if context == "conact":
            from guimem.agents.conact import ConActContext, ConActPolicy

            return ConActPolicy(client, ConActContext(), counter)
        return cls(client, LLMPolicySettings(context=context, screenshots=screenshots), counter)

    @property
    def name(self) -> str:
        """``llm:<model>``."""
        return f"llm:{self.client.name}:{self.settings.context}"

    def reset(self, task: Task) -> None:
        """Nothing carries over between episodes."""

    def preflight(self) -> str:
        """Check the model endpoint answers (no retries), before any episode.

        Raises:
            LLMError: Nothing answers at the configured endpoint.
        """
        if isinstance(self.client, Preflight):
            return self.client.preflight()
        return f"{self.client.name} (no preflight)"

    def _prompt(self, inp: PolicyInput) -> str:
        error = f"Your previous action failed: {inp.last_error.message}\n" if inp.last_error else ""
        memory = f"Memory (from earlier episodes):\n{inp.injection.text}\n" if inp.injection.text else ""
        return template("llm_step").format(
            goal=inp.task.goal, params=json.dumps(inp.task.params, ensure_ascii=False), memory=memory,
            history=render_history(inp.history, self.settings.context, self.settings.keep_last), error=error,
            app=inp.observation.app, location=inp.observation.location, screen=render_screen(inp.observation),
        )

    def _user_message(self, inp: PolicyInput, prompt: str) -> ChatMessage:
        shot = inp.observation.screenshot
        if self.settings.screenshots and shot and Path(shot).exists():
            return ChatMessage(role="user", content=(ContentPart(type="text", text=prompt), image_part(shot)))
        return text_message("user", prompt)

    def act(self, inp: PolicyInput) -> Decision:
        """Ask the model; tolerate one malformed reply; never raise on a bad reply.

        Raises:
            LLMError: The endpoint failed (after the client's bounded retries): an infrastructure
                failure, never an agent one.
        """
        prompt = self._prompt(inp)
        convo = [text_message("system", template("llm_system")), self._user_message(inp, prompt)]
        tokens = self.counter.count(template("llm_system")) + self.counter.count(prompt)
        problem = ""
        for _ in range(self.settings.retries_on_bad_reply + 1):
            reply = self.client.chat(convo).text
            try:
                parsed = parse_reply(reply)
            except LLMResponseError as exc:
                problem = exc.message
                convo += [text_message("assistant", reply),
                          text_message("user", f"That reply was not valid ({problem}). Reply with one JSON object "
                                               "as described, nothing else.")]
                continue
            return Decision(action=parsed.action, thought=parsed.thought, intent=parsed.intent, prompt_tokens=tokens)
        return _failed(ActionErrorCode.PARSE_ERROR, f"unparseable reply: {problem}", tokens)


def _failed(code: ActionErrorCode, message: str, tokens: int) -> Decision:
    return Decision(action=Action(kind=ActionKind.WAIT), error=ActionError(code=code, message=message),
                    prompt_tokens=tokens)
