"""Induction: sliding windows of length 2–5 over a successful trajectory's actions become skills."""

from __future__ import annotations

import hashlib
import re

from pydantic import BaseModel

from guimem.memory.generalise import (
    Performed,
    direct_path,
    field_placeholders,
    filled_fields,
    generalise_action,
    goal_verb,
    idle_repeats,
    performed_actions,
    presupposed_fields,
    state_masks,
    state_text,
    template_key,
)
from guimem.memory.program import SkillProgram, finds
from guimem.memory.roles import roles_of, unplaced
from guimem.memory.settings import WINDOW_LENGTHS
from guimem.memory.skills.unused import unused_steps
from guimem.types import Action, Observation, Task, Trajectory, mask_text

_SLUG = re.compile(r"[^a-z0-9]+")


class SkillSource(BaseModel):
    """Where a skill came from, enough to replay it for verification."""

    task: str
    seed: int
    episode_id: str
    params: dict[str, str]
    prefix: tuple[Action, ...]
    expected_state: str
    ends_episode: bool


class Candidate(BaseModel):
    """An induced skill before it is stored."""

    key: str
    name: str
    description: str
    program: SkillProgram
    source: SkillSource
    replay: bool = False
    """Every step of it was performed by one ``run_skill`` call (see `induce`)."""


def _slug(actions: tuple[Action, ...]) -> str:
    parts = []
    for a in actions:
        target = ""
        if a.selector is not None:
            target = a.selector.label or a.selector.text or a.selector.resource_id
        parts.append(f"{a.kind.value}_{target}")
    return _SLUG.sub("_", "_".join(parts).lower().replace("{", "").replace("}", "")).strip("_")[:48]


def describe(program: SkillProgram, traj: Trajectory, first: Performed) -> str:
    """An offline description: what the steps do, on which screen, for which kind of goal."""
    steps = "; ".join(a.describe() for a in program.steps)
    goal = mask_text(traj.task.goal, state_masks(traj.task), limit=None)
    return f"{steps}. Screen: {first.before.app} {first.before.location}. For goals like: {goal}"


def _present(steps: tuple[Action, ...], start: Observation, task: Task) -> tuple[int, ...]:
    """The later steps whose element was already on the screen the window started on (`SkillProgram.present`)."""
    args = dict(task.params)
    return tuple(i for i, step in enumerate(steps[1:], start=1)
                 if step.selector is not None and finds(step, args, start))


def induce(traj: Trajectory, lengths: tuple[int, ...] = WINDOW_LENGTHS) -> list[Candidate]:
    """Every window of a *successful* trajectory's direct path (its detours cut, and the steps whose effect the
    rest of the path never used, `unused_steps`; windows with a failed action or with a step that idly repeats the
    one before it, `idle_repeats`, are skipped).

    A window whose every action one ``run_skill`` call performed is marked `Candidate.replay`: it replays a
    routine memory held (the run was logged as a use), so where that memory still holds it, it is no
    demonstration of the episode's task. Counted as one, a task that ran another task's routine would become
    its source, and leave-one-task-out would hide the routine from the task for having worked there."""
    if not traj.outcome.success:
        return []
    performed = direct_path(performed_actions(traj), traj.task)
    unused = unused_steps(performed)
    performed = [p for i, p in enumerate(performed) if i not in unused]
    idle = idle_repeats(performed, traj.task)
    out: list[Candidate] = []
    for length in lengths:
        for start in range(0, len(performed) - length + 1):
            window = performed[start:start + length]
            if any(p.failed for p in window) or any(start <= i < start + length for i in idle):
                continue
            steps = tuple(generalise_action(p.action, traj.task) for p in window)
            ends = start + length == len(performed)
            fields = presupposed_fields(window, traj.task)
            left = unplaced((*(n for s in steps for n in s.params()), *field_placeholders(fields)), traj.task)
            program = SkillProgram.from_templates(steps, roles_of(steps, traj.task, field_placeholders(fields)),
                                                  filled_fields(window[0].before, state_masks(traj.task)),
                                                  serves=goal_verb(traj.task) if ends else "",
                                                  present=_present(steps, window[0].before, traj.task),
                                                  fields=fields, unplaced=left if ends else None)
            key = template_key(steps)
            digest = hashlib.sha1(key.encode()).hexdigest()[:6]
            source = SkillSource(
                task=traj.task.id, seed=traj.task.seed, episode_id=traj.episode_id, params=dict(traj.task.params),
                prefix=tuple(p.action for p in performed[:start]),
                expected_state=state_text(window[-1].after, traj.task),
                ends_episode=ends,
            )
            replay = window[0].run is not None and all(p.run == window[0].run for p in window)
            out.append(Candidate(key=key, name=f"{_slug(steps)}_{digest}", description=describe(program, traj,
                                 window[0]), program=program, source=source, replay=replay))
    return out
