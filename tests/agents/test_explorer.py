from __future__ import annotations

from guimem.agents.base import PolicyInput
from guimem.agents.explorer import ExplorerPolicy
from guimem.testing import FormEnv
from guimem.types import (
    Action,
    ActionKind,
    Behaviour,
    InjectedItem,
    Injection,
    ItemKind,
    Role,
    Selector,
    Task,
)


def setup(seed=5):
    env = FormEnv()
    obs = env.reset(Task(id="form", goal="", app="form", seed=seed))
    return env, obs


def decide(obs, task, injection=None, policy_seed=0, n=30):
    injection = injection or Injection()
    choices = []
    for i in range(n):
        p = ExplorerPolicy(seed=policy_seed + i)
        p.reset(task)
        choices.append(p.act(PolicyInput(task=task, observation=obs, injection=injection)).action)
    return choices


def test_explorer_is_deterministic_for_a_seed():
    env, obs = setup()
    a = decide(obs, env.task, n=5)
    b = decide(obs, env.task, n=5)
    assert a == b


def test_without_memory_the_explorer_often_submits_too_early():
    env, obs = setup()
    submit = Selector(role=Role.BUTTON, text="Login").resolve(obs).element.ref
    taps = sum(1 for a in decide(obs, env.task) if a.kind is ActionKind.TAP and a.ref == submit)
    assert taps >= 3


def procedure(*actions, avoid=False, success=True):
    return Injection(items=(InjectedItem(id="k1", kind=ItemKind.PROCEDURE, text="how to log in",
                                         behaviour=Behaviour(actions=actions, avoid=avoid), success=success,
                                         score=1.0),))


def test_recalled_behaviour_is_bound_to_params_and_followed():
    env, obs = setup()
    user = Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="username"), text="{username}")
    submit = Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="Login"))
    choices = decide(obs, env.task, procedure(user, submit))
    typed = [a for a in choices if a.kind is ActionKind.TYPE and a.text == env.task.params["username"]]
    assert len(typed) >= 27


def test_warnings_make_the_explorer_avoid_an_action():
    env, obs = setup()
    submit = Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="Login"))
    ref = Selector(role=Role.BUTTON, text="Login").resolve(obs).element.ref
    choices = decide(obs, env.task, procedure(submit, avoid=True))
    assert not any(a.kind is ActionKind.TAP and a.ref == ref for a in choices)


def test_advice_for_and_against_one_action_from_here_cancels_out():
    """A procedure learned on one seed says to type here, a warning learned on another says that failed
    from here: memory cannot tell the two apart, so the explorer decides as it would without it."""
    env, obs = setup()
    user = Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="username"), text="{username}")
    do = InjectedItem(id="p", kind=ItemKind.PROCEDURE, text="type it", behaviour=Behaviour(actions=(user,)),
                      success=True, score=1.0)
    dont = InjectedItem(id="w", kind=ItemKind.WARNING, text="do not type it",
                        behaviour=Behaviour(actions=(user,), avoid=True), score=1.0)
    alone = decide(obs, env.task)
    assert decide(obs, env.task, Injection(items=(do, dont))) == alone
    assert decide(obs, env.task, Injection(items=(do,))) != alone, "either alone still steers"
    assert decide(obs, env.task, Injection(items=(dont,))) != alone
