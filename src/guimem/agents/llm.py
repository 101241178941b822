"""The ``llm`` policy: any chat model as the frozen agent, in two parts you choose independently.

- A **context strategy** (`guimem.agents.context`): ``conact`` folds its own history and keeps exact
  facts with memory actions; ``react`` keeps every step, ``truncate`` the last N, ``none`` nothing.
- A **reply protocol**: `JsonProtocol` (one JSON object: action, thought, intent; a malformed reply is
  shown to the model once more) or `guimem.agents.conact.FivePartProtocol` (ConAct's tagged parts;
  problems are reported in the next step's prompt).

A reply that still cannot be parsed makes the step fail as data (``PARSE_ERROR``); a model endpoint
that fails raises `LLMError`, which the harness records as an infrastructure failure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from guimem.agents.base import Decision, Policy, PolicyInput
from guimem.agents.conact import ConActContext, FivePartProtocol
from guimem.agents.context import AppendContext, ContextStrategy
from guimem.agents.reply import Reply
from guimem.agents.schemas import action_variants, bounded_text, fit_to_budget
from guimem.errors import ConfigError, LLMError, LLMResponseError
from guimem.llm import ChatMessage, LLMClient, create_llm, image_part, text_message, validate_reply
from guimem.llm.base import ChatResult, ContentPart, StructuredChat
from guimem.llm.openai import OpenAIChatClient
from guimem.llm.prompts import render_screen, template
from guimem.settings import GuimemSettings
from guimem.tokens import TiktokenCounter, TokenCounter
from guimem.types import (
    Action,
    ActionError,
    ActionErrorCode,
    ActionKind,
    ModelCall,
    Observation,
    Preflight,
    Step,
    Task,
)
from guimem.types.episode import MAX_RECORDED_REPLY

RETRY_TEMPERATURE_STEP = 0.7
# Our token counts (cl100k) are not the model's: leave room for the difference and the chat template.
COUNT_MARGIN = 1.2
TEMPLATE_TOKENS = 48
MIN_REPLY_TOKENS = 64


class JsonReply(BaseModel):
    """The JSON a model must answer with under `JsonProtocol`."""

    action: Action
    thought: str | None = None
    intent: str | None = None


def parse_reply(text: str) -> JsonReply:
    """Parse a JSON-protocol reply.

    Raises:
        LLMResponseError: No JSON, or the JSON is not a valid reply (the message says which field).
    """
    return validate_reply(text, JsonReply)


class ReplyProtocol(Protocol):
    """How the policy asks and how it reads the answer."""

    name: str
    retries: int

    def system(self) -> str:
        """The system prompt."""
        ...

    def prompt(self, inp: PolicyInput, context: ContextStrategy, errors: list[str]) -> str:
        """The user prompt for this step."""
        ...

    def parse(self, text: str, step: int) -> Reply:
        """The parsed reply (``action`` None and ``errors`` set when it is malformed; never raises)."""
        ...

    def feedback(self, reply: Reply) -> str:
        """What the model is told when its reply is asked for again."""
        ...

    def schema(self, inp: PolicyInput) -> dict[str, object] | None:
        """The JSON schema the reply must follow (None: free text), for servers that can enforce one."""
        ...

    def problems(self, inp: PolicyInput, carried: list[str]) -> list[str]:
        """The problems this step's prompt reports (``carried``: those the last reply left)."""
        ...

    def record(self, context: ContextStrategy, step: int, reply: Reply, raw: str) -> list[str]:
        """Let the context take in the reply; the problems to carry to the next step."""
        ...

    def failure(self, reply: Reply) -> str:
        """The step's error message when no action could be read."""
        ...


def render_history(history: tuple[Step, ...], context: ContextStrategy) -> str:
    """Previous steps as action lines, as many as the context strategy keeps."""
    shown, skipped = context.kept(history)
    if not shown:
        return ""
    lines = [f"{s.index}. {s.action.describe()}" + (f"  -> error: {s.error.message}" if s.error else "")
             for s in shown]
    head = f"Previous steps ({skipped} earlier steps not shown):" if skipped else "Previous steps:"
    return head + "\n" + "\n".join(lines)


def reply_schema(obs: Observation) -> dict[str, object]:
    """The JSON-protocol reply as a schema for this screen: one variant per action kind, with that kind's
    required fields, and ``ref`` limited to the elements on this screen.

    Built from the action vocabulary (`ActionKind`), so what a constrained model can say is what the
    code executes; kept flat (no ``$ref``) for servers' grammar converters.
    """
    variants = action_variants(obs)
    return {"type": "object", "properties": {"thought": bounded_text(160), "intent": bounded_text(80),
                                             "action": {"anyOf": variants}},
            "required": ["thought", "intent", "action"], "additionalProperties": False}


class JsonProtocol:
    """One JSON object per reply; a malformed reply is shown to the model ``retries`` more times."""

    name = "json"

    def __init__(self, retries: int = 1) -> None:
        self.retries = retries

    def system(self) -> str:
        """The JSON-protocol system prompt."""
        return template("llm_system")

    def prompt(self, inp: PolicyInput, context: ContextStrategy, errors: list[str]) -> str:
        """Goal, parameters, memory, kept history, the last error, the screen."""
        error = f"Your previous action failed: {inp.last_error.message}\n" if inp.last_error else ""
        memory = f"Memory (from earlier episodes):\n{inp.injection.text}\n" if inp.injection.text else ""
        return template("llm_step").format(
            goal=inp.task.goal, params=json.dumps(inp.task.params, ensure_ascii=False), memory=memory,
            history=render_history(inp.history, context), error=error, app=inp.observation.app,
            location=inp.observation.location, screen=render_screen(inp.observation),
        )

    def parse(self, text: str, step: int) -> Reply:
        """The action, thought and intent of a JSON reply."""
        try:
            parsed = parse_reply(text)
        except LLMResponseError as exc:
            return Reply(errors=[exc.message])
        return Reply(action=parsed.action, thinking=parsed.thought or "", action_intent=parsed.intent or "")

    def feedback(self, reply: Reply) -> str:
        """Ask again, saying what was wrong."""
        return f"That reply was not valid ({'; '.join(reply.errors)}). Reply with one JSON object as described, " \
               "nothing else."

    def schema(self, inp: PolicyInput) -> dict[str, object] | None:
        """`reply_schema` of the current screen."""
        return reply_schema(inp.observation)

    def problems(self, inp: PolicyInput, carried: list[str]) -> list[str]:
        """None: the prompt shows the last action's error itself."""
        return []

    def record(self, context: ContextStrategy, step: int, reply: Reply, raw: str) -> list[str]:
        """Nothing to keep: the history is rendered from the episode's steps."""
        return []

    def failure(self, reply: Reply) -> str:
        """``unparseable reply: <why>``."""
        return "unparseable reply: " + "; ".join(reply.errors)


STRATEGIES = ("conact", "react", "truncate", "none")


def make_context(name: str, keep_last: int = 5) -> ContextStrategy:
    """``conact``, ``react``, ``truncate`` or ``none``.

    Raises:
        ConfigError: Another name.
    """
    if name == "conact":
        return ConActContext()
    if name in ("react", "truncate", "none"):
        return AppendContext(name, {"react": None, "truncate": keep_last, "none": 0}[name])
    raise ConfigError(f"unknown context strategy {name!r}", suggestion=", ".join(STRATEGIES))


class LLMPolicy:
    """A chat model as the frozen agent.

    Args:
        client: The model endpoint.
        context: The in-task context strategy (default ``react``).
        protocol: The reply protocol (default JSON).
        counter: Token counter for prompt sizes.
        screenshots: Attach the step's screenshot as an image part when there is one.
        context_tokens: The model's context length; None when unknown (no budget is applied).
        max_tokens: The longest reply asked for.
    """

    def __init__(self, client: LLMClient, context: ContextStrategy | None = None,
                 protocol: ReplyProtocol | None = None, counter: TokenCounter | None = None,
                 screenshots: bool = False, context_tokens: int | None = None, max_tokens: int = 1024) -> None:
        self.client = client
        self.context_tokens = context_tokens
        self.max_tokens = max_tokens
        self.context = context or make_context("react")
        self.protocol = protocol or JsonProtocol()
        self.counter = counter or TiktokenCounter()
        self.screenshots = screenshots
        self.prompt_tokens: list[int] = []
        self._errors: list[str] = []

    @classmethod
    def from_settings(cls, settings: GuimemSettings, seed: int = 0, context: str = "react",
                      screenshots: bool = False, **_: object) -> Policy:
        """The configured model (registry); ``conact`` speaks the five-part protocol, the others JSON."""
        strategy = make_context(context)
        protocol: ReplyProtocol = FivePartProtocol() if isinstance(strategy, ConActContext) else JsonProtocol()
        return cls(create_llm(settings.llm), strategy, protocol, TiktokenCounter(settings.token_encoding),
                   screenshots, settings.llm.context_tokens, settings.llm.max_tokens)

    @property
    def name(self) -> str:
        """``llm:<client>:<context>``."""
        return f"llm:{self.client.name}:{self.context.name}"

    def reset(self, task: Task) -> None:
        """New episode."""
        self.context.reset(task)
        self._errors = []
        self.prompt_tokens = []

    def preflight(self) -> str:
        """Check the model endpoint answers (no retries), before any episode.

        Raises:
            LLMError: Nothing answers at the configured endpoint.
        """
        if not isinstance(self.client, Preflight):
            return f"{self.client.name} (no preflight)"
        said = self.client.preflight()
        if self.context_tokens is None and isinstance(self.client, OpenAIChatClient) and self.client.context_length:
            self.context_tokens = self.client.context_length  # the server's own figure, when settings give none
            said += " (context budget from the server)"
        return said

    def _user_message(self, inp: PolicyInput, prompt: str) -> ChatMessage:
        shot = inp.observation.screenshot
        if self.screenshots and shot and Path(shot).exists():
            return ChatMessage(role="user", content=(ContentPart(type="text", text=prompt), image_part(shot)))
        return text_message("user", prompt)

    def _reply_budget(self, prompt_tokens: int) -> int:
        """Tokens left for the reply (``max_tokens`` when the context length is unknown)."""
        if self.context_tokens is None:
            return self.max_tokens
        left = self.context_tokens - int(prompt_tokens * COUNT_MARGIN) - TEMPLATE_TOKENS
        return min(self.max_tokens, left)

    def _ask(self, convo: list[ChatMessage], schema: dict[str, object] | None, temperature: float | None,
             max_tokens: int) -> ChatResult:
        if schema is not None and isinstance(self.client, StructuredChat):
            return self.client.chat_structured(convo, schema, temperature=temperature, max_tokens=max_tokens)
        return self.client.chat(convo, temperature=temperature, max_tokens=max_tokens)

    def act(self, inp: PolicyInput) -> Decision:
        """Ask the model, reading its reply with the protocol; never raises on a bad reply.

        Raises:
            LLMError: The endpoint failed (after the client's bounded retries): an infrastructure
                failure, never an agent one.
        """
        step = inp.step + 1
        prompt = self.protocol.prompt(inp, self.context, self.protocol.problems(inp, self._errors))
        system = self.protocol.system()
        convo = [text_message("system", system), self._user_message(inp, prompt)]
        tokens = self.counter.count(system) + self.counter.count(prompt)
        self.prompt_tokens.append(tokens)
        budget = self._reply_budget(tokens)
        if budget < MIN_REPLY_TOKENS:
            return _failed(ActionErrorCode.MODEL_ERROR, f"context overflow: the prompt needs about {tokens} tokens "
                           f"of the model's {self.context_tokens}, leaving too little for a reply", tokens)
        schema = self.protocol.schema(inp)
        if schema is not None:
            schema = fit_to_budget(schema, budget)
        temperature: float | None = None
        calls: list[ModelCall] = []
        for attempt in range(self.protocol.retries + 1):
            try:
                result = self._ask(convo, schema, temperature, budget)
            except LLMError as exc:
                if exc.status == 400 and "context" in exc.message.lower():  # the server counted more than we did
                    return _failed(ActionErrorCode.MODEL_ERROR, f"context overflow: {exc.message[:200]}", tokens,
                                   tuple(calls))
                raise
            raw = result.text
            reply = self.protocol.parse(raw, step)
            if reply.action is None and result.truncated:
                reply.errors.insert(0, f"the reply was cut at max_tokens ({budget})")
            calls.append(ModelCall(prompt_tokens=result.usage.prompt_tokens,
                                   completion_tokens=result.usage.completion_tokens,
                                   latency_ms=round(result.latency_ms, 3), reply=raw[:MAX_RECORDED_REPLY],
                                   parsed=reply.action is not None, mode=self._mode(schema)))
            if reply.action is not None or attempt == self.protocol.retries:
                break
            convo += [text_message("assistant", raw), text_message("user", self.protocol.feedback(reply))]
            temperature = min(1.0, (temperature or 0.0) + RETRY_TEMPERATURE_STEP)  # the same prompt at 0 repeats itself
        self._errors = self.protocol.record(self.context, step, reply, raw)
        if reply.action is None:
            return _failed(ActionErrorCode.PARSE_ERROR, self.protocol.failure(reply), tokens, tuple(calls))
        error = None
        if reply.action.kind is ActionKind.MEMORY and self._errors:
            error = ActionError(code=ActionErrorCode.MEMORY_ERROR, message="; ".join(self._errors))
        return Decision(action=reply.action, thought=reply.thinking or None, intent=reply.action_intent or None,
                        error=error, prompt_tokens=tokens, model_calls=tuple(calls))

    def _mode(self, schema: dict[str, object] | None) -> str | None:
        if schema is None or not isinstance(self.client, StructuredChat):
            return "text"
        return self.client.mode.value if self.client.mode is not None else None


def _failed(code: ActionErrorCode, message: str, tokens: int, calls: tuple[ModelCall, ...] = ()) -> Decision:
    return Decision(action=Action(kind=ActionKind.WAIT), error=ActionError(code=code, message=message),
                    prompt_tokens=tokens, model_calls=calls)
