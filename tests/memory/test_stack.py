from __future__ import annotations

from guimem.memory.settings import MemorySpec
from guimem.memory.stack import StackMemory
from guimem.memory.steer.items import ItemStatus
from guimem.memory.steer.trials import assign
from guimem.testing import FormEnv
from guimem.types import ItemKind, Task
from tests.memory.conftest import LOGIN, PASS, USER, episode
from tests.memory.test_steer import form_query


def test_stack_proposes_every_kind_through_one_lifecycle(kit):
    mem = StackMemory(kit, MemorySpec(), env_factory=FormEnv)
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    mem.learn(episode([LOGIN], seed=2))
    mem.end_round()
    kinds = {it.kind for it, _ in mem.items().values()}
    assert {"procedure", "warning", "skill"} <= kinds
    assert {st for _, st in mem.items().values()} == {ItemStatus.CANDIDATE}


def test_stack_respects_the_token_budget_and_kind_caps(kit):
    mem = StackMemory(kit, MemorySpec(token_budget=25), env_factory=FormEnv)
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    mem.end_round()
    for item_id in list(mem.items()):
        mem.set_status(item_id, "trial", "test")
        mem.set_status(item_id, "admitted", "test")
    inj = mem.recall(form_query(4))
    assert inj.items and inj.tokens <= 25 + 10
    per_kind = {}
    for i in inj.items:
        per_kind[i.kind] = per_kind.get(i.kind, 0) + 1
    assert per_kind.get(ItemKind.PROCEDURE, 0) <= 1 and per_kind.get(ItemKind.SKILL, 0) <= 2


def test_stack_withholds_candidates_from_controls_and_abstains_when_nothing_fits(kit):
    mem = StackMemory(kit, MemorySpec(), env_factory=FormEnv)
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    mem.end_round()
    q = form_query(4, slot=0)
    inj = mem.recall(q)
    for item_id in mem.items():
        if item_id in inj.ids:
            assert assign(item_id, mem.round, 0) == "trial"
    from guimem.memory.base import RecallQuery

    other = mem.recall(RecallQuery(task=Task(id="mail", goal="Delete the email.", app="mail"),
                                   observation=q.observation))
    assert other.abstained and other.items == ()


def test_stack_runs_its_skills(kit):
    mem = StackMemory(kit, MemorySpec(), env_factory=FormEnv)
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    mem.end_round()
    (skill,) = [it for it, _ in mem.items().values() if it.kind == "skill"]
    env = FormEnv()
    obs = env.reset(Task(id="form", goal="", app="form", seed=6))
    from guimem.types import Action, ActionKind

    transition, performed = mem.run_skill(env, Action(kind=ActionKind.RUN_SKILL, skill=skill.name), env.task, obs)
    assert transition.done and env.evaluate().success and len(performed) == 3
