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


def test_without_memory_the_draw_is_the_seeded_softmax_it_always_was():
    """The coupled draw spends the main stream exactly as ``random.choices`` did, so ``none``'s episodes
    (and every figure measured without memory) are unchanged by the coupling."""
    import math
    import random
    import zlib

    from guimem.agents.explorer import candidate_actions

    env, obs = setup()
    for seed in range(40):
        p = ExplorerPolicy(seed=seed)
        p.reset(env.task)
        got = p.act(PolicyInput(task=env.task, observation=obs, injection=Injection())).action
        cands = candidate_actions(env.task, obs)
        top = max(c.score for c in cands)
        rng = random.Random(zlib.crc32(f"{seed}|{env.task.id}|{env.task.seed}".encode()))
        expected = rng.choices(cands, weights=[math.exp((c.score - top) / p.temperature) for c in cands], k=1)[0]
        assert got == expected.action


def test_memory_moves_a_choice_only_towards_what_it_made_more_likely():
    """A recalled skill adds a candidate, which makes every other action less likely. Coupled, a memory
    run either takes what the memoryless run took or the skill, never a third action (before, the
    shared random number landed on a third action in a third of these draws: issue #33's forward-nl
    regression, where that third action was the wrong sender)."""
    env, obs = setup()
    user = Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="username"), text="{username}")
    skill = Injection(items=(InjectedItem(id="s1", kind=ItemKind.SKILL, name="log_in", text="log in",
                                          behaviour=Behaviour(actions=(user,)), success=True, score=0.3),))
    without = decide(obs, env.task, n=300)
    with_memory = decide(obs, env.task, skill, n=300)
    moved = [b for a, b in zip(without, with_memory, strict=True) if a != b]
    assert len(moved) >= 30, "the skill changed few choices: the test shows nothing"
    assert all(b.kind is ActionKind.RUN_SKILL for b in moved)


def test_a_warning_moves_a_choice_only_off_the_warned_action():
    env, obs = setup()
    submit = Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="Login"))
    ref = Selector(role=Role.BUTTON, text="Login").resolve(obs).element.ref
    without = decide(obs, env.task, n=200)
    with_warning = decide(obs, env.task, procedure(submit, avoid=True), n=200)
    changed = [(a, b) for a, b in zip(without, with_warning, strict=True) if a != b]
    assert changed and all(a.kind is ActionKind.TAP and a.ref == ref for a, _ in changed)


def test_a_skill_that_performed_nothing_leaves_the_next_draw_where_the_memoryless_one_is():
    """A run_skill step that stopped before acting changed nothing on the page: the next step draws the very
    number the memoryless episode draws at this point (before, it drew the one after, as #33's shift did)."""
    from guimem.types import Step

    env, obs = setup()
    skill_step = Step(index=0, observation=obs, action=Action(kind=ActionKind.RUN_SKILL, skill="log_in"), performed=())
    for seed in range(30):
        alone = ExplorerPolicy(seed=seed)
        alone.reset(env.task)
        first = alone.act(PolicyInput(task=env.task, observation=obs, injection=Injection())).action
        p = ExplorerPolicy(seed=seed)
        p.reset(env.task)
        p.act(PolicyInput(task=env.task, observation=obs, injection=Injection()))  # drew for the skill run below
        again = p.act(PolicyInput(task=env.task, observation=obs, history=(skill_step,), injection=Injection()))
        assert again.action == first


def test_a_warning_never_makes_an_action_that_is_not_a_candidate():
    """On a screen with nothing to act on the explorer waits; a warning against an action there must not make
    that action a candidate (and, coupled, the only one)."""
    from guimem.types import Observation, UIElement

    obs = Observation(app="form", elements=(UIElement(ref="1", role=Role.TEXT, text="Nothing to do here"),))
    task = Task(id="form", goal="Press Enter", app="form", seed=1)
    enter = Action(kind=ActionKind.KEY, key="Enter")
    for a in decide(obs, task, procedure(enter, avoid=True), n=10):
        assert a.kind is ActionKind.WAIT
