"""The `Env` protocol every environment implements, and the step-limit wrapper.

An environment is infrastructure: when the browser or device itself fails it raises `EnvError`;
when an *action* fails (no such element, not editable, ...) it returns an `ActionError` value in the
`Transition`, which the agent sees at its next step.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from guimem.types import Action, ActionError, Observation, Outcome, Task
from guimem.types.ui import note_source, noted_source

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Transition:
    """What one step produced.

    Attributes:
        observation: The screen after the action.
        error: Why the action failed, or None.
        done: True when the episode is over (the task ended, or a step limit was hit).
    """

    observation: Observation
    error: ActionError | None = None
    done: bool = False


@runtime_checkable
class Env(Protocol):
    """A GUI environment: reset to a task, act, evaluate, close."""

    @property
    def name(self) -> str:
        """The environment's identity (``miniwob``, ``android:<serial>``, ...)."""
        ...

    @property
    def task(self) -> Task:
        """The current task as instantiated by the last `reset` (goal and params filled in)."""
        ...

    def reset(self, task: Task) -> Observation:
        """Start ``task`` (same id and seed give the same start) and return the first observation."""
        ...

    def step(self, action: Action) -> Transition:
        """Perform one UI action."""
        ...

    def evaluate(self) -> Outcome:
        """How the current episode went so far (final once `step` reported done)."""
        ...

    def close(self) -> None:
        """Release the browser or device connection (idempotent)."""
        ...


Preview = Callable[[Observation], None]


@runtime_checkable
class Previewing(Protocol):
    """An env that shows, while a step is still settling, the observation it will most likely return.

    The episode loop hands it a callback (memory's `Speculating.speculate`), so that recall's embedding of
    the next screen overlaps with the env's own wait. The callback's outcome never changes the step: the
    env calls it at most once per step, ignores what it raises, and returns the settled observation as it
    would without it."""

    def preview_to(self, callback: Preview | None) -> None:
        """Call ``callback`` with the early observation during every later `step` (None: stop)."""
        ...


@runtime_checkable
class ForeseeingStart(Protocol):
    """An env that can say, before `reset`, what the reset will most likely return: the task as it instantiates
    it and its first observation, as the last reset of the same task gave them (a seeded page, an app's start
    screen).

    The episode loop hands them to memory (`guimem.memory.base.Speculating`) before it resets, so that the first
    step's recall is worked out while the env resets; recall takes that work only when the reset returns the
    same task on the same screen, so a wrong guess costs background work and never changes what is recalled."""

    def expected_start(self, task: Task) -> tuple[Task, Observation] | None:
        """The instantiated task and first observation a `reset` with ``task`` will most likely return, or None
        (never started it); looks, changes nothing."""
        ...


class StartMemo:
    """What an env's resets returned, by the task asked (the most recently started, within ``size`` tasks and
    ``elements`` screen elements in all: a desktop app's screen holds hundreds): the guesses of
    `ForeseeingStart.expected_start`.

    Args:
        size: Tasks remembered (the least recently started are forgotten first).
        elements: Screen elements held in all, about 2 KB each (a start bigger than this is not kept).
    """

    def __init__(self, size: int = 512, elements: int = 50_000) -> None:
        self.size = size
        self.elements = elements
        self._starts: OrderedDict[str, tuple[Task, Observation, str | None]] = OrderedDict()
        self._held = 0

    def expected(self, task: Task) -> tuple[Task, Observation] | None:
        """The task and observation the last reset with ``task`` (every field the same) returned, or None; the
        observation's source text noted again (`note_source`), so that recall compares the reset's screen with it
        by text however many screens were noted since."""
        found = self._starts.get(task.model_dump_json())
        if found is None:
            return None
        if found[2] is not None:
            note_source(found[1], found[2])
        return found[0], found[1]

    def remember(self, asked: Task, started: Task, observation: Observation) -> None:
        """Keep what a reset with ``asked`` returned."""
        key = asked.model_dump_json()
        self._forget(key)
        if len(observation.elements) > self.elements:
            return
        self._starts[key] = (started, observation, noted_source(observation))
        self._held += len(observation.elements)
        while len(self._starts) > self.size or self._held > self.elements:
            self._forget(next(iter(self._starts)))

    def _forget(self, key: str) -> None:
        start = self._starts.pop(key, None)
        if start is not None:
            self._held -= len(start[1].elements)


def show_preview(callback: Preview, observation: Observation) -> None:
    """Hand a preview to its callback: what the callback raises is logged, never the step's failure (a preview
    only gives memory a head start). Reading the screen for it is the env's own work: its failures are loud."""
    try:
        callback(observation)
    except Exception as exc:
        log.warning("the preview callback failed (the step goes on without it): %s", exc)


class StepLimit:
    """Wraps an env so that the episode ends after ``max_steps`` steps.

    Args:
        env: The wrapped environment.
        max_steps: Steps allowed per episode.
    """

    def __init__(self, env: Env, max_steps: int) -> None:
        self.env = env
        self.max_steps = max_steps
        self.steps = 0
        self._ended = False

    @property
    def name(self) -> str:
        """The wrapped env's name."""
        return self.env.name

    @property
    def task(self) -> Task:
        """The wrapped env's task."""
        return self.env.task

    def reset(self, task: Task) -> Observation:
        """Reset the wrapped env and the counter."""
        self.steps = 0
        self._ended = False
        return self.env.reset(task)

    def step(self, action: Action) -> Transition:
        """Step, and report done once the limit is reached."""
        result = self.env.step(action)
        self.steps += 1
        if self.steps >= self.max_steps and not result.done:
            self._ended = True
            return Transition(result.observation, result.error, done=True)
        return result

    def evaluate(self) -> Outcome:
        """The wrapped outcome; an unfinished episode cut by the limit fails with that reason."""
        outcome = self.env.evaluate()
        if self._ended and not outcome.success:
            return Outcome(success=False, score=outcome.score, reason=f"step limit ({self.max_steps}) reached")
        return outcome

    def preview_to(self, callback: Preview | None) -> None:
        """Forward to the wrapped env when it previews (`Previewing`); otherwise nothing is previewed."""
        if isinstance(self.env, Previewing):
            self.env.preview_to(callback)

    def expected_start(self, task: Task) -> tuple[Task, Observation] | None:
        """The wrapped env's guess when it makes one (`ForeseeingStart`); otherwise None."""
        return self.env.expected_start(task) if isinstance(self.env, ForeseeingStart) else None

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()
