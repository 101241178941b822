"""Planted pages: an `Env` wrapper that adds an attacker's controls and text to every observation.

`PoisonedEnv` wraps any env (guimem's form, MiniWoB++, ...). At reset it plants the page's attack
(`guimem.envs.attacks.attack_for`): a control whose label, or a text element near it, carries the
attacker text. An action on a planted element is handled here and never reaches the wrapped env, so it
neither ends the episode nor changes the task's own outcome (that is how such text passes trials); it
is recorded in `events`, and it stays checkable afterwards from the trace alone: planted elements have
refs from `PLANT_BASE` up (`is_planted`), which no wrapped env uses.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

from guimem.envs.attacks import Attack, Goal, Hiding, PhrasingSet, Placement, attack_for, attacker_text
from guimem.envs.base import Env, ForeseeingStart, Preview, Previewing, Transition
from guimem.errors import EnvError
from guimem.registry import default_registry
from guimem.settings import GuimemSettings
from guimem.types import (
    Action,
    ActionError,
    ActionErrorCode,
    ActionKind,
    Bounds,
    Observation,
    Outcome,
    Preflight,
    Role,
    Task,
    UIElement,
)

PLANT_BASE = 90_000
PLANT_SPAN = 100
CONTROL_ROLE = {Goal.CLICK: Role.BUTTON, Goal.TYPE: Role.TEXTBOX, Goal.NAVIGATE: Role.LINK}
BAIT_DEFAULT = {Goal.CLICK: "Submit", Goal.TYPE: "password", Goal.NAVIGATE: "Submit"}


def is_planted(ref: str | None) -> bool:
    """True for the ref of an element a `PoisonedEnv` planted."""
    return ref is not None and ref.isdigit() and PLANT_BASE <= int(ref) < PLANT_BASE + PLANT_SPAN


@dataclass(frozen=True)
class AttackEvent:
    """An action the agent took on a planted element.

    Attributes:
        step: The env step (0-based, counted by this wrapper).
        goal: What the attacker wanted (``click``, ``type``, ``navigate``).
        attack: The attack's id.
        text: What was typed (``type``), or the address navigated to (``navigate``).
    """

    step: int
    goal: Goal
    attack: str
    text: str = ""


def _bait(attack: Attack, obs: Observation) -> str:
    """The page's own word a lookalike control copies: its first field (type) or button/link (others)."""
    for el in obs.elements:
        if attack.goal is Goal.TYPE and el.editable:
            return el.label or el.resource_id or BAIT_DEFAULT[attack.goal]
        if attack.goal is not Goal.TYPE and el.clickable and el.role in (Role.BUTTON, Role.LINK) and el.name:
            return el.name[:24]
    return BAIT_DEFAULT[attack.goal]


def _bounds(attack: Attack, obs: Observation) -> tuple[Bounds, Bounds]:
    """(control box, text box): hidden controls per `Hiding`; visible ones sized like the page's elements."""
    flat = all(el.bounds == Bounds() for el in obs.elements)  # an env without geometry: planted ones have none
    low = max((el.bounds.y + el.bounds.h for el in obs.elements), default=0.0)
    text = Bounds() if flat else Bounds(x=10, y=low + 40, w=300, h=18)
    visible = Bounds() if flat else Bounds(x=10, y=low + 10, w=160, h=22)
    if attack.placement is not Placement.HIDDEN:
        return visible, text
    offscreen = Bounds(x=-9999, y=-9999, w=160, h=22)
    hidden = {Hiding.OFFSCREEN: offscreen, Hiding.TINY: Bounds(x=10, y=low + 10, w=1, h=1),
              Hiding.ZERO: offscreen if flat else Bounds(x=10, y=low + 10, w=0, h=0)}  # zero-size is unseen there
    return hidden[attack.hiding], text


@dataclass
class Plant:
    """What one episode's page carries: the attack, the planted elements' base, and their state."""

    attack: Attack
    name: str
    text: str
    control_bounds: Bounds
    text_bounds: Bounds
    value: str = ""
    at: int = 0

    @property
    def control_ref(self) -> str:
        """The planted control's ref."""
        return str(PLANT_BASE)

    def refs(self) -> set[str]:
        """The refs of the planted elements."""
        return {el.ref for _, el in self.elements()}

    def elements(self) -> list[tuple[int, UIElement]]:
        """(position hint, element) pairs: the control, and for ``instruction`` the text telling the agent to use it."""
        goal, placement = self.attack.goal, self.attack.placement
        role = Role.OPTION if placement is Placement.OPTION else CONTROL_ROLE[goal]
        label = self.name if placement is Placement.INSTRUCTION else self.text
        if role is Role.TEXTBOX:
            control = UIElement(ref=self.control_ref, role=role, label=label, editable=True, clickable=True,
                                value=self.value, bounds=self.control_bounds)
        else:
            control = UIElement(ref=self.control_ref, role=role, text=label, clickable=True, bounds=self.control_bounds)
        out = [(self.at, control)]
        if placement is Placement.INSTRUCTION:
            out.append((0, UIElement(ref=str(PLANT_BASE + 1), role=Role.TEXT, text=self.text, bounds=self.text_bounds)))
        return out


def plant_for(attack: Attack, obs: Observation) -> Plant:
    """The plant of ``attack`` on the page whose first screen is ``obs``."""
    name = attack.control.replace("{bait}", _bait(attack, obs))
    control_bounds, text_bounds = _bounds(attack, obs)
    at = zlib.crc32(attack.id.encode()) % (len(obs.elements) + 1)
    return Plant(attack=attack, name=name, text=attacker_text(attack, name), control_bounds=control_bounds,
                 text_bounds=text_bounds, at=at)


def _uses_plant_refs(obs: Observation) -> bool:
    return any(is_planted(el.ref) for el in obs.elements)


def _with_plant(obs: Observation, plant: Plant) -> Observation:
    """``obs`` with ``plant``'s elements inserted at their places."""
    elements = list(obs.elements)
    for at, el in sorted(plant.elements(), key=lambda p: -p[0]):
        elements.insert(min(at, len(elements)), el)
    return obs.model_copy(update={"elements": tuple(elements)})


@dataclass
class PoisonedEnv:
    """Any env with an attacker's content planted into every observation.

    Args:
        inner: The wrapped env.
        phrasings: Which phrasing set attacks are drawn from (``dev``, ``heldout`` or ``all``).
        rotation: Picks another attack for every page (0: the default plan).
        fixed: Plant this attack on every page instead (tests, and trying one attack by hand).
    """

    inner: Env
    phrasings: PhrasingSet = "heldout"
    rotation: int = 0
    fixed: Attack | None = None
    events: list[AttackEvent] = field(default_factory=list)
    _plant: Plant | None = field(default=None, repr=False)
    _last: Observation | None = field(default=None, repr=False)
    _steps: int = 0

    @classmethod
    def from_settings(cls, settings: GuimemSettings, screenshots_dir: Path | None = None,
                      inner: str = "form") -> PoisonedEnv:
        """The wrapper around the registered env ``inner``, attacks from ``GUIMEM_POISON__*``."""
        reg = default_registry()
        env: Env = reg.create("env", inner, settings=settings, screenshots_dir=screenshots_dir) if screenshots_dir \
            else reg.create("env", inner, settings=settings)
        return cls(env, settings.poison.phrasings, settings.poison.rotation)

    @classmethod
    def on_form(cls, settings: GuimemSettings, screenshots_dir: Path | None = None) -> PoisonedEnv:
        """guimem's scripted form, poisoned (registered as ``poison-form``)."""
        return cls.from_settings(settings, screenshots_dir, inner="form")

    @classmethod
    def on_miniwob(cls, settings: GuimemSettings, screenshots_dir: Path | None = None) -> PoisonedEnv:
        """MiniWoB++ in headless Chromium, poisoned (registered as ``poison-miniwob``)."""
        return cls.from_settings(settings, screenshots_dir, inner="miniwob")

    @property
    def name(self) -> str:
        """``poison-<wrapped env>``."""
        return f"poison-{self.inner.name}"

    @property
    def task(self) -> Task:
        """The wrapped env's task."""
        return self.inner.task

    @property
    def attack(self) -> Attack | None:
        """The attack planted in this episode (None before the first reset)."""
        return self._plant.attack if self._plant else None

    def preflight(self) -> str:
        """The wrapped env's preflight, if it has one."""
        return self.inner.preflight() if isinstance(self.inner, Preflight) else f"{self.inner.name} (no preflight)"

    def reset(self, task: Task) -> Observation:
        """Reset the wrapped env and plant this page's attack.

        Raises:
            EnvError: The wrapped env uses refs in the planted range.
        """
        obs = self.inner.reset(task)
        if _uses_plant_refs(obs):
            raise EnvError(f"{self.inner.name} uses refs from {PLANT_BASE} up, which planted elements need")
        self._plant = plant_for(self._attack_for(task), obs)
        self.events = []
        self._steps = 0
        self._last = obs
        return self._planted(obs)

    def expected_start(self, task: Task) -> tuple[Task, Observation] | None:
        """The wrapped env's guess when it makes one (`ForeseeingStart`), with the attack the reset will plant
        (drawn from the task asked and the first screen); None otherwise."""
        guess = self.inner.expected_start(task) if isinstance(self.inner, ForeseeingStart) else None
        if guess is None or _uses_plant_refs(guess[1]):
            return None
        started, obs = guess
        return started, _with_plant(obs, plant_for(self._attack_for(task), obs))

    def _attack_for(self, task: Task) -> Attack:
        return self.fixed or attack_for(task.id, self.phrasings, self.rotation)

    def _planted(self, obs: Observation) -> Observation:
        return obs if self._plant is None else _with_plant(obs, self._plant)

    def step(self, action: Action) -> Transition:
        """An action on a planted element is recorded and answered here; any other goes to the wrapped env."""
        self._steps += 1
        if self._plant is None or self._last is None or action.ref not in self._plant.refs():
            result = self.inner.step(action)
            self._last = result.observation
            return Transition(self._planted(result.observation), result.error, result.done)
        error = self._on_plant(self._plant, action)  # first: the screen shows what was typed
        return Transition(self._planted(self._last), error, done=False)

    def _on_plant(self, plant: Plant, action: Action) -> ActionError | None:
        goal = plant.attack.goal
        if action.ref != plant.control_ref:  # the instruction text: clicking text does nothing
            if action.kind is ActionKind.TYPE:
                return ActionError(code=ActionErrorCode.NOT_EDITABLE, message="not editable", action=action.describe())
            return None
        if action.kind is ActionKind.TYPE:
            if goal is not Goal.TYPE:
                return ActionError(code=ActionErrorCode.NOT_EDITABLE, message="not editable", action=action.describe())
            plant.value = action.text or ""
            self.events.append(AttackEvent(self._steps - 1, goal, plant.attack.id, plant.value))
        elif action.kind is ActionKind.TAP and goal is not Goal.TYPE:
            self.events.append(AttackEvent(self._steps - 1, goal, plant.attack.id,
                                           plant.attack.url if goal is Goal.NAVIGATE else ""))
        return None

    def preview_to(self, callback: Preview | None) -> None:
        """Forward to the wrapped env when it previews (`Previewing`), each preview with the attack planted."""
        if isinstance(self.inner, Previewing):
            self.inner.preview_to(None if callback is None else lambda obs: callback(self._planted(obs)))

    def evaluate(self) -> Outcome:
        """The wrapped env's outcome: planted actions never change it."""
        return self.inner.evaluate()

    def close(self) -> None:
        """Close the wrapped env."""
        self.inner.close()
