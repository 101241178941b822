"""The skill language: a parameterised sequence of action templates, interpreted (never ``exec``'d).

A program is data: parameter names and steps, each an `Action` whose selector and text may hold
``{param}`` placeholders. The interpreter binds arguments, resolves each selector against the live
screen, performs the step, and stops with a typed error when a selector does not resolve.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from guimem.envs.base import Env
from guimem.memory.generalise import TaskScreen, field_placeholders, filled_fields
from guimem.memory.kit import MemoryKit, fields_bound_hold, locate
from guimem.memory.roles import bound_args, placed_here, unplaced
from guimem.memory.table import EventType, payload_json
from guimem.storage.base import EventDraft
from guimem.types import Action, ActionError, ActionErrorCode, ActionKind, Behaviour, Observation, Task, placeholders
from guimem.types.episode import Fields, Roles

MAX_NEEDS = 32
MAX_STEPS = 64
MAX_FIELD = 80


class SkillProgram(BaseModel):
    """A skill's code: parameters and steps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    params: tuple[str, ...] = ()
    steps: tuple[Action, ...]
    roles: Roles = Field(default_factory=dict, max_length=64)
    """Each parameter's role in the goal it was learned on (`guimem.memory.roles`)."""
    needs: tuple[Annotated[str, StringConstraints(max_length=MAX_FIELD)], ...] = Field(default=(), max_length=MAX_NEEDS)
    """Fields that were filled where the program started when it was learned (a window from the middle
    of an episode presupposes the steps before it): it can start only where they are filled."""
    fields: Fields = Field(default_factory=dict, max_length=MAX_NEEDS)
    """What the screen's filled fields held where the program started when it was learned, unnamed fields (an
    editor's document) by role: field name → a ``{placeholder}`` or ``*`` (`generalise.field_values`). It can
    start only where they hold alike (`generalise.fields_hold`): a window that began after the document was
    given the task's text does not start on the untouched document."""
    present: tuple[Annotated[int, Field(ge=1, le=MAX_STEPS)], ...] = Field(default=(), max_length=MAX_STEPS)
    """The later steps whose element was already on the screen where the program started when it was learned
    (a window that began inside an open menu taps one of its items): it can start only where they are too."""
    serves: str = Field(default="", max_length=32, pattern=r"^[a-z]*$")
    """The verb of the goal its last step finished, when that step ended the episode (`Behaviour.serves`)."""
    unplaced: int | None = Field(default=None, ge=0, le=MAX_STEPS)
    """When its last step ended the episode: how many of the values the learning goal showed it placed neither by
    its steps nor in the fields it presupposes (`roles.unplaced`). It starts only where the goal shows no more
    such values (a count, by name): a routine that saved in the home folder, learned where the goal named no
    folder, does not start where the goal names one. None: seen as a step on the way too (the same program in
    the middle of another episode), or learned before this was kept."""

    @classmethod
    def from_templates(cls, steps: tuple[Action, ...], roles: dict[str, str] | None = None,
                       needs: tuple[str, ...] = (), serves: str = "", present: tuple[int, ...] = (),
                       fields: dict[str, str] | None = None, unplaced: int | None = None) -> SkillProgram:
        """A program whose parameters are the placeholders its steps use, in order."""
        names: list[str] = []
        for step in steps:
            names += [n for n in step.params() if n not in names]
        fields = dict(list((fields or {}).items())[:MAX_NEEDS])
        held = set(field_placeholders(fields))
        return cls(params=tuple(names), steps=steps,
                   roles={n: r for n, r in (roles or {}).items() if n in names or n in held},
                   needs=tuple(n[:MAX_FIELD] for n in needs[:MAX_NEEDS]), serves=serves[:32],
                   present=tuple(i for i in present if 0 < i < len(steps)), fields=fields,
                   unplaced=None if unplaced is None else min(unplaced, MAX_STEPS))

    @property
    def behaviour(self) -> Behaviour:
        """The program as a behaviour a policy can follow."""
        return Behaviour(actions=self.steps, roles=self.roles, serves=self.serves)

    def args_for(self, task: Task) -> dict[str, str]:
        """The task's values for this program's parameters: by name, else by role in the task's goal."""
        return bound_args(self.params, self.roles, task)

    def render(self, name: str, doc: str = "") -> str:
        """Readable Python-like code for prompts and ``guimem memory show``."""
        lines = [f"def {name}({', '.join(self.params)}):"]
        if doc:
            lines.append(f'    """{doc}"""')
        lines += [f"    {_render_step(s)}" for s in self.steps]
        return "\n".join(lines)


def _arg(text: str) -> str:
    names = placeholders(text)
    return names[0] if names and text == "{" + names[0] + "}" else repr(text)


def _render_step(step: Action) -> str:
    target = ""
    if step.selector is not None:
        sel = step.selector
        role = sel.role.value if sel.role else "element"
        name = sel.label or sel.text or sel.resource_id
        target = f"{role}({_arg(name)}{', contains=True' if sel.contains else ''}" \
                 f"{f', nth={sel.nth}' if sel.nth is not None else ''})"
    if step.kind is ActionKind.TAP:
        return f"tap({target})"
    if step.kind is ActionKind.TYPE:
        return f"type({target}, {_arg(step.text or '')})"
    if step.kind is ActionKind.KEY:
        return f"key({step.key!r})"
    return step.describe()


@dataclass(frozen=True)
class SkillRun:
    """What running a skill did.

    Attributes:
        observation: The screen afterwards.
        performed: The concrete actions performed (refs and selectors), in order.
        error: Why it stopped early, or None.
        done: Whether the episode ended during the skill.
    """

    observation: Observation
    performed: tuple[Action, ...]
    error: ActionError | None
    done: bool


def can_start(program: SkillProgram, args: dict[str, str], observation: Observation, task: Task) -> bool:
    """Can ``program`` start on this screen of ``task``: are its arguments given, are the fields it needs filled
    and do they hold what they held (`SkillProgram.fields`), and do its first step and the steps it learned
    with their element already there (`SkillProgram.present`) find their element here (with the arguments
    filled)? A routine that finished its episode starts only where it would leave no more of the goal's values
    undone than it did where it was learned (`SkillProgram.unplaced`)."""
    if any(p not in args for p in program.params) or not program.steps:
        return False
    bound = {p: args[p] for p in program.params}  # the rest of ``args`` is the task's, not bound by name or role
    held = field_placeholders(program.fields)
    if program.unplaced is not None and \
            unplaced(placed_here((*program.params, *held), program.roles, task), task) > program.unplaced:
        return False
    if program.needs and not set(program.needs) <= set(filled_fields(observation, args.values())):
        return False
    # a placeholder only a field holds binds like the steps' ones: by name, else by role
    if program.fields and not fields_bound_hold(program.fields, program.roles, TaskScreen(task, observation), bound):
        return False
    return all(finds(program.steps[i], args, observation) for i in (0, *program.present) if i < len(program.steps))


def finds(step: Action, args: dict[str, str], observation: Observation) -> bool:
    """Does ``step`` (its arguments filled) find its element on this screen? A step with no target does."""
    if step.selector is None:
        return True
    # located with the arguments, not bound first: twenty candidates' first steps share a few selectors, and
    # `locate` keeps each answer for this screen by selector and arguments (a bound copy is a new selector)
    res, _ = locate(step.selector, observation, args)
    return res.ok and res.element is not None


def execute(env: Env, program: SkillProgram, args: dict[str, str], observation: Observation,
            name: str = "skill") -> SkillRun:
    """Run ``program`` on ``env`` from ``observation`` with ``args``."""
    missing = [p for p in program.params if p not in args]
    if missing:
        return SkillRun(observation, (), ActionError(code=ActionErrorCode.SKILL_FAILED,
                                                     message=f"{name}: missing arguments {missing}"), False)
    obs = observation
    performed: list[Action] = []
    for i, template in enumerate(program.steps):
        action = template.bind(args)
        if action.selector is not None:
            res, _ = locate(action.selector, obs)  # an element whose id a release renamed is found again
            if not res.ok or res.element is None:
                err = ActionError(code=ActionErrorCode.SKILL_FAILED, action=action.describe(),
                                  message=f"{name} step {i}: {action.selector.describe()} -> {res.status.value}")
                return SkillRun(obs, tuple(performed), err, False)
            action = action.model_copy(update={"ref": res.element.ref})
        result = env.step(action)
        performed.append(action)
        obs = result.observation
        if result.error is not None:
            err = result.error.model_copy(update={"message": f"{name} step {i}: {result.error.message}"})
            return SkillRun(obs, tuple(performed), err, result.done)
        if result.done:
            return SkillRun(obs, tuple(performed), None, True)
    return SkillRun(obs, tuple(performed), None, False)


def record_use(kit: MemoryKit, item_id: str, task: Task, run: SkillRun) -> None:
    """Log one run of a skill item as a ``used`` event (the same payload for every method that runs skills)."""
    kit.store.append_event(EventDraft(EventType.USED.value, item_id, kit.namespace, payload_json(
        {"success": run.error is None, "task": task.id, "seed": task.seed, "steps": len(run.performed)})))
