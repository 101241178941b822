"""The `Policy` protocol: given the task, the screen, memory's injection and the history, choose an action."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from guimem.types import Action, ActionError, Injection, ModelCall, Observation, Step, Task


@dataclass(frozen=True)
class PolicyInput:
    """Everything a policy may look at for one step.

    Attributes:
        task: The instantiated task (goal and params).
        observation: The current screen.
        injection: What memory put in front of the agent this step.
        history: The steps taken so far in this episode.
        last_error: Why the previous action failed, if it did.
        step: The 0-based step index.
    """

    task: Task
    observation: Observation
    injection: Injection = field(default_factory=Injection)
    history: tuple[Step, ...] = ()
    last_error: ActionError | None = None
    step: int = 0


@dataclass(frozen=True)
class Decision:
    """A policy's choice for one step.

    Attributes:
        action: The action to perform.
        thought: Free-text reasoning (or, for the explorer, why this candidate won).
        intent: What the action is meant to achieve (used to segment subgoals).
        error: A problem in the policy's own output (e.g. an unparseable reply), shown next step.
        prompt_tokens: Tokens sent to the model for this step (0 for offline policies).
        model_calls: Every model request this step made (recorded in the trace).
    """

    action: Action
    thought: str | None = None
    intent: str | None = None
    error: ActionError | None = None
    prompt_tokens: int = 0
    model_calls: tuple[ModelCall, ...] = ()


@runtime_checkable
class Policy(Protocol):
    """A frozen agent."""

    @property
    def name(self) -> str:
        """Identity recorded in trajectories and run specs."""
        ...

    def reset(self, task: Task) -> None:
        """Start a new episode."""
        ...

    def act(self, inp: PolicyInput) -> Decision:
        """Choose the next action."""
        ...
