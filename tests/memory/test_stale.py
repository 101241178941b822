"""When the UI changes (#33): an item whose element is gone is re-grounded (the same role and name under another
id) or withheld as stale — never injected as if still valid — in every method; a skill re-grounds as it runs."""

from __future__ import annotations

import pytest

from guimem.envs.drift import DriftEnv
from guimem.harness.episode import run_episode
from guimem.memory.base import RecallQuery
from guimem.memory.factory import open_memory
from guimem.memory.kit import REGROUNDED_NOTE, locate
from guimem.memory.program import SkillProgram, execute
from guimem.settings import GuimemSettings
from guimem.testing import FormEnv
from guimem.testing.memory import PASSWORD, USER, ScriptedPolicy
from guimem.types import Action, ActionKind, Observation, Role, Selector, Task

METHODS = ["graph", "skills", "steer", "stack", "append_all_similarity", "append_all_operational"]
LOGIN = (ActionKind.TAP, {"role": Role.BUTTON, "text": "Login"}, None)
TASK = Task(id="form", goal="", app="form", seed=9)


def _episode(seed: int):
    return run_episode(FormEnv(), ScriptedPolicy([USER, PASSWORD, LOGIN]),
                       Task(id="form", goal="", app="form", seed=seed, max_steps=6))


def _learned(tmp_path, method: str):
    settings = GuimemSettings()
    settings.embedder.name = "hashing"
    memory = open_memory(method, str(tmp_path / f"{method}.sqlite"), settings, env_factory=FormEnv)
    memory.commit_round(0, [_episode(s) for s in (1, 2, 3)])
    memory.commit_round(1, [_episode(s) for s in (4, 5, 6)])
    return memory


def _recall(memory, env) -> tuple[Observation, list]:
    obs = env.reset(TASK)
    return obs, [memory.recall(RecallQuery(task=env.task, observation=obs, slot=slot)) for slot in (0, 1)]


def _gone(obs: Observation) -> Observation:
    """The form after a redesign that renamed every control: other labels, other ids, other button words."""
    words = {"username": "login name", "password": "secret", "Login": "Sign in", "Cancel": "Back"}
    return obs.model_copy(update={"elements": tuple(
        el.model_copy(update={"label": words.get(el.label, el.label), "text": words.get(el.text, el.text),
                              "resource_id": f"{el.resource_id}-2027" if el.resource_id else ""})
        for el in obs.elements)})


def _targets(item) -> list[Selector]:
    return [a.selector for a in item.behaviour.actions if a.selector is not None]


@pytest.mark.parametrize("method", METHODS)
def test_an_item_whose_elements_are_gone_is_withheld_as_stale_and_one_whose_ids_changed_is_regrounded(
        tmp_path, method):
    memory = _learned(tmp_path, method)
    try:
        _, before = _recall(memory, FormEnv())
        shown = {i.id for inj in before for i in inj.items if _targets(i)}
        assert shown, f"{method} recalls nothing on the page it learned"
        assert not any(inj.stale or inj.regrounded for inj in before)

        renamed = DriftEnv(FormEnv(), "v1", frozenset({"rename"}))
        obs, after = _recall(memory, renamed)
        again = {i.id for inj in after for i in inj.items}
        assert shown <= again, f"{method}: an item whose ids changed is found again"
        for inj in after:
            for item in inj.items:
                if item.id in inj.regrounded:
                    assert item.text.endswith(REGROUNDED_NOTE)
                for sel in _targets(item):  # every step points at an element of this screen, found by its new id
                    res = sel.resolve(obs, TASK.params | renamed.task.params)
                    assert res.ok or not sel.resource_id, (method, sel)
        assert any(inj.regrounded for inj in after), method

        plain = FormEnv()
        changed = _gone(plain.reset(TASK))
        gone = [memory.recall(RecallQuery(task=plain.task, observation=changed, slot=slot)) for slot in (0, 1)]
        assert not any(_targets(i) for inj in gone for i in inj.items), f"{method} injected a stale item"
        assert shown <= {i for inj in gone for i in (*inj.stale, *inj.unfit)} | _unrecalled(memory, method), method
    finally:
        memory.close()


def _unrecalled(memory, method: str) -> set[str]:
    """Skills, which a method does not even find on the changed screen: they are offered only where their first
    step can start (the skills method's and the stack's)."""
    return {i.id for i in _all(memory) if i.what == "skill"}


def _all(memory):
    from guimem.memory.catalog import describe

    return [describe(r) for r in memory.kit.store.query(memory.kit.namespace)]


def test_locate_finds_an_element_again_under_another_id_but_never_guesses_a_renamed_label():
    obs = FormEnv().reset(TASK)
    renamed = DriftEnv(FormEnv(), "v1", frozenset({"rename"})).reset(TASK)
    sel = Selector(role=Role.TEXTBOX, label="username", resource_id="username")
    assert locate(sel, obs) == (sel.resolve(obs), False)
    res, again = locate(sel, renamed)
    assert again and res.ok and res.element is not None and res.element.label == "username"
    assert res.element.resource_id != "username"
    res, again = locate(sel, _gone(obs))
    assert not again and not res.ok


def test_locate_kept_answers_belong_to_their_screen_and_their_arguments():
    obs = FormEnv().reset(TASK)
    gone = _gone(obs)
    sel = Selector(role=Role.TEXTBOX, label="{field}")
    for _ in range(2):  # asked again: the kept answers, each its own screen's and arguments'
        assert locate(sel, obs, {"field": "username"}) == (sel.resolve(obs, {"field": "username"}), False)
        assert locate(sel, obs, {"field": "password"})[0].element.label == "password"
        assert not locate(sel, gone, {"field": "username"})[0].ok
        assert locate(sel, obs)[0].status.value == "unbound"
    for _ in range(3):  # a screen made anew each time, as every step's is: never another screen's answer
        fresh = obs.model_copy(update={"elements": obs.elements[1:]})
        assert locate(sel, fresh, {"field": "username"}) == (sel.resolve(fresh, {"field": "username"}), False)


def test_a_skill_runs_on_a_page_whose_ids_a_release_renamed():
    program = SkillProgram.from_templates((
        Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="username", resource_id="username"),
               text="{username}"),
        Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="password", resource_id="password"),
               text="{password}"),
        Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="Login"))))
    env = DriftEnv(FormEnv(), "v1", frozenset({"rename"}))
    obs = env.reset(TASK)
    run = execute(env, program, dict(env.task.params), obs, name="login")
    assert run.error is None and run.done and env.evaluate().success


def test_a_step_is_located_with_its_arguments_as_its_bound_copy_is():
    """`finds` locates a step's selector with the arguments (a few selectors shared by many candidates keep their
    answers) rather than binding a copy first: the answer is the bound copy's, the re-grounding of a gone id
    included, and an id filled with nothing is not re-grounded."""
    from guimem.memory.program import finds

    obs = FormEnv().reset(TASK)
    renamed = DriftEnv(FormEnv(), "v1", frozenset({"rename"})).reset(TASK)
    steps = [Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="{f}", resource_id="{f}"),
                    text="x"),
             Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="{f}", resource_id="{g}"),
                    text="x"),
             Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="{f}"))]
    for screen in (obs, renamed, _gone(obs)):
        for args in ({"f": "username", "g": ""}, {"f": "password", "g": "password"}, {"f": "Login", "g": "x"}, {}):
            for step in steps:
                bound = step.bind(args).selector
                assert bound is not None
                want = locate(bound, screen)
                assert locate(step.selector, screen, args) == want, (step.describe(), args)  # type: ignore[arg-type]
                assert finds(step, args, screen) == (want[0].ok and want[0].element is not None)


def test_an_id_and_a_name_filled_with_nothing_are_not_regrounded():
    from guimem.types import Bounds, Observation, UIElement

    box = UIElement(ref="e1", role=Role.TEXTBOX, bounds=Bounds(x=0, y=0, w=5, h=5))
    unnamed = Observation(app="a", elements=(box,))
    sel = Selector(role=Role.TEXTBOX, label="{f}", resource_id="{g}")
    args = {"f": "", "g": "y"}  # names nothing once filled: nothing to find again under another id
    assert locate(sel, unnamed, args) == locate(sel.bind(args), unnamed) == (sel.bind(args).resolve(unnamed), False)
