"""The `Memory` protocol, its query and report types, and the ``none`` baseline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from guimem.types import Injection, Observation, Step, Task, Trajectory


@dataclass(frozen=True)
class RecallQuery:
    """What memory is asked at one step.

    Attributes:
        task: The instantiated task (goal, params, app).
        observation: The current screen.
        step: The 0-based step index.
        history: The steps taken so far.
        episode_id: The running episode.
        round: The evaluation round (0-based).
        slot: Which occurrence of this task within the round this episode is (0-based); STEER
            alternates trial and control on it so both arms see the same task.
    """

    task: Task
    observation: Observation
    step: int = 0
    history: tuple[Step, ...] = ()
    episode_id: str = ""
    round: int = 0
    slot: int = 0


@dataclass
class LearnReport:
    """What `Memory.learn` did with one trajectory."""

    added: int = 0
    merged: int = 0
    dropped: int = 0
    notes: list[str] = field(default_factory=list)


@runtime_checkable
class Memory(Protocol):
    """A long-term memory for a frozen agent."""

    @property
    def name(self) -> str:
        """The method name (``graph``, ``skills``, ...)."""
        ...

    def recall(self, query: RecallQuery) -> Injection:
        """What to show the agent at this step (may be empty, or an explicit abstention)."""
        ...

    def learn(self, trajectory: Trajectory) -> LearnReport:
        """Take in one finished episode."""
        ...

    def end_round(self) -> None:
        """Consolidate at a round boundary (merges, admissions, retirements)."""
        ...

    def stats(self) -> dict[str, int]:
        """Item counts by status, for reports."""
        ...


class NoMemory:
    """The ``none`` baseline: shows nothing, learns nothing. Always run as the control."""

    @property
    def name(self) -> str:
        """``none``."""
        return "none"

    def recall(self, query: RecallQuery) -> Injection:
        """An empty injection."""
        return Injection(method="none")

    def learn(self, trajectory: Trajectory) -> LearnReport:
        """Nothing is kept."""
        return LearnReport()

    def end_round(self) -> None:
        """Nothing to consolidate."""

    def stats(self) -> dict[str, int]:
        """No items."""
        return {}
