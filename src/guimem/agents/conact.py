"""ConAct in-task context: the policy folds its own history and keeps exact facts with memory actions.

State ``S_t = (G, H_t, M_t, L_t)``: the goal, the folded history (each entry covers a range of
steps), the memory (``id → (description, complete raw content)``) and the recent step record
(the last step's UI observation, intent and action). A reply has five tagged parts; parsing is
tolerant: a missing or malformed part becomes an error message in the next prompt, never a crash.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel, ValidationError

from guimem.agents.base import Decision, PolicyInput
from guimem.llm import LLMClient, text_message
from guimem.llm.prompts import render_screen, template
from guimem.tokens import TiktokenCounter, TokenCounter
from guimem.types import Action, ActionError, ActionErrorCode, ActionKind, MemoryOp, Preflight, Task

PARTS = ("thinking", "folding", "tool_call", "ui_observation", "action_intent")


class Fold(BaseModel):
    """``{"range": [s, t], "summary": "..."}``."""

    range: tuple[int, int]
    summary: str


@dataclass
class Reply:
    """A parsed policy output; ``errors`` says what was missing or malformed (and is shown next step)."""

    thinking: str = ""
    fold: Fold | None = None
    action: Action | None = None
    ui_observation: str = ""
    action_intent: str = ""
    errors: list[str] = field(default_factory=list)


def _part(text: str, name: str) -> str | None:
    m = re.search(rf"<{name}>(.*?)</{name}>", text, re.DOTALL)
    return m.group(1).strip() if m else None


def _json_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(exc)


def parse(text: str, step: int) -> Reply:
    """Parse a five-part reply for step ``step`` (1-based). Never raises."""
    reply = Reply(thinking=_part(text, "thinking") or "", ui_observation=_part(text, "ui_observation") or "",
                  action_intent=_part(text, "action_intent") or "")
    for name in ("thinking", "ui_observation", "action_intent"):
        if _part(text, name) is None:
            reply.errors.append(f"<{name}> is missing")
    folding = _part(text, "folding")
    if folding:
        try:
            reply.fold = Fold.model_validate_json(folding)
        except (ValidationError, ValueError) as exc:
            reply.errors.append(f"<folding> is not valid ({_json_error(exc)})")
    elif step >= 2:
        reply.errors.append("<folding> is missing (required from step 2)")
    call = _part(text, "tool_call")
    if call is None:
        reply.errors.append("<tool_call> is missing: no action was taken")
    else:
        try:
            reply.action = Action.model_validate(json.loads(call))
        except (ValidationError, ValueError) as exc:
            reply.errors.append(f"<tool_call> is not a valid action ({_json_error(exc)}): no action was taken")
    return reply


class HistoryEntry(BaseModel):
    """A folded stretch of history."""

    start: int
    end: int
    summary: str


class MemoryEntry(BaseModel):
    """A fact kept verbatim."""

    id: str
    description: str
    content: str


@dataclass
class ContextState:
    """``S_t = (G, H_t, M_t, L_t)``."""

    goal: str
    history: list[HistoryEntry] = field(default_factory=list)
    memory: dict[str, MemoryEntry] = field(default_factory=dict)
    recent: str = ""

    def record_step(self, step: int, line: str) -> None:
        """Add the raw record of a step as its own history entry (until it is folded)."""
        self.history.append(HistoryEntry(start=step, end=step, summary=line))

    def fold(self, fold: Fold) -> str | None:
        """Replace the entries covering ``range`` with one summary; the reason if the range is invalid."""
        s, t = fold.range
        if s > t:
            return f"folding range [{s}, {t}] is invalid: start after end"
        covered = [e for e in self.history if s <= e.start and e.end <= t]
        if not covered:
            return f"folding range [{s}, {t}] covers no history entry"
        if any(e.start < s <= e.end or e.start <= t < e.end for e in self.history):
            return f"folding range [{s}, {t}] cuts through an already folded entry"
        keep = [e for e in self.history if not (s <= e.start and e.end <= t)]
        keep.append(HistoryEntry(start=s, end=t, summary=fold.summary))
        self.history = sorted(keep, key=lambda e: e.start)
        return None

    def apply_memory(self, action: Action) -> str | None:
        """Apply add / update / delete; the reason if it is invalid."""
        op, mid = action.op, action.memory_id
        if op is MemoryOp.ADD:
            mid = mid or f"m{len(self.memory) + 1}"
            if mid in self.memory:
                return f"memory id {mid!r} already exists: use update"
            self.memory[mid] = MemoryEntry(id=mid, description=action.description or "", content=action.text or "")
            return None
        if mid not in self.memory:
            return f"unknown memory id {mid!r}"
        if op is MemoryOp.UPDATE:
            self.memory[mid] = self.memory[mid].model_copy(update={"content": action.text or ""})
        else:
            del self.memory[mid]
        return None


class ContextStrategy(Protocol):
    """How the in-task context is kept and rendered."""

    name: str

    def reset(self, task: Task) -> None:
        """New episode."""
        ...

    def render(self, step: int, screen: str, errors: list[str]) -> str:
        """The user prompt for ``step`` (1-based)."""
        ...

    def update(self, step: int, reply: Reply, raw: str) -> list[str]:
        """Take in the step's reply; return the problems to report next step."""
        ...


def _step_line(step: int, reply: Reply) -> str:
    act = reply.action.describe() if reply.action else "(no action)"
    return f"step {step}: {act}; saw: {reply.ui_observation}; intent: {reply.action_intent}"


def _prompt(goal: str, history: str, memory: str, recent: str, errors: list[str], step: int, screen: str) -> str:
    problems = ("Problems with your last reply:\n" + "\n".join(f"- {e}" for e in errors) + "\n") if errors else ""
    return template("conact_step").format(goal=goal, history=history or "(none)", memory=memory or "(empty)",
                                          recent=recent or "(first step)", errors=problems, step=step, screen=screen)


class ConActContext:
    """``conact``: folded history, verbatim memory, and the last step's record."""

    name = "conact"

    def __init__(self) -> None:
        self.state = ContextState(goal="")

    def reset(self, task: Task) -> None:
        """Empty state for the task's goal."""
        self.state = ContextState(goal=task.goal)

    def render(self, step: int, screen: str, errors: list[str]) -> str:
        """Goal, folded history, memory, recent record, problems, screen."""
        history = "\n".join(f"[{e.start}-{e.end}] {e.summary}" for e in self.state.history)
        memory = "\n".join(f"{m.id} ({m.description}): {m.content}" for m in self.state.memory.values())
        return _prompt(self.state.goal, history, memory, self.state.recent, errors, step, screen)

    def update(self, step: int, reply: Reply, raw: str) -> list[str]:
        """Record the step, apply memory actions and the fold."""
        problems = list(reply.errors)
        self.state.record_step(step, _step_line(step, reply))
        if reply.action is not None and reply.action.kind is ActionKind.MEMORY:
            reason = self.state.apply_memory(reply.action)
            if reason:
                problems.append(reason)
        if reply.fold is not None:
            reason = self.state.fold(reply.fold)
            if reason:
                problems.append(reason)
        self.state.recent = _step_line(step, reply)
        return problems


class AppendContext:
    """``react`` (every step, ``keep`` = None), ``truncate`` (last N), ``none`` (nothing): raw step records."""

    def __init__(self, name: str, keep: int | None) -> None:
        self.name = name
        self.keep = keep
        self.goal = ""
        self.steps: list[str] = []

    def reset(self, task: Task) -> None:
        """Forget the previous episode."""
        self.goal, self.steps = task.goal, []

    def render(self, step: int, screen: str, errors: list[str]) -> str:
        """Goal, the kept raw steps, problems, screen."""
        kept = self.steps if self.keep is None else self.steps[-self.keep:] if self.keep else []
        return _prompt(self.goal, "\n".join(kept), "", "", errors, step, screen)

    def update(self, step: int, reply: Reply, raw: str) -> list[str]:
        """Append the whole reply (what a ReAct agent carries forward)."""
        self.steps.append(f"--- step {step}\n{raw.strip()}")
        return list(reply.errors)


def make_context(name: str, keep_last: int = 5) -> ContextStrategy:
    """``conact``, ``react``, ``truncate`` or ``none``."""
    if name == "conact":
        return ConActContext()
    if name in ("react", "truncate", "none"):
        return AppendContext(name, {"react": None, "truncate": keep_last, "none": 0}[name])
    from guimem.errors import ConfigError

    raise ConfigError(f"unknown context strategy {name!r}", suggestion="conact, react, truncate or none")


class ConActPolicy:
    """An LLM policy speaking the five-part protocol, with a context strategy (``conact`` by default)."""

    def __init__(self, client: LLMClient, context: ContextStrategy | None = None,
                 counter: TokenCounter | None = None) -> None:
        self.client = client
        self.context = context or ConActContext()
        self.counter = counter or TiktokenCounter()
        self._errors: list[str] = []
        self.prompt_tokens: list[int] = []

    @property
    def name(self) -> str:
        """``conact:<model>:<strategy>``."""
        return f"conact:{self.client.name}:{self.context.name}"

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
        if isinstance(self.client, Preflight):
            return self.client.preflight()
        return f"{self.client.name} (no preflight)"

    def act(self, inp: PolicyInput) -> Decision:
        """One step: render, ask, parse tolerantly, update the context."""
        step = inp.step + 1
        errors = self._errors + ([f"your last action failed: {inp.last_error.message}"] if inp.last_error else [])
        memory = f"\n\nMemory from earlier episodes:\n{inp.injection.text}" if inp.injection.text else ""
        prompt = self.context.render(step, render_screen(inp.observation), errors) + memory
        system = template("conact_system")
        tokens = self.counter.count(system) + self.counter.count(prompt)
        self.prompt_tokens.append(tokens)
        # An endpoint failure (LLMError) propagates: it is the infrastructure's, not the agent's.
        raw = self.client.chat([text_message("system", system), text_message("user", prompt)]).text
        reply = parse(raw, step)
        self._errors = self.context.update(step, reply, raw)
        if reply.action is None:
            return _failed(ActionErrorCode.PARSE_ERROR, "; ".join(reply.errors), tokens)
        error = None
        if reply.action.kind is ActionKind.MEMORY and self._errors:
            error = ActionError(code=ActionErrorCode.MEMORY_ERROR, message="; ".join(self._errors))
        return Decision(action=reply.action, thought=reply.thinking, intent=reply.action_intent, error=error,
                        prompt_tokens=tokens)


def _failed(code: ActionErrorCode, message: str, tokens: int) -> Decision:
    return Decision(action=Action(kind=ActionKind.WAIT), error=ActionError(code=code, message=message),
                    prompt_tokens=tokens)
