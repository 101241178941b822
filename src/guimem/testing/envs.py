"""A scripted form app (an `Env` with no browser) and the contract checker every env must pass."""

from __future__ import annotations

import os
import time

from guimem.envs.base import Env, Transition
from guimem.errors import EnvError
from guimem.types import (
    Action,
    ActionError,
    ActionErrorCode,
    ActionKind,
    Observation,
    Outcome,
    Role,
    Task,
    UIElement,
    screen_signature,
)


class FormEnv:
    """A one-screen form: fill every field with the task's value, then press the submit button.

    Pressing submit with a wrong or missing value fails the episode (like MiniWoB); pressing the
    distractor button fails it too. Refs are renumbered per seed, as real envs do per episode.

    Args:
        fields: Field names (become params, labels and ids).
        submit: The submit button's text.
        app: The app name in observations.
    """

    def __init__(self, fields: tuple[str, ...] = ("username", "password"), submit: str = "Login",
                 app: str = "form", step_delay_s: float = 0.0) -> None:
        self.fields = fields
        self.step_delay_s = step_delay_s
        self.submit = submit
        self.app = app
        self.values: dict[str, str] = {}
        self.actions: list[Action] = []
        self._task: Task | None = None
        self._done = False
        self._outcome = Outcome(success=False, reason="episode did not end")
        self.closed = 0

    @classmethod
    def from_settings(cls, settings: object = None, screenshots_dir: object = None) -> FormEnv:
        """Build for the registry (no settings; ``GUIMEM_FORM_STEP_DELAY_S`` slows each step, so a test can
        act while episodes are running, e.g. kill a worker node mid-episode)."""
        return cls(step_delay_s=float(os.environ.get("GUIMEM_FORM_STEP_DELAY_S", "0") or 0))

    @property
    def name(self) -> str:
        """``form``."""
        return "form"

    @property
    def task(self) -> Task:
        """The instantiated task."""
        if self._task is None:
            raise EnvError("reset first")
        return self._task

    def _base(self) -> int:
        return 100 * (self.task.seed % 7 + 1)

    def reset(self, task: Task) -> Observation:
        """New episode: values derive from the seed."""
        params = {f: f"{f[:3]}{task.seed}x" for f in self.fields}
        quoted = " and ".join(f'the {f} "{v}"' for f, v in params.items())
        self._task = task.model_copy(update={"goal": f"Enter {quoted}, then press {self.submit}.",
                                             "params": params, "app": self.app})
        self.values = dict.fromkeys(self.fields, "")
        self._done = False
        self._outcome = Outcome(success=False, reason="episode did not end")
        return self.observe()

    def observe(self) -> Observation:
        """The current screen."""
        base = self._base()
        els: list[UIElement] = []
        for i, f in enumerate(self.fields):
            els.append(UIElement(ref=str(base + 2 * i), role=Role.TEXT, text=f.capitalize()))
            els.append(UIElement(ref=str(base + 2 * i + 1), role=Role.TEXTBOX, label=f, resource_id=f,
                                 editable=True, clickable=True, value=self.values[f]))
        els.append(UIElement(ref=str(base + 50), role=Role.BUTTON, text=self.submit, clickable=True))
        els.append(UIElement(ref=str(base + 51), role=Role.BUTTON, text="Cancel", clickable=True))
        return Observation(app=self.app, location="form", elements=tuple(els))

    def step(self, action: Action) -> Transition:
        """Apply an action."""
        if self.step_delay_s:
            time.sleep(self.step_delay_s)
        self.actions.append(action)
        if self._done:
            return Transition(self.observe(), ActionError(code=ActionErrorCode.ENV_REJECTED, message="episode over"),
                              done=True)
        obs = self.observe()
        el = obs.element(action.ref) if action.ref else None
        if action.kind in (ActionKind.TAP, ActionKind.TYPE) and el is None:
            return Transition(obs, ActionError(code=ActionErrorCode.NO_SUCH_ELEMENT,
                                               message=f"no element with ref {action.ref}", action=action.describe()))
        if action.kind is ActionKind.TYPE and el is not None:
            if not el.editable:
                return Transition(obs, ActionError(code=ActionErrorCode.NOT_EDITABLE, message="not editable"))
            self.values[el.resource_id] = action.text or ""
        elif action.kind is ActionKind.TAP and el is not None and el.role is Role.BUTTON:
            ok = el.text == self.submit and all(self.values[f] == self.task.params[f] for f in self.fields)
            self._done = True
            self._outcome = Outcome(success=ok, score=1.0 if ok else -1.0, reason="submitted" if ok else "wrong")
        return Transition(self.observe(), None, self._done)

    def evaluate(self) -> Outcome:
        """The outcome so far."""
        return self._outcome

    def close(self) -> None:
        """Count closes (idempotent)."""
        self.closed += 1


def check_env(env: Env, task: Task) -> list[str]:
    """Check ``env`` against the `Env` contract; returns the problems found (empty when it passes).

    Checks: reset returns an observation with unique refs and an instantiated goal; the same seed
    gives the same screen; a bad ref comes back as an `ActionError` (not an exception); evaluate
    returns an `Outcome`; close can be called twice.
    """
    problems: list[str] = []
    first = env.reset(task)
    refs = [e.ref for e in first.elements]
    if len(refs) != len(set(refs)):
        problems.append("reset: refs are not unique")
    if not env.task.goal:
        problems.append("reset: the task goal was not instantiated")
    goal = env.task.goal
    again = env.reset(task)
    if screen_signature(again) != screen_signature(first) or env.task.goal != goal:
        problems.append("reset: the same task and seed gave a different start")
    try:
        result = env.step(Action(kind=ActionKind.TAP, ref="999999999"))
    except Exception as exc:  # the contract is exactly that nothing escapes here
        problems.append(f"step: a bad ref raised {type(exc).__name__} instead of returning an ActionError")
    else:
        if result.error is None:
            problems.append("step: a bad ref did not produce an ActionError")
    if not isinstance(env.evaluate(), Outcome):
        problems.append("evaluate: did not return an Outcome")
    env.close()
    env.close()
    return problems
