"""From recorded actions to reusable templates: task values become ``{param}`` placeholders.

Memory never stores refs. A recorded action carries a selector (attached by the episode loop);
literals that equal a task parameter (or a quoted goal substring) are replaced by the parameter's
name, so a behaviour learned on one seed binds to the values of another.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol, TypeVar

from guimem.types import (
    Action,
    ActionErrorCode,
    ActionKind,
    Observation,
    Selector,
    Task,
    Trajectory,
    UIElement,
    mask_text,
    screen_signature,
)
from guimem.types.actions import TARGETED_KINDS

# The verb lexicon: what a task can ask to do (the TaskContract's actions). A task value that is one of these
# words (an extractor's ``task: forward``) names what to do, not a volatile name.
VERBS = {
    "click": "click", "press": "click", "tap": "click", "select": "select", "choose": "select", "pick": "select",
    "enter": "enter", "type": "enter", "fill": "enter", "input": "enter", "search": "search", "find": "find",
    "forward": "forward", "reply": "reply", "respond": "reply", "delete": "delete", "remove": "delete",
    "trash": "delete", "star": "star", "mark": "star", "send": "send", "read": "read", "open": "open",
    "login": "login", "log": "login", "sign": "login", "book": "book", "buy": "book", "navigate": "navigate",
    "switch": "navigate", "expand": "expand", "check": "check", "uncheck": "uncheck", "like": "like",
    "retweet": "share", "share": "share", "mute": "mute", "block": "block", "copy": "copy", "paste": "paste",
    "submit": "click", "focus": "focus", "drag": "drag", "use": "use", "set": "set", "close": "close",
    "dismiss": "close",
}
GENERIC = frozenset({"click", "select", "find", "use", "open", "enter", "navigate", "focus", "set"})
"""Verbs that say how, not what: they conflict with no other verb unless a pair is `OPPOSED`."""
OPPOSED = {frozenset(p) for p in (("forward", "reply"), ("delete", "star"), ("send", "read"), ("check", "uncheck"),
                                   ("like", "block"), ("login", "delete"), ("mute", "share"), ("delete", "reply"),
                                   ("delete", "forward"), ("star", "reply"), ("star", "forward"))}
_QUOTED = re.compile(r"[\"“]([^\"”]{1,80})[\"”]")
_GOAL_WORD = re.compile(r"[a-z]+")
MIN_CONTAINED = 3


def task_values(task: Task) -> dict[str, str]:
    """Parameter name → value: the task's params, then quoted goal substrings not already covered."""
    values = {k: v for k, v in task.params.items() if v}
    known = set(values.values())
    for i, quoted in enumerate(_QUOTED.findall(task.goal)):
        if quoted not in known:
            values[f"quoted{i}"] = quoted
            known.add(quoted)
    return values


def state_masks(task: Task) -> list[str]:
    """Values to mask when computing a screen signature for ``task``: its volatile values. A value that is
    a verb of the lexicon (``task: star``) is what the task asks to do; the control it names (the ``star``
    button) is part of the page whichever task opened it, so it stays unmasked and sibling tasks' screens
    read alike — unless the goal quotes it (a username "mark" is a name, not what to do)."""
    quoted = {q.strip().casefold() for q in _QUOTED.findall(task.goal)}
    return [v for v in task_values(task).values()
            if v.strip().casefold() not in VERBS or v.strip().casefold() in quoted]


def goal_verbs(task: Task) -> list[str]:
    """The lexicon verbs of the goal, in order, its volatile values masked first (`state_masks`: a quoted
    name is masked; a task value that is a verb of the lexicon, ``task: forward``, is what to do and stays —
    so is an unquoted name that happens to be a verb, a known limit)."""
    goal = mask_text(task.goal, state_masks(task), limit=None).lower()
    return [VERBS[w] for w in _GOAL_WORD.findall(goal) if w in VERBS]


def _main_verb(verbs: Sequence[str]) -> str:
    specific = [v for v in verbs if v not in GENERIC]
    return specific[0] if specific else (verbs[0] if verbs else "")


def goal_verb(task: Task) -> str:
    """What the goal asks to do: its first verb that is not `GENERIC`, else its first verb ("" for none)."""
    return _main_verb(goal_verbs(task))


def verbs_conflict(a: str, b: str) -> bool:
    """Do two goals' verbs ask for different things: an `OPPOSED` pair, or two different verbs neither of
    which is `GENERIC` (an empty verb conflicts with nothing)."""
    if not a or not b or a == b:
        return False
    return frozenset((a, b)) in OPPOSED or (a not in GENERIC and b not in GENERIC)


class TaskScreen:
    """What the goal-fit and field-state checks read of one task (and one screen), computed once for all
    the items one recall weighs."""

    def __init__(self, task: Task, observation: Observation | None = None) -> None:
        self.task = task
        self.observation = observation

    @cached_property
    def verbs(self) -> list[str]:
        """`goal_verbs` of the task."""
        return goal_verbs(self.task)

    @cached_property
    def verb(self) -> str:
        """`goal_verb` of the task."""
        return _main_verb(self.verbs)

    @cached_property
    def values(self) -> dict[str, str]:
        """`task_values` of the task."""
        return task_values(self.task)

    @cached_property
    def given(self) -> frozenset[str]:
        """The task's values, stripped and case-folded."""
        return frozenset(v.strip().casefold() for v in self.values.values())

    @cached_property
    def filled(self) -> dict[str, tuple[str, ...]]:
        """The screen's filled fields: name (as `field_values` names it, unnamed fields by role) → what each field
        of that name holds (stripped, case-folded; several fields may share a name once task values and digits
        are masked)."""
        out: dict[str, list[str]] = {}
        masks = state_masks(self.task)
        for el in self.observation.elements if self.observation is not None else ():
            value = (el.value or "").strip()
            if el.editable and value and (name := field_name(el, masks, by_role=True)[:MAX_FIELD_NAME]):
                out.setdefault(name, []).append(value.casefold())
        return {n: tuple(v) for n, v in out.items()}


def serves_goal(serves: str, task: Task | TaskScreen) -> bool:
    """Is ``serves`` — the verb of a goal whose outcome some actions decided (`Behaviour.serves`) — what
    ``task``'s goal asks for? A verb that says what (``delete``, ``close``) only where the goal says it; a
    `GENERIC` one (``click``) where it does not conflict; anything where nothing decided (``""``) or the
    goal has no verb of the lexicon."""
    if not serves:
        return True
    view = task if isinstance(task, TaskScreen) else TaskScreen(task)
    if not view.verbs:
        return True
    if serves in GENERIC:
        return not verbs_conflict(serves, view.verb)
    return serves in view.verbs


def state_text(obs: Observation, task: Task, state: bool = True) -> str:
    """The signature a memory embeds for a screen of ``task``."""
    return screen_signature(obs, state_masks(task), state=state)


def state_qualifier(obs: Observation, task: Task, limit: int = 4) -> str:
    """What distinguishes this state of a screen in words: which fields are filled or empty and which
    boxes are checked (task values masked; at most ``limit`` fields), e.g. ``username filled, password
    empty``. Empty when the screen has no such state."""
    masks = state_masks(task)
    parts = []
    for el in obs.elements:
        name = field_name(el, masks)
        if not name:
            continue
        if el.editable:
            parts.append(f"{name} {'filled' if el.value else 'empty'}")
        elif el.checked is not None:
            parts.append(f"{name} {'checked' if el.checked else 'unchecked'}")
    if len(parts) > limit:
        parts = [*parts[:limit], f"{len(parts) - limit} more"]
    return ", ".join(parts)


def field_name(el: UIElement, masks: Iterable[str], by_role: bool = False) -> str:
    """What a screen's field is called, its task values masked (as `state_qualifier` names it); with ``by_role``,
    a field that names nothing (an editor's document) is called by its role in angle brackets (``<textbox>``)."""
    name = mask_text(el.label or el.resource_id or el.text, masks, limit=None)
    return name or (f"<{el.role.value}>" if by_role else "")


MAX_FIELDS = 32
MAX_FIELD_NAME = 64
OTHER_VALUE = "*"


def field_values(obs: Observation, task: Task, by_role: bool = False) -> dict[str, str]:
    """The screen's filled fields: name (task values masked, at most `MAX_FIELD_NAME` characters; unnamed
    fields by role with ``by_role``, see `field_name`) → the placeholder of the task value it holds, or
    `OTHER_VALUE` for a value the task did not give (see `Behaviour.fields`). Of several fields with one name,
    what the first holds; a placeholder too long to store reads as `OTHER_VALUE`."""
    values, masks = task_values(task), state_masks(task)
    out: dict[str, str] = {}
    for el in obs.elements:
        value = (el.value or "").strip()
        if not (el.editable and value) or len(out) >= MAX_FIELDS:
            continue
        name = field_name(el, masks, by_role)[:MAX_FIELD_NAME]
        if name and name not in out:
            template, partial = _general(value, values)
            held = partial or template == value or len(template) > MAX_FIELD_NAME
            out[name] = OTHER_VALUE if held else template
    return out


def field_placeholders(fields: dict[str, str]) -> list[str]:
    """The placeholder names a `Behaviour.fields` mapping holds (`OTHER_VALUE` holds none)."""
    return [v.strip("{}") for v in fields.values() if v != OTHER_VALUE]


def fields_hold(fields: dict[str, str], here: TaskScreen, args: dict[str, str]) -> bool:
    """Do the screen's fields hold what ``fields`` recorded: for each name, some filled field of that name
    holding the task's value for a placeholder (``args``: the placeholders bound for the task, by name or
    role) or a value the task did not give for `OTHER_VALUE`? A task parameter counts only as ``args`` bind it: a
    name the binding refused (`roles.binding`: the task's setup, not a value its goal asks for) holds nothing."""
    if not fields:
        return True
    args = {**{k: v for k, v in here.values.items() if k not in here.task.params}, **args}
    for name, held in fields.items():
        found = here.filled.get(name, ())
        if held == OTHER_VALUE:
            ok = any(v not in here.given for v in found)
        else:
            wanted = args.get(held.strip("{}"))
            ok = wanted is not None and wanted.strip().casefold() in found
        if not ok:
            return False
    return True


def filled_fields(obs: Observation, masks: Iterable[str]) -> tuple[str, ...]:
    """The names of the screen's editable fields that hold a value, sorted."""
    masks = list(masks)
    return tuple(sorted({name for el in obs.elements if el.editable and el.value
                         and (name := field_name(el, masks))}))


def _general(value: str, values: dict[str, str]) -> tuple[str, bool]:
    """``value`` with a task value replaced: (template, whether it matched only as a substring)."""
    norm = value.strip().casefold()
    for name, v in sorted(values.items(), key=lambda kv: -len(kv[1])):
        if norm == v.strip().casefold():
            return "{" + name + "}", False
    for name, v in sorted(values.items(), key=lambda kv: -len(kv[1])):
        if len(v.strip()) >= MIN_CONTAINED and v.strip().casefold() in norm:
            return "{" + name + "}", True
    return value, False


def generalise_selector(sel: Selector, values: dict[str, str]) -> Selector:
    """Replace task values in a selector's text, label and id by placeholders."""
    text, contains = _general(sel.text, values) if sel.text else ("", False)
    label, _ = _general(sel.label, values) if sel.label else ("", False)
    rid, partial = _general(sel.resource_id, values) if sel.resource_id else ("", False)
    if partial:
        rid = sel.resource_id
    if rid == sel.resource_id and (text != sel.text or label != sel.label):
        rid = ""  # the task value names the element; its id was where the value happened to be this time
    nth = None if (text != sel.text or label != sel.label) else sel.nth
    near = _anchor(sel.near, values)
    if near:
        nth = None  # the value's row says which one, whatever its position in another episode
    return sel.model_copy(update={"text": text, "label": label, "resource_id": rid, "contains": contains, "nth": nth,
                                  "near": near})


def _anchor(near: str, values: dict[str, str]) -> str:
    """A selector's anchor as a placeholder when its text carries a task value, else nothing: a literal
    anchor is where this episode's content happened to be."""
    if not near:
        return ""
    template, _ = _general(near, values)
    return template if template != near and template.startswith("{") else ""


def generalise_action(action: Action, task: Task) -> Action:
    """A ref-free template of ``action`` with task values as placeholders."""
    values = task_values(task)
    update: dict[str, object] = {"ref": None}
    if action.selector is not None:
        update["selector"] = generalise_selector(action.selector, values)
    if action.text is not None and action.kind is ActionKind.TYPE:
        template, partial = _general(action.text, values)
        update["text"] = action.text if partial else template  # typed text is a parameter only when it is one
    return action.model_copy(update=update)


def template_key(actions: tuple[Action, ...] | list[Action]) -> str:
    """A canonical string identifying a sequence of templates (for merging identical ones)."""
    return json.dumps([a.model_dump(mode="json", exclude_none=True, exclude_defaults=True) for a in actions],
                      sort_keys=True)


@dataclass(frozen=True)
class Performed:
    """One primitive UI action as it was performed, with the screen before it and after it."""

    step: int
    action: Action
    before: Observation
    after: Observation
    failed: bool
    run: int | None = None
    """The position in the trajectory of the ``run_skill`` call that performed it (None: the agent's own action).
    A position, not the step's ``index``: a stored trajectory's indices are whatever its writer sent."""
    at: int | None = None
    """Its position in `performed_actions`' list (None: built by hand): what tells two equal actions apart."""
    position: int | None = None
    """The position in the trajectory of the step that performed it (None: built by hand)."""


def presupposed_fields(window: Sequence[Performed], task: Task) -> dict[str, str]:
    """What the filled fields held where ``window`` started (`field_values`, unnamed fields such as an editor's
    document by role), but for the fields the window types into itself: what it writes there is its own doing,
    not something it presupposes. Actions learned there advise only where the fields hold alike
    (`fields_hold`): "File; Save As", learned on a document that held the task's text, is no step for a task
    that has yet to write it."""
    if not window:
        return {}
    masks = state_masks(task)
    typed = {field_name(el, masks, by_role=True)[:MAX_FIELD_NAME] for p in window if p.action.kind is ActionKind.TYPE
             for el in p.before.elements if el.ref == p.action.ref}
    return {n: v for n, v in field_values(window[0].before, task, by_role=True).items() if n not in typed}


def performed_actions(traj: Trajectory) -> list[Performed]:
    """The primitive UI actions of a trajectory in order (``run_skill`` steps expanded).

    A targeted action without a selector (a ref that named nothing on its screen, or a hostile
    trajectory) has no portable form and is left out: memory could neither replay nor avoid it.

    A skill that stopped with an error performed its actions up to the one that failed: only the last
    performed action failed, and only when the env refused it (a ``skill_failed`` error means the skill
    stopped *before* acting, its next target gone or its arguments missing: everything it did succeeded).
    """
    obs_after = [s.observation for s in traj.steps[1:]] + [traj.final_observation or traj.steps[-1].observation] \
        if traj.steps else []
    out: list[Performed] = []
    for position, (step, after) in enumerate(zip(traj.steps, obs_after, strict=True)):
        skill = step.action.kind is ActionKind.RUN_SKILL
        actions: tuple[Action, ...] = step.performed if skill else (step.action,)
        refused = step.error is not None and not (skill and step.error.code is ActionErrorCode.SKILL_FAILED)
        for i, a in enumerate(actions):
            if a.kind in TARGETED_KINDS and a.selector is None:
                continue
            if a.is_ui and a.kind is not ActionKind.RUN_SKILL:
                out.append(Performed(step.index, a, step.observation, after, refused and i == len(actions) - 1,
                                     position if skill else None, len(out), position))
    return out


class Step(Protocol):
    """Anything that goes from one screen to another (a performed action, a subgoal)."""

    @property
    def before(self) -> Observation: ...

    @property
    def after(self) -> Observation: ...


StepT = TypeVar("StepT", bound=Step)


def _situation(obs: Observation, task: Task) -> str:
    """A screen's state for telling whether the path came back to it: the signature, and what its fields
    hold and its boxes say (the signature masks values: "Roma" typed and "Romania" picked read alike)."""
    fields = [f"{el.label or el.resource_id}={el.value!r}" for el in obs.elements if el.editable and el.value]
    boxes = [f"{el.label or el.resource_id or el.text}:{el.checked}" for el in obs.elements if el.checked is not None]
    return "\n".join([state_text(obs, task), *fields, *boxes])


def direct_path(performed: Sequence[StepT], task: Task) -> list[StepT]:
    """The steps with their detours cut (loop erasure): when a step that changes the screen brings it back
    to a state the path was in before (it opened a view and closed it again; the same fields holding the
    same values), the steps since the last time the path was in that state are dropped. A step that
    changes nothing is kept, however many come in a row, and so is the last step: the screen after it
    is the episode's end, which may show the page reset."""
    path: list[StepT] = []
    states: list[str] = []  # the state before each step on the path
    seen: dict[int, str] = {}  # one step's screen after is the next one's before: each read once

    def situation(obs: Observation) -> str:
        if id(obs) not in seen:
            seen[id(obs)] = _situation(obs, task)
        return seen[id(obs)]

    for i, p in enumerate(performed):
        path.append(p)
        states.append(situation(p.before))
        if i == len(performed) - 1:
            break
        end = situation(p.after)
        if end != states[-1] and end in states[:-1]:
            k = len(states) - 1 - states[::-1].index(end)
            del path[k:], states[k:]
    return path


def idle_repeats(performed: Sequence[Performed], task: Task) -> set[int]:
    """The positions of steps that repeat the step before them (the same action template) and left the screen as
    it was (`_situation`): the second tap on a sender whose e-mail the first tap opened. Such a step is no part
    of a routine, and a skill that contains one replays it on whatever screen it meets."""
    templates = [generalise_action(p.action, task) for p in performed]
    return {i for i in range(1, len(performed)) if templates[i] == templates[i - 1]
            and _situation(performed[i].before, task) == _situation(performed[i].after, task)}


def describe_templates(actions: tuple[Action, ...] | list[Action]) -> str:
    """Readable one-line description of a template sequence."""
    return "; ".join(a.describe() for a in actions)
