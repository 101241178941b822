"""Segmenting trajectories into subgoals and annotating them (offline rules, or an LLM).

A subgoal is a maximal run of consecutive actions with one intent. It keeps only the screen before
its first action and the screen after its last; its annotation is the intent (``text``), the
visible ``effect``, the condensed ``behaviour`` (selector templates) and ``success``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from guimem.llm import LLMClient, complete_json, text_message
from guimem.llm.prompts import render_screen, template
from guimem.memory.generalise import (
    Performed,
    describe_templates,
    direct_path,
    generalise_action,
    goal_verb,
    performed_actions,
    presupposed_fields,
    state_text,
)
from guimem.memory.roles import roles_of
from guimem.types import Action, Behaviour, Observation, Trajectory


class Granularity(StrEnum):
    """How finely to cut a trajectory (the paper's ablation axis)."""

    ACTION = "action"
    SUBGOAL = "subgoal"
    TASK = "task"


@dataclass(frozen=True)
class Segment:
    """A run of performed actions with the screen before the first and after the last."""

    actions: tuple[Performed, ...]

    @property
    def before(self) -> Observation:
        """The screen the subgoal started on."""
        return self.actions[0].before

    @property
    def after(self) -> Observation:
        """The screen the subgoal ended on."""
        return self.actions[-1].after


def shown_at(segment: Segment, traj: Trajectory) -> set[str]:
    """The ids of the items memory showed at the steps that performed ``segment`` (by their position)."""
    steps = {p.position for p in segment.actions if p.position is not None and 0 <= p.position < len(traj.steps)}
    return {item.id for at in steps for item in traj.steps[at].injection.items}


class Segmenter(Protocol):
    """Cuts a trajectory into segments."""

    def segment(self, traj: Trajectory) -> list[Segment]:
        """The segments, in order; empty when nothing was performed."""
        ...


def _cut(performed: list[Performed], starts: list[int]) -> list[Segment]:
    bounds = [0, *sorted({s for s in starts if 0 < s < len(performed)}), len(performed)]
    return [Segment(tuple(performed[a:b])) for a, b in pairwise(bounds) if b > a]


class OfflineSegmenter:
    """Split where the coarse screen signature changes, or the target moves to another container."""

    def __init__(self, granularity: Granularity = Granularity.SUBGOAL) -> None:
        self.granularity = granularity

    def segment(self, traj: Trajectory) -> list[Segment]:
        """Deterministic cut points."""
        performed = performed_actions(traj)
        if not performed:
            return []
        if self.granularity is Granularity.TASK:
            return [Segment(tuple(performed))]
        if self.granularity is Granularity.ACTION:
            return _cut(performed, list(range(1, len(performed))))
        screens = [state_text(p.before, traj.task, state=False) for p in performed]
        starts = [i for i in range(1, len(performed))
                  if screens[i] != screens[i - 1] or _container(performed[i]) != _container(performed[i - 1])]
        return _cut(performed, starts)


def _container(p: Performed) -> str:
    el = p.before.element(p.action.ref) if p.action.ref else None
    return el.container if el is not None else ""


class Boundaries(BaseModel):
    """The LLM segmenter's reply."""

    boundaries: list[int] = Field(default_factory=list)


class LLMSegmenter:
    """Ask a model where subgoals start (``prompts/segment.txt``); replies are schema-validated."""

    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def segment(self, traj: Trajectory) -> list[Segment]:
        """Cut where the model says (invalid indices are ignored)."""
        performed = performed_actions(traj)
        if len(performed) <= 1:
            return _cut(performed, [])
        lines = [f"{i}. {p.action.describe()}  [{p.before.location}]" for i, p in enumerate(performed)]
        prompt = template("segment").format(goal=traj.task.goal, actions="\n".join(lines),
                                                   last=len(performed) - 1)
        reply = complete_json(self.client, [text_message("user", prompt)], Boundaries)
        return _cut(performed, reply.boundaries)


SuccessLabel = Literal["yes", "no", "uncertain"]


class Annotation(BaseModel):
    """What a subgoal was for, what it did, how (templates), and whether it worked."""

    text: str
    effect: str
    behaviour: Behaviour
    success: SuccessLabel


def behaviour_of(segment: Segment, traj: Trajectory, is_last: bool = False) -> Behaviour:
    """The segment's actions as ref-free templates with task values as placeholders; the last segment of
    its trajectory decided the episode's outcome, so it serves the goal's verb (`Behaviour.serves`)."""
    actions = tuple(generalise_action(p.action, traj.task) for p in segment.actions)
    return Behaviour(actions=actions, roles=roles_of(actions, traj.task),
                     serves=goal_verb(traj.task) if is_last else "",
                     fields=presupposed_fields(segment.actions, traj.task))


def effect_of(segment: Segment, traj: Trajectory) -> str:
    """Which structural lines of the screen appeared or disappeared."""
    before = set(state_text(segment.before, traj.task).splitlines()[2:])
    after = set(state_text(segment.after, traj.task).splitlines()[2:])
    added, removed = sorted(after - before), sorted(before - after)
    if not added and not removed:
        return "no visible change"
    parts = []
    if added:
        parts.append("shows " + ", ".join(added[:4]))
    if removed:
        parts.append("hides " + ", ".join(removed[:4]))
    return "; ".join(parts)


def effect_lines(effect: str) -> tuple[str, ...]:
    """The screen lines an `effect_of` text names (page text, each quoted when the agent reads it)."""
    out: list[str] = []
    for part in effect.split("; "):
        for verb in ("shows ", "hides "):
            if part.startswith(verb):
                out += [line for line in part.removeprefix(verb).split(", ") if line]
    return tuple(out)


class Annotator(Protocol):
    """Annotates one segment."""

    def annotate(self, segment: Segment, traj: Trajectory, is_last: bool) -> Annotation:
        """The annotation of ``segment`` (the last one of its trajectory if ``is_last``)."""
        ...


class OfflineAnnotator:
    """Rules: intent from the actions; success from the episode outcome and whether the effect held.

    A successful episode's segments are ``yes`` unless one of their actions failed or their effect did
    not hold (a detour: a later step brought the screen back to where the segment started, see
    `direct_path`), which are ``uncertain``; in a failed episode the last segment is ``no`` and the
    others ``uncertain`` (or ``no`` if an action failed).
    """

    def __init__(self) -> None:
        self._path: tuple[Trajectory, set[int | None]] | None = None  # the last trajectory's direct path

    def _held(self, segment: Segment, traj: Trajectory) -> bool:
        # by position in the performed actions, cached for this very trajectory: its step indices and
        # episode id are whatever its writer sent, and two of its actions may be equal
        if self._path is None or self._path[0] is not traj:
            self._path = (traj, {p.at for p in direct_path(performed_actions(traj), traj.task)})
        return all(p.at is not None and p.at in self._path[1] for p in segment.actions)

    def annotate(self, segment: Segment, traj: Trajectory, is_last: bool) -> Annotation:
        """Annotate deterministically."""
        behaviour = behaviour_of(segment, traj, is_last)
        any_failed = any(p.failed for p in segment.actions)
        label: SuccessLabel
        if traj.outcome.success:
            label = "uncertain" if any_failed or not self._held(segment, traj) else "yes"
        else:
            label = "no" if (is_last or any_failed) else "uncertain"
        return Annotation(text=describe_templates(behaviour.actions), effect=effect_of(segment, traj),
                          behaviour=behaviour, success=label)


class LLMJudgement(BaseModel):
    """The LLM annotator's reply (the behaviour always comes from the recorded actions)."""

    text: str
    effect: str
    success: SuccessLabel


class LLMAnnotator:
    """Ask a model for intent, effect and success (``prompts/annotate.txt``); behaviour stays recorded."""

    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def annotate(self, segment: Segment, traj: Trajectory, is_last: bool) -> Annotation:
        """Annotate with the model."""
        behaviour = behaviour_of(segment, traj, is_last)
        prompt = template("annotate").format(
            goal=traj.task.goal, outcome="success" if traj.outcome.success else f"failure ({traj.outcome.reason})",
            before=render_screen(segment.before, 40), after=render_screen(segment.after, 40),
            actions="\n".join(a.describe() for a in _actions(segment)),
        )
        judged = complete_json(self.client, [text_message("user", prompt)], LLMJudgement)
        return Annotation(text=judged.text, effect=judged.effect, behaviour=behaviour, success=judged.success)


def _actions(segment: Segment) -> list[Action]:
    return [p.action for p in segment.actions]
