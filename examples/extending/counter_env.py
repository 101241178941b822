"""An environment of your own: a counter app whose task is to press "+" until the display shows a target.

Use it by its import path, e.g. ``guimem eval --env examples.extending.counter_env:CounterEnv``.
"""

from __future__ import annotations

from guimem.envs.base import Transition
from guimem.types import Action, ActionError, ActionErrorCode, ActionKind, Observation, Outcome, Role, Task, UIElement


class CounterEnv:
    """Press "+" exactly ``target`` times (target = seed % 3 + 1), then "Done"."""

    def __init__(self, settings: object = None, screenshots_dir: object = None) -> None:
        self._task: Task | None = None
        self.count = 0
        self.outcome = Outcome(success=False, reason="episode did not end")

    @property
    def name(self) -> str:
        return "counter"

    @property
    def task(self) -> Task:
        assert self._task is not None, "call reset first"
        return self._task

    def reset(self, task: Task) -> Observation:
        target = task.seed % 3 + 1
        self._task = task.model_copy(update={"goal": f"Press + until the display shows {target}, then Done.",
                                             "params": {"target": str(target)}, "app": "counter"})
        self.count, self.outcome = 0, Outcome(success=False, reason="episode did not end")
        return self._observe()

    def _observe(self) -> Observation:
        return Observation(app="counter", location="counter", elements=(
            UIElement(ref="1", role=Role.TEXT, text=str(self.count)),
            UIElement(ref="2", role=Role.BUTTON, text="+", clickable=True),
            UIElement(ref="3", role=Role.BUTTON, text="Done", clickable=True)))

    def step(self, action: Action) -> Transition:
        if action.kind is not ActionKind.TAP or action.ref not in ("2", "3"):
            return Transition(self._observe(), ActionError(code=ActionErrorCode.NO_SUCH_ELEMENT,
                                                           message=f"nothing to tap at {action.ref!r}"))
        if action.ref == "2":
            self.count += 1
            return Transition(self._observe())
        ok = self.count == int(self.task.params["target"])
        self.outcome = Outcome(success=ok, score=1.0 if ok else -1.0, reason="done" if ok else "wrong count")
        return Transition(self._observe(), done=True)

    def evaluate(self) -> Outcome:
        return self.outcome

    def close(self) -> None:
        pass
