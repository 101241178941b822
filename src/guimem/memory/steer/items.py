"""Knowledge items, their evidence, and the lifecycle state machine (allowed transitions only)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from guimem.errors import LifecycleError
from guimem.memory.program import SkillProgram
from guimem.memory.steer.contract import TaskContract
from guimem.types import Behaviour, Origin
from guimem.types import ItemStatus as Status

ItemStatus = Status
"""The admission lifecycle's statuses are the one vocabulary's (`guimem.types.ItemStatus`); `ALLOWED` says
which of them an item moves between."""


ALLOWED: dict[Status, frozenset[Status]] = {
    ItemStatus.CANDIDATE: frozenset({ItemStatus.TRIAL, ItemStatus.REJECTED}),
    ItemStatus.TRIAL: frozenset({ItemStatus.ADMITTED, ItemStatus.REJECTED}),
    ItemStatus.ADMITTED: frozenset({ItemStatus.RETIRED}),
    ItemStatus.REJECTED: frozenset(),
    ItemStatus.RETIRED: frozenset(),
    ItemStatus.QUARANTINED: frozenset({ItemStatus.ADMITTED, ItemStatus.REJECTED}),  # by a person only
}
UNDER_TEST = frozenset({ItemStatus.CANDIDATE, ItemStatus.TRIAL})


def check_transition(item_id: str, current: ItemStatus, target: ItemStatus) -> None:
    """Raise `LifecycleError` unless ``current → target`` is in the allowed-transition table."""
    allowed = ALLOWED.get(current, frozenset())
    if target not in allowed:
        raise LifecycleError(item_id, current.value, target.value, tuple(sorted(t.value for t in allowed)))


class Scope(StrEnum):
    """How far an item may transfer."""

    TASK = "task"
    APP = "app"
    GLOBAL = "global"


class Applicability(BaseModel):
    """Where an item applies: the app, the source task, its contract, and (warnings) the screen."""

    model_config = ConfigDict(frozen=True)

    app: str
    task: str
    contract: TaskContract
    state: str = ""


class Provenance(BaseModel):
    """The episodes an item came from."""

    episodes: list[str] = Field(default_factory=list)
    tasks: list[str] = Field(default_factory=list)
    outcomes: list[bool] = Field(default_factory=list)


class TrialRecord(BaseModel):
    """One episode in which an item was under test, as trial (injected) or control (withheld)."""

    episode: str
    task: str
    seed: int
    round: int
    arm: Literal["trial", "control"]
    score: float
    effective: bool = False
    historical: bool = False
    """A control from the task's own history: an episode of the task from before the item existed."""


class Evidence(BaseModel):
    """Every trial and control an item has had."""

    records: list[TrialRecord] = Field(default_factory=list)

    def arm(self, name: str) -> list[TrialRecord]:
        """The records of one arm."""
        return [r for r in self.records if r.arm == name]

    @property
    def effective_uses(self) -> int:
        """Trials in which the agent actually used the item."""
        return sum(1 for r in self.arm("trial") if r.effective)

    @property
    def score_difference(self) -> float:
        """Mean trial score minus mean control score (0 when either arm is empty)."""
        trials, controls = self.arm("trial"), self.arm("control")
        if not trials or not controls:
            return 0.0
        return sum(r.score for r in trials) / len(trials) - sum(r.score for r in controls) / len(controls)

    @property
    def harms(self) -> int:
        """Trials that failed where the matched control (same task, same round) succeeded, or where the
        same task and seed succeeded before the item existed (a historical control)."""
        count = 0
        for t in self.arm("trial"):
            matched = [c for c in self.arm("control") if c.task == t.task and
                       (c.round == t.round or (c.historical and c.seed == t.seed))]
            if any(c.score > t.score for c in matched):
                count += 1
        return count


def is_failure(item: KnowledgeItem) -> bool:
    """A failed subgoal (an edge whose every source episode failed): it tells what not to repeat."""
    return item.kind == "edge" and bool(item.provenance.outcomes) and not any(item.provenance.outcomes)


def is_screen_avoid(item: KnowledgeItem) -> bool:
    """An avoid item about one screen of one task: a warning or a failed subgoal, task-scoped, with its state."""
    return item.scope is Scope.TASK and bool(item.applicability.state) and (item.kind == "warning" or
                                                                             is_failure(item))


class KnowledgeItem(BaseModel):
    """A procedure (from successes) or a warning (from failures); in the ``stack`` also a graph edge
    or a verified skill (with its ``name`` and ``program``)."""

    kind: Literal["procedure", "warning", "edge", "skill"]
    applicability: Applicability
    completion: str
    scope: Scope = Scope.TASK
    content: str
    behaviour: Behaviour
    provenance: Provenance
    evidence: Evidence = Field(default_factory=Evidence)
    key: str
    created_round: int = 0
    name: str = ""
    program: SkillProgram | None = None
    transfer: Evidence = Field(default_factory=Evidence)
    """Trials and controls on tasks the item was not learned from (the stack's scope is earned on them)."""
    refused: list[str] = Field(default_factory=list)
    """Tasks it harmed: it is never offered to them again."""
    manual: bool = False
    """Its status was set by a person (``memory admit|retire``), not by trials: never shown as verified."""
    origin: Origin = Origin.ACTION
    """Who wrote ``content`` (guimem's template over the agent's actions, a model, a person)."""
    page: list[str] = Field(default_factory=list)
    """Page text ``content`` carries besides its behaviour's controls (screen lines, an effect)."""
    quarantine: str = ""
    """Why it carries text that addresses the agent: never injected nor admitted by trials."""
    imported: bool = False
    """It came from another memory's export: untrusted until it earns admission here."""
