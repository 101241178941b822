"""The `Memory` contract, its query and report types, the parts methods compose, and ``none``.

The contract every memory method keeps (``guimem.testing.check_memory`` checks it):

- ``recall(query)`` never changes what later recalls return within a round; on an empty memory it
  returns an empty injection. Injections fit the method's token budget.
- ``learn(trajectory)`` takes a finished episode; what it teaches is recalled only after the next
  round boundary (``end_round``): every episode of a round reads the same snapshot.
- ``commit_round(r, trajectories)`` is the one boundary (the evaluation's and the service's): learn
  from the round's episodes in order, consolidate, and record that round ``r`` is committed — all
  in one store transaction, so an interrupted run neither loses nor repeats it. An episode that
  does not survive its own JSON form (e.g. a non-finite number) is refused and reported, the rest
  are learned; one whose ``learn`` raises a data error rolls the whole boundary back and raises
  `EpisodeRefusedError` naming it (the caller sets it aside and reopens the memory: a boundary
  never half-commits). ``committed_round()`` says which round was committed last (-1 for none).
- What is committed survives ``close()`` and reopening; ``close()`` may be called twice.
- With ``exclude_source_task``, nothing learned from a task is recalled for that same task.

Optional abilities are small protocols checked with ``isinstance``: `SkillRunner` (methods whose
items the agent can execute) and `Curator` (methods with an admission lifecycle).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pydantic import ValidationError

from guimem.envs.base import Env, Transition
from guimem.errors import DataError, EpisodeRefusedError
from guimem.memory.ahead import RecallAhead
from guimem.memory.hostile import acted_on_hostile
from guimem.memory.keys import RoundClock
from guimem.memory.kit import MemoryKit
from guimem.storage import Store
from guimem.storage.base import Change, EventDraft, Versioned
from guimem.types import Action, Injection, Observation, Step, Task, Trajectory


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
    """What `Memory.learn` did with one trajectory (``queued``: kept for the round boundary)."""

    added: int = 0
    merged: int = 0
    dropped: int = 0
    queued: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Refused:
    """An episode a round boundary did not learn, and why."""

    index: int
    episode_id: str
    reason: str


@dataclass
class RoundReport:
    """What a round boundary did: the totals of what it learned, and the episodes it refused."""

    round: int
    learned: LearnReport = field(default_factory=LearnReport)
    refused: list[Refused] = field(default_factory=list)

    def add(self, report: LearnReport) -> None:
        """Count one learned episode's report in the totals."""
        self.learned.added += report.added
        self.learned.merged += report.merged
        self.learned.dropped += report.dropped
        self.learned.queued += report.queued


def _problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}"[:300] if where else str(first["msg"])[:300]
    text = exc.message if isinstance(exc, DataError) else str(exc)
    return (text.splitlines() or [type(exc).__name__])[0][:300]


def unlearnable(trajectory: Trajectory) -> str | None:
    """Why an episode cannot be learned, or None: it must survive its JSON form, the form every store keeps."""
    try:
        Trajectory.model_validate_json(trajectory.model_dump_json())
    except ValueError as exc:
        return _problem(exc)
    return None


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

    def commit_round(self, round_index: int, trajectories: Sequence[Trajectory]) -> RoundReport:
        """Learn from a round's episodes in order, consolidate, and mark the round committed (one transaction).

        Raises:
            EpisodeRefusedError: An episode's ``learn`` failed on its data; nothing was committed.
        """
        ...

    def committed_round(self) -> int:
        """The last committed round (-1 when none)."""
        ...

    def close(self) -> None:
        """Release the store (idempotent)."""
        ...


@runtime_checkable
class SkillRunner(Protocol):
    """A memory whose items the agent can execute (``run_skill`` actions)."""

    def run_skill(self, env: Env, action: Action, task: Task, observation: Observation
                  ) -> tuple[Transition, tuple[Action, ...]]:
        """Run the named skill; returns the transition and the primitive actions performed."""
        ...


@runtime_checkable
class Curator(Protocol):
    """A memory with an admission lifecycle that people can curate."""

    def set_status(self, item_id: str, status: str, reason: str) -> None:
        """Move an item to ``status`` (checked against the lifecycle, logged as an event)."""
        ...


@runtime_checkable
class Refreshable(Protocol):
    """A memory that can catch up with its store without reopening (evaluation workers, each round)."""

    def refresh(self) -> bool:
        """Apply what was committed to the store since this memory opened or last refreshed, reading only
        that; False when it cannot (the caller then reopens the memory)."""
        ...


@runtime_checkable
class Speculating(Protocol):
    """A memory that can start, ahead of `recall`, the work recall will need for a screen it may be asked about.

    The episode loop calls `speculate` with the screen the env expects to return while the env is still
    settling (`guimem.envs.base.Previewing`); recall then finds that work done when the settled screen is the
    same. It must never change what recall returns, only when its work happens."""

    def speculate(self, task: Task, observation: Observation) -> None:
        """Start the work (embedding the screen; graph, skills and the stack recall on it whole,
        `guimem.memory.ahead.RecallAhead`) without waiting for it; never raises for the caller."""
        ...


@runtime_checkable
class SpeculatingQueries(Protocol):
    """A `Speculating` memory whose recall reads more of the query than its task and screen (the stack: the
    episode's trial slot). The episode loop knows the whole query (the expected first screen,
    `guimem.envs.base.ForeseeingStart`, and each step's preview) and gives it here, not to `Speculating.speculate`."""

    def speculate_query(self, query: RecallQuery) -> None:
        """Start the work recall will need for ``query``, as `Speculating.speculate` does for a screen."""
        ...


class Cursor:
    """How far a memory's view of its namespace has read the store (`Versioned` stores only).

    Args:
        store: The memory's store.
        namespace: The memory's namespace.
    """

    def __init__(self, store: Store, namespace: str) -> None:
        self.store = store
        self.namespace = namespace
        self.position = store.position(namespace) if isinstance(store, Versioned) else None

    def pending(self) -> tuple[list[Change], int] | None:
        """What was written since (and the position it reaches), or None when the store cannot tell."""
        if self.position is None or not isinstance(self.store, Versioned):
            return None
        now = self.store.position(self.namespace)
        return (self.store.changes(self.namespace, self.position, now) if now != self.position else []), now


class RoundLog:
    """The round boundary in a memory's own store: a part every stored method holds (not inherits).

    Args:
        store: The memory's store (owned: `close` closes it).
        namespace: The memory's namespace in it.
        screen: Set aside (do not learn) an episode that acted on page text addressing the agent
            (`guimem.memory.hostile.acted_on_hostile`), logging a ``quarantined`` event with the reason.
    """

    def __init__(self, store: Store, namespace: str, screen: bool = False) -> None:
        self.store = store
        self.namespace = namespace
        self.screen = screen
        self.clock = RoundClock(store, namespace)
        self._closed = False

    def committed(self) -> int:
        """The last committed round (-1 when none)."""
        return self.clock.committed()

    def commit(self, learn: Callable[[Trajectory], LearnReport], end_round: Callable[[], None], round_index: int,
               trajectories: Sequence[Trajectory]) -> RoundReport:
        """Learn in order (refusing what cannot be learned), consolidate, mark — in one transaction.

        Raises:
            EpisodeRefusedError: ``learn`` raised a data error on one episode; the transaction is rolled back.
        """
        report = RoundReport(round_index)
        with self.store.transaction():
            for index, t in enumerate(trajectories):
                reason = unlearnable(t)
                if reason is None and self.screen:
                    reason = self._set_aside(t)
                if reason is not None:
                    report.refused.append(Refused(index, t.episode_id, reason))
                    continue
                try:
                    report.add(learn(t))
                except (ValueError, DataError) as exc:
                    raise EpisodeRefusedError(index, t.episode_id, _problem(exc)) from None
            end_round()
            self.clock.mark(round_index)
        return report

    def _set_aside(self, trajectory: Trajectory) -> str | None:
        """Why an episode must not be learned (it acted on hostile page text), logged for review; or None."""
        found = acted_on_hostile(trajectory)
        if found is None:
            return None
        reason = f"set aside: {found}"
        self.store.append_event(EventDraft("quarantined", None, self.namespace, json.dumps(
            {"episode": trajectory.episode_id, "task": trajectory.task.id, "reason": reason})))
        return reason

    def close(self) -> None:
        """Close the store once."""
        if not self._closed:
            self._closed = True
            self.store.close()


class StoredRounds(ABC):
    """The round-boundary members of the contract, for a method that holds a `RoundLog` as ``rounds``.

    The one ``commit_round`` of the stored methods: it calls the method's own ``learn`` and ``end_round``
    inside the log's transaction, then the hook `_after_commit` outside it (so a derived file written
    there, e.g. an index cache entry, is stamped with the committed store). ``close`` calls the hook
    `_before_close`, then closes the store. A method overrides the hooks, never ``commit_round`` or
    ``close`` (and calls no ``super()``): the walk from any boundary ends here and in `RoundLog.commit`.
    """

    rounds: RoundLog
    _ahead: RecallAhead | None = None
    """What the method recalls ahead with, if it does (`guimem.memory.ahead`): its lock is held around the round's
    transaction, taken before it (`_committing`), and it is closed before `_before_close`."""

    @abstractmethod
    def learn(self, trajectory: Trajectory) -> LearnReport:
        """Take in one finished episode."""

    @abstractmethod
    def end_round(self) -> None:
        """Consolidate at the round boundary."""

    def commit_round(self, round_index: int, trajectories: Sequence[Trajectory]) -> RoundReport:
        """Learn the round's episodes, consolidate and mark the round, in one transaction; then `_after_commit`."""
        with self._committing():
            report = self.rounds.commit(self.learn, self.end_round, round_index, trajectories)
        self._after_commit()
        return report

    def committed_round(self) -> int:
        """The last committed round (-1 when none)."""
        return self.rounds.committed()

    def close(self) -> None:
        """`_before_close`, then close the store (idempotent); warm-ups of its index files under way stop."""
        if self._ahead is not None:
            self._ahead.close()
        kit = getattr(self, "kit", None)  # the shipped methods hold one; a method of one's own may not
        if isinstance(kit, MemoryKit):
            kit.let_go_warmups()
        self._before_close()
        self.rounds.close()

    def _committing(self) -> AbstractContextManager[None]:
        """Held around the round's transaction, taken before it: a method that recalls ahead holds its lock
        (`RecallAhead.changing`: a round's learning changes what recall reads), so that lock is always taken before
        the store's. A caller that opens a store transaction first (the service's writes) must not let the memory
        speculate: the service never previews, so no recall runs ahead there."""
        return self._ahead.changing() if self._ahead is not None else nullcontext()

    @property
    def recalled_ahead(self) -> int:
        """Recalls that found their answer done ahead, on the same screen (`Speculating.speculate`)."""
        return self._ahead.recalls_taken if self._ahead is not None else 0

    def _after_commit(self) -> None:  # noqa: B027 - a hook: doing nothing is the default
        """After a committed round, outside its transaction: refresh derived files (nothing by default)."""

    def _before_close(self) -> None:  # noqa: B027 - a hook: doing nothing is the default
        """Before the store closes (a second ``close`` too): write what is left unsaved (nothing by default)."""


class RoundBuffer:
    """Episodes learned during a round, applied at its boundary, so recall sees one snapshot per round."""

    def __init__(self) -> None:
        self._pending: list[Trajectory] = []

    def add(self, trajectory: Trajectory) -> LearnReport:
        """Keep an episode for the boundary."""
        self._pending.append(trajectory)
        return LearnReport(queued=1)

    def drain(self) -> list[Trajectory]:
        """The kept episodes, in the order they came; the buffer is empty afterwards."""
        out, self._pending = self._pending, []
        return out


class NoMemory:
    """The ``none`` baseline: shows nothing, learns nothing. Always run as the control.

    Args:
        rounds: Where its round boundaries are recorded (a store), so a resumed run knows them.
    """

    def __init__(self, rounds: RoundLog | None = None) -> None:
        self.rounds = rounds
        self._committed = -1

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

    def commit_round(self, round_index: int, trajectories: Sequence[Trajectory]) -> RoundReport:
        """Nothing to learn; the round is marked (in the store, when there is one)."""
        report = RoundReport(round_index)
        if self.rounds is not None:
            report = self.rounds.commit(self.learn, self.end_round, round_index, trajectories)
        self._committed = round_index
        return report

    def committed_round(self) -> int:
        """The last committed round (-1 when none)."""
        return self.rounds.committed() if self.rounds is not None else self._committed

    def close(self) -> None:
        """Release the store, if any (idempotent)."""
        if self.rounds is not None:
            self.rounds.close()
