"""`Rounds`: the round an integration's episodes belong to, each task's slot in it, and its boundary.

A part the BrowserGym and the browser-use integrations both hold (not inherit): they read screens their
own way, and pass `round` and `slot` to every recall, learn through `learn` and end a round through
`end_round`, so both keep one round clock the same way.
"""

from __future__ import annotations

from collections import Counter
from typing import Generic, Protocol, TypeVar

from guimem.memory.base import LearnReport, Memory, RecallQuery
from guimem.types import Injection, Trajectory


class EpisodeMemory(Protocol):
    """The calls an agent loop makes on a memory: a local `guimem.memory.base.Memory`, or a
    `guimem.integrations.browser_use.ServiceMemory`."""

    @property
    def name(self) -> str:
        """The method."""
        ...

    def recall(self, query: RecallQuery) -> Injection:
        """What to show at this step."""
        ...

    def learn(self, trajectory: Trajectory) -> LearnReport:
        """Take in one finished episode."""
        ...

    def end_round(self) -> None:
        """The round boundary."""
        ...

    def committed_round(self) -> int:
        """The last committed round (-1 when none)."""
        ...

    def close(self) -> None:
        """Release the store or the connection."""
        ...


M = TypeVar("M", bound=EpisodeMemory)


class Rounds(Generic[M]):
    """The round clock of an agent loop on one memory.

    Args:
        memory: The memory the loop recalls from and learns into (owned: `close` closes it).
    """

    def __init__(self, memory: M) -> None:
        self.memory = memory
        self.round = max(0, memory.committed_round() + 1)
        """The current round (0-based): the one after the memory's last committed round."""
        self._slots: Counter[str] = Counter()

    def slot(self, task_id: str) -> int:
        """Which occurrence of ``task_id`` in this round the running episode is (0-based)."""
        return self._slots[task_id]

    def learn(self, trajectory: Trajectory) -> LearnReport:
        """Learn a finished episode; the next episode of its task takes the next slot."""
        self._slots[trajectory.task.id] += 1
        return self.memory.learn(trajectory)

    def end_round(self) -> None:
        """Consolidate what was learned since the last boundary and mark the round committed (a memory reopened
        later goes on from the next round); the next round starts with every slot at 0."""
        if isinstance(self.memory, Memory):  # local: its one boundary, learning nothing more (episodes are in)
            self.memory.commit_round(self.round, [])
        else:  # a server's boundary commits its own round
            self.memory.end_round()
        self.round += 1
        self._slots.clear()

    def close(self) -> None:
        """Close the memory (its store, or the connection to the server)."""
        self.memory.close()
