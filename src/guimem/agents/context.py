"""In-task context strategies of the LLM policy: ``conact`` folds (see `guimem.agents.conact`);
``react`` keeps every step, ``truncate`` the last N, ``none`` nothing — the selection written once here.
`guimem.agents.llm.make_context` builds one by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from guimem.agents.reply import Reply
from guimem.llm.prompts import template
from guimem.types import Task

T = TypeVar("T")


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

    def kept(self, items: Sequence[T]) -> tuple[list[T], int]:
        """Which earlier step records a prompt shows (and how many it leaves out)."""
        ...


def step_prompt(goal: str, history: str, memory: str, recent: str, errors: list[str], step: int, screen: str) -> str:
    problems = ("Problems with your last reply:\n" + "\n".join(f"- {e}" for e in errors) + "\n") if errors else ""
    return template("conact_step").format(goal=goal, history=history or "(none)", memory=memory or "(empty)",
                                          recent=recent or "(first step)", errors=problems, step=step, screen=screen)


class AppendContext:
    """``react`` (every step, ``keep`` = None), ``truncate`` (last N), ``none`` (nothing): raw step records."""

    def __init__(self, name: str, keep: int | None) -> None:
        self.name = name
        self.keep = keep
        self.goal = ""
        self.steps: list[str] = []

    def kept(self, items: Sequence[T]) -> tuple[list[T], int]:
        """All items (react), the last ``keep`` (truncate) or none; and how many were left out."""
        shown = list(items) if self.keep is None else list(items[-self.keep:]) if self.keep else []
        return shown, len(items) - len(shown)

    def reset(self, task: Task) -> None:
        """Forget the previous episode."""
        self.goal, self.steps = task.goal, []

    def render(self, step: int, screen: str, errors: list[str]) -> str:
        """Goal, the kept raw steps, problems, screen."""
        return step_prompt(self.goal, "\n".join(self.kept(self.steps)[0]), "", "", errors, step, screen)

    def update(self, step: int, reply: Reply, raw: str) -> list[str]:
        """Append the whole reply (what a ReAct agent carries forward)."""
        self.steps.append(f"--- step {step}\n{raw.strip()}")
        return list(reply.errors)
