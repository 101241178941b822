"""ConAct in-task context: the policy folds its own history and keeps exact facts with memory actions.

State ``S_t = (G, H_t, M_t, L_t)``: the goal, the folded history (each entry covers a range of
steps), the memory (``id → (description, complete raw content)``) and the recent step record
(the last step's UI observation, intent and action). A reply has five tagged parts; parsing is
tolerant: a missing or malformed part becomes an error message in the next prompt, never a crash.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from guimem.agents.base import PolicyInput
from guimem.agents.context import ContextStrategy, step_prompt
from guimem.agents.reply import Fold, Reply
from guimem.agents.schemas import action_variants, bounded_text
from guimem.llm.prompts import render_screen, template
from guimem.types import Action, ActionKind, MemoryOp, Task

T = TypeVar("T")
PARTS = ("thinking", "folding", "tool_call", "ui_observation", "action_intent")


def _part(text: str, name: str) -> str | None:
    m = re.search(rf"<{name}>(.*?)</{name}>", text, re.DOTALL)
    return m.group(1).strip() if m else None


def _json_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(exc)


def _from_json(text: str) -> str | None:
    """The five parts as tagged text, when the reply is the JSON form (constrained output); else None."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped, strict=False)  # models put raw newlines inside strings
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    parts = []
    for name in PARTS:
        if name in value and value[name] is not None:
            inner = value[name] if isinstance(value[name], str) else json.dumps(value[name])
            parts.append(f"<{name}>{inner}</{name}>")
    return "\n".join(parts)


def parse(text: str, step: int) -> Reply:
    """Parse a five-part reply for step ``step`` (1-based): tagged text, or the same parts as one JSON
    object (what a schema-constrained server returns). Never raises."""
    text = _from_json(text) or text
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
            reply.action = Action.model_validate(json.loads(call, strict=False))
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


def _step_line(step: int, reply: Reply) -> str:
    act = reply.action.describe() if reply.action else "(no action)"
    return f"step {step}: {act}; saw: {reply.ui_observation}; intent: {reply.action_intent}"


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
        return step_prompt(self.state.goal, history, memory, self.state.recent, errors, step, screen)

    def kept(self, items: Sequence[T]) -> tuple[list[T], int]:
        """ConAct shows no raw step records: its history is the folded one."""
        return [], len(items)

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


class FivePartProtocol:
    """ConAct's reply protocol: ``<thinking>``, ``<folding>``, ``<tool_call>``, ``<ui_observation>``,
    ``<action_intent>``; the context strategy renders the prompt; problems go to the next step's prompt
    (no re-ask within a step)."""

    name = "five-part"
    retries = 0

    def system(self) -> str:
        """The ConAct system prompt."""
        return template("conact_system")

    def prompt(self, inp: PolicyInput, context: ContextStrategy, errors: list[str]) -> str:
        """The context's rendering of this step, then memory's injection."""
        memory = f"\n\nMemory from earlier episodes:\n{inp.injection.text}" if inp.injection.text else ""
        return context.render(inp.step + 1, render_screen(inp.observation), errors) + memory

    def parse(self, text: str, step: int) -> Reply:
        """The five parts (never raises)."""
        return parse(text, step)

    def feedback(self, reply: Reply) -> str:
        """Not used: this protocol reports problems at the next step."""
        return "; ".join(reply.errors)

    def schema(self, inp: PolicyInput) -> dict[str, object] | None:
        """The five parts as one JSON object, for servers that constrain replies (text mode keeps the tags)."""
        fold = {"type": "object", "properties": {"range": {"type": "array", "items": {"type": "integer"},
                                                           "minItems": 2, "maxItems": 2},
                                                 "summary": bounded_text(160)},
                "required": ["range", "summary"], "additionalProperties": False}
        return {"type": "object", "properties": {
            "thinking": bounded_text(160), "folding": {"anyOf": [{"type": "null"}, fold]},
            "tool_call": {"anyOf": action_variants(inp.observation, memory=True)},
            "ui_observation": bounded_text(120), "action_intent": bounded_text(80)},
            "required": list(PARTS), "additionalProperties": False}

    def problems(self, inp: PolicyInput, carried: list[str]) -> list[str]:
        """What the last reply left, and the last action's error."""
        return carried + ([f"your last action failed: {inp.last_error.message}"] if inp.last_error else [])

    def record(self, context: ContextStrategy, step: int, reply: Reply, raw: str) -> list[str]:
        """The context records the step, applies memory actions and the fold."""
        return context.update(step, reply, raw)

    def failure(self, reply: Reply) -> str:
        """The parse problems."""
        return "; ".join(reply.errors)
