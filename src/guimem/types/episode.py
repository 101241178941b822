"""Tasks, steps, trajectories and outcomes, and what memory injected at each step."""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from guimem.types.actions import Action, ActionError
from guimem.types.ui import Observation

TRAJECTORY_FORMAT_VERSION = 1


class Task(BaseModel):
    """One task instance: the same ``id`` and ``seed`` reproduce the same episode start."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    id: str
    goal: str
    app: str
    params: dict[str, str] = Field(default_factory=dict)
    seed: int = 0
    max_steps: int | None = None


class InfraComponent(StrEnum):
    """The part of the infrastructure that failed (never the agent's own doing)."""

    ENV = "env"
    MODEL = "model"
    MEMORY = "memory"


class InfraFailure(BaseModel):
    """Why an episode could not be judged: the browser, device, model endpoint or store failed.

    An episode with an infrastructure failure is not an agent failure: it is never counted in
    Pass@k and is run again when the evaluation resumes.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    component: InfraComponent
    error: str
    message: str
    suggestion: str | None = None


class Outcome(BaseModel):
    """How an episode ended.

    Attributes:
        success: The task's own judgement.
        score: The task's raw score.
        reason: The task's words (or the failure's message).
        infra: Set when the episode ended because the infrastructure failed; such an outcome
            says nothing about the agent.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    success: bool
    score: float = 0.0
    reason: str = ""
    infra: InfraFailure | None = None

    @property
    def infra_failed(self) -> bool:
        """True when the infrastructure, not the agent, ended the episode."""
        return self.infra is not None


_Short = Annotated[str, StringConstraints(max_length=64)]
Roles = dict[_Short, _Short]
"""Placeholder → its role in the goal it was learned on (`guimem.memory.roles`), both bounded."""
Fields = dict[_Short, Annotated[str, StringConstraints(pattern=r"^(\*|\{[^{}]{1,62}\})$")]]
"""Field name → ``*`` or a ``{placeholder}`` (`Behaviour.fields`), bounded."""


class Behaviour(BaseModel):
    """Selector-based action templates, so an offline policy can use a memory item, not just read it.

    Attributes:
        actions: Action templates; selectors and text may hold ``{param}`` placeholders.
        avoid: True for warnings: the policy should not take these actions.
        roles: Placeholder → its role in the goal it was learned on (the word before its value: ``to``,
            ``by``, ``text``), so another task binds it by role when its parameters are named otherwise.
        serves: The verb of the goal whose outcome these actions decided (their last one ended the episode
            they were learned from: ``delete`` for the trash tap that finished a delete task), empty for a
            step on the way. Such actions are advice only for a goal whose verb fits
            (`guimem.memory.generalise.verbs_conflict`); a step on the way serves any goal.
        fields: What the screen's filled fields held where these actions were taken: field name → the
            placeholder of the task value it held (``{end}``), or ``*`` for a value the task did not give
            (picked from the page). The actions advise only a screen whose fields hold alike
            (`guimem.memory.generalise.fields_hold`): "Roma" typed and "Romania" picked are two states.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    actions: tuple[Action, ...] = ()
    avoid: bool = False
    roles: Roles = Field(default_factory=dict, max_length=64)
    serves: str = Field(default="", max_length=32, pattern=r"^[a-z]*$")
    fields: Fields = Field(default_factory=dict, max_length=32)


class ItemKind(StrEnum):
    """The one vocabulary of memory item kinds: what an injection carries and what a store holds.

    Stored records are ``node``, ``edge``, ``skill`` or ``knowledge`` (procedures and warnings are
    knowledge records); injections carry ``edge``, ``skill``, ``procedure``, ``warning`` or ``episode``.
    """

    NODE = "node"
    EDGE = "edge"
    SKILL = "skill"
    KNOWLEDGE = "knowledge"
    PROCEDURE = "procedure"
    WARNING = "warning"
    EPISODE = "episode"


class ItemStatus(StrEnum):
    """The one vocabulary of stored item statuses, for every method, surface and export.

    The admission lifecycle (STEER's and the stack's knowledge): ``candidate`` → ``trial`` → ``admitted``
    (→ ``retired``), or ``rejected``; ``quarantined`` holds an item that carries page text addressing the agent
    (only a person moves it). Skills are ``verified``, ``unverified`` or ``rejected`` by replay; graph nodes
    and edges and the baselines' records are ``active``. Staleness is not a stored status: an item is stale on a
    screen none of its elements is on (`Injection.stale`), and may fit the next one.
    """

    CANDIDATE = "candidate"
    TRIAL = "trial"
    ADMITTED = "admitted"
    REJECTED = "rejected"
    RETIRED = "retired"
    QUARANTINED = "quarantined"
    """It carries page text that addresses the agent: held for a person's review, never shown."""
    VERIFIED = "verified"
    UNVERIFIED = "unverified"
    ACTIVE = "active"


class Origin(StrEnum):
    """Who wrote an item's words (provenance of a text span).

    ``action``: guimem's own template over what the agent did (``tap(button "Login")``); ``page``: text
    the page's author wrote (labels, values, screen lines) — data, never advice; ``model``: a model's
    summary; ``import``: brought in from another memory's export; ``human``: a person wrote it.
    """

    ACTION = "action"
    PAGE = "page"
    MODEL = "model"
    IMPORT = "import"
    HUMAN = "human"


class InjectedItem(BaseModel):
    """One memory item as shown to the agent at one step."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    id: str
    kind: ItemKind
    text: str
    behaviour: Behaviour = Field(default_factory=Behaviour)
    score: float = 0.0
    success: bool | None = None
    name: str | None = None
    trial: bool = False
    """Shown inside a trial (not yet verified): rendered under its own heading, never as verified."""
    sources: tuple[str, ...] = ()
    """The tasks whose episodes this item was learned from (the report's transfer matrix reads them)."""
    manual: bool = False
    """Admitted by a person, not by trials: rendered under its own heading, never as verified."""
    origin: Origin = Origin.ACTION
    """Who wrote the item's words (page text inside them is listed in ``page``)."""
    page: tuple[str, ...] = ()
    """The spans of its text that are page text: shown quoted and marked, never as advice."""
    quarantine: str = ""
    """Why it carries text that addresses the agent (kept out of injections unless a person admitted it)."""


class Injection(BaseModel):
    """Everything memory put in front of the agent at one step.

    ``abstained`` is true when memory had candidates but none was compatible with the task, so
    nothing was injected on purpose (recorded, not silent). ``withheld`` lists candidate items kept
    back from this episode as its matched *control* (STEER trials).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    method: str = "none"
    items: tuple[InjectedItem, ...] = ()
    text: str = ""
    tokens: int = 0
    abstained: bool = False
    withheld: tuple[str, ...] = ()
    note: str = ""
    latency_ms: float = 0.0
    quarantined: tuple[str, ...] = ()
    """Ids of items recall found but kept out because they carry text that addresses the agent."""
    unfit: tuple[str, ...] = ()
    """Ids of items recall found but kept out because their actions decided a goal of another verb, or were
    learned where the screen's fields held otherwise (`Behaviour.serves`, `Behaviour.fields`)."""
    stale: tuple[str, ...] = ()
    """Ids of items this task learned that recall found but kept out because none of the elements their steps
    act on is on this screen any more (a changed UI): never injected as if still valid."""
    regrounded: tuple[str, ...] = ()
    """Ids of injected items whose targets were gone and were found again by role and name (their steps act on
    the element found; their text says so)."""

    @property
    def ids(self) -> list[str]:
        """The ids of the injected items, in order."""
        return [item.id for item in self.items]


MAX_RECORDED_REPLY = 2000


class ModelCall(BaseModel):
    """One request to a model, as the step trace records it.

    Attributes:
        prompt_tokens: Tokens the server counted in the request (0 when it did not say).
        completion_tokens: Tokens it generated.
        latency_ms: Wall time of the request.
        reply: The raw reply, cut at ``MAX_RECORDED_REPLY`` characters.
        parsed: Whether the reply could be read as an action.
        mode: How the reply was constrained (``json_schema``, ``json_object``, ``text``), when known.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    reply: str = ""
    parsed: bool = False
    mode: str | None = None


class AheadUse(StrEnum):
    """How a step's recall used the recall its memory started ahead, while the env settled (`Step.recall_ahead`)."""

    TAKEN = "taken"
    """Done ahead for this task and screen and ready: nothing was computed on the agent's time."""
    WAITED = "waited"
    """Done ahead for this task and screen, still under way: waited for (``timings_ms.ahead_wait``), then taken."""
    OTHER_SCREEN = "other_screen"
    """Done ahead for another screen or task (the settled screen was not the preview): computed now."""
    CHANGED = "changed"
    """Done ahead for this screen, but memory changed since: computed now."""
    NONE = "none"
    """Nothing done ahead since the last recall (none asked, or it failed): computed now."""


class Step(BaseModel):
    """One step of an episode: what was seen, what memory showed, what was done, what went wrong.

    ``performed`` lists the primitive actions a ``run_skill`` step executed (empty otherwise), so
    learning can see through skills.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    index: int
    observation: Observation
    action: Action
    thought: str | None = None
    intent: str | None = None
    error: ActionError | None = None
    injection: Injection = Field(default_factory=Injection)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    performed: tuple[Action, ...] = ()
    model_calls: tuple[ModelCall, ...] = ()
    recall_ahead: AheadUse | None = None
    """How recall used its memory's recall ahead (``none`` with speculation off); None: the memory never recalls
    ahead (a method of one's own, steer, the baselines)."""


def new_episode_id() -> str:
    """A fresh, unique episode id."""
    return uuid.uuid4().hex[:16]


class Trajectory(BaseModel):
    """One whole episode; serialised as one JSONL line (format version in ``version``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    version: int = TRAJECTORY_FORMAT_VERSION
    episode_id: str = Field(default_factory=new_episode_id)
    task: Task
    steps: tuple[Step, ...] = ()
    final_observation: Observation | None = None
    outcome: Outcome
    env: str = ""
    policy: str = ""
    memory: str = "none"
    started_at: float = 0.0
    wall_ms: float = 0.0

    @property
    def observations(self) -> list[Observation]:
        """Every observation in order, the final one included when recorded."""
        obs = [s.observation for s in self.steps]
        if self.final_observation is not None:
            obs.append(self.final_observation)
        return obs
