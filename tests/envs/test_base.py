from __future__ import annotations

from guimem.envs.base import Env, StepLimit
from guimem.testing import FormEnv, check_env
from guimem.types import Action, ActionErrorCode, ActionKind, Task

TASK = Task(id="form", goal="", app="form", seed=2)


def test_form_env_passes_the_env_contract():
    env = FormEnv()
    assert check_env(env, TASK) == []
    assert isinstance(env, Env)


def test_contract_checker_catches_an_env_that_raises_on_bad_refs():
    class Raising(FormEnv):
        def step(self, action):
            raise KeyError(action.ref)

    problems = check_env(Raising(), TASK)
    assert any("raised KeyError" in p for p in problems)


def test_step_limit_ends_the_episode_and_says_why():
    env = StepLimit(FormEnv(), max_steps=2)
    obs = env.reset(TASK)
    box = next(e for e in obs.elements if e.editable)
    assert not env.step(Action(kind=ActionKind.TAP, ref=box.ref)).done
    assert env.step(Action(kind=ActionKind.TAP, ref=box.ref)).done
    assert env.evaluate().reason == "step limit (2) reached"


def test_failed_actions_are_data():
    env = FormEnv()
    obs = env.reset(TASK)
    label = next(e for e in obs.elements if not e.editable and not e.clickable)
    result = env.step(Action(kind=ActionKind.TYPE, ref=label.ref, text="x"))
    assert result.error.code is ActionErrorCode.NOT_EDITABLE and not result.done
