from __future__ import annotations

from guimem.memory.settings import MemorySpec
from guimem.memory.stack import StackMemory
from guimem.memory.steer.items import ItemStatus, is_failure, is_screen_avoid
from guimem.memory.steer.lifecycle import content_id
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
    assert {"procedure", "warning", "skill", "edge"} <= kinds
    for item, status in mem.items().values():  # screen-specific avoid items go straight to trial
        assert status is (ItemStatus.TRIAL if is_screen_avoid(item) else ItemStatus.CANDIDATE), item.kind


def _admitted_by_hand(kit, spec: MemorySpec) -> StackMemory:
    """A stack that learned one successful form episode, every item then admitted by hand."""
    mem = StackMemory(kit, spec, env_factory=FormEnv)
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    mem.end_round()
    for item_id in list(mem.items()):
        mem.set_status(item_id, "trial", "test")
        mem.set_status(item_id, "admitted", "a person said so")
    return mem


def test_stack_respects_the_token_budget_and_kind_caps(kit):
    mem = _admitted_by_hand(kit, MemorySpec(token_budget=25))
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
            assert assign(content_id(mem.items()[item_id][0].key), mem.round, 0) == "trial"
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


def _stack(kit, skills=True, **rules):
    from guimem.memory.settings import AdmissionRules

    return StackMemory(kit, MemorySpec(admission=AdmissionRules(**rules)), env_factory=FormEnv if skills else None)


def test_an_avoid_item_from_a_failure_acts_from_the_next_round_in_every_episode_of_its_task(kit):
    mem = _stack(kit)
    mem.learn(episode([LOGIN], seed=1))  # tapped Login on the empty form: failed
    mem.end_round()
    avoid = {i for i, (it, _) in mem.items().items() if is_screen_avoid(it)}
    assert any(is_failure(it) for it, _ in mem.items().values()), "the failed subgoal is kept"
    for slot in (0, 1):  # no control arm: every episode of the task sees it, labelled as under trial
        inj = mem.recall(form_query(3, slot=slot))
        shown = set(inj.ids) & avoid
        assert len(shown) == 1, "the warning and the failed subgoal name one action: shown once"
        assert all(i.trial for i in inj.items if i.id in avoid) and not set(inj.withheld) & avoid
    from guimem.memory.steer.memory import item_view

    failed = [item_view(i, it) for i, (it, _) in mem.items().items() if is_failure(it)]
    assert failed and all(i.success is False for i in failed), "the explorer reads it as what failed"


def test_steer_keeps_the_papers_matched_controls_for_the_same_warning(kit):
    from guimem.memory.steer.memory import SteerMemory

    mem = SteerMemory(kit)
    mem.learn(episode([LOGIN], seed=1))
    mem.end_round()
    (warning,) = mem.items()
    arms = {assign(content_id(mem.items()[warning][0].key), mem.round, slot) for slot in (0, 1)}
    shown = {slot for slot in (0, 1) if warning in mem.recall(form_query(3, slot=slot)).ids}
    assert arms == {"trial", "control"} and len(shown) == 1


def test_the_tasks_own_history_gives_controls_so_a_task_seen_once_per_round_is_not_starved(kit):
    mem = _stack(kit, skills=False)  # (a skill of the same steps would be shown in the procedure's place)
    for r in range(2):  # the task seen once per round, failing
        mem.learn(episode([LOGIN], seed=1, round_index=r))
        mem.end_round()
    mem.learn(episode([USER, PASS, LOGIN], seed=2, round_index=2))  # then one success proposes a procedure
    mem.end_round()
    (proc_id, (proc, status)), = [(i, e) for i, e in mem.items().items() if e[0].kind == "procedure"]
    controls = proc.evidence.arm("control")
    assert status is ItemStatus.CANDIDATE and len(controls) == 3 and all(c.historical for c in controls)
    for slot in (0, 1):
        assert proc_id in mem.recall(form_query(5, slot=slot)).ids, "it has its controls: shown every time"
    for r, seed in ((3, 5), (4, 6)):
        mem.learn(episode([USER, PASS, LOGIN], seed=seed, round_index=r, memory=mem))
        mem.end_round()
    assert mem.items()[proc_id][1] is ItemStatus.ADMITTED, mem.items()[proc_id][0].evidence


def test_an_item_shown_where_the_same_task_and_seed_succeeded_before_is_harmful_and_goes(kit):
    mem = _stack(kit)
    mem.learn(episode([USER, PASS, LOGIN], seed=1))  # seed 1 succeeds before any item exists
    mem.learn(episode([LOGIN], seed=2))
    mem.end_round()
    shown = mem.recall(form_query(1)).ids
    assert shown
    mem.learn(episode([LOGIN], seed=1, memory=mem, round_index=1))  # seed 1 now fails with items shown
    mem.end_round()
    statuses = {mem.items()[i][1] for i in shown}
    assert statuses <= {ItemStatus.REJECTED}, statuses


def test_an_admitted_item_that_harms_is_retired_at_the_next_boundary(kit):
    mem = _stack(kit, skills=False)
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    mem.end_round()
    (proc_id,) = [i for i, (it, _) in mem.items().items() if it.kind == "procedure"]
    mem.set_status(proc_id, "trial", "test")
    mem.set_status(proc_id, "admitted", "test")
    mem.learn(episode([LOGIN], seed=1, memory=mem, round_index=1))  # shown, and seed 1 fails where it succeeded
    mem.end_round()
    assert mem.items()[proc_id][1] is ItemStatus.RETIRED
    assert proc_id not in mem.recall(form_query(1)).ids


def test_a_failure_item_shown_without_controls_that_never_helped_is_rejected(kit):
    mem = _stack(kit, fast_trials=2)
    mem.learn(episode([LOGIN], seed=1))
    mem.end_round()
    avoid = {i for i, (it, _) in mem.items().items() if is_screen_avoid(it)}
    for r in (1, 2):  # shown, and the task still fails both times
        mem.learn(episode([LOGIN], seed=1, memory=mem, round_index=r))
        mem.end_round()
    assert {mem.items()[i][1] for i in avoid if mem.items()[i][0].evidence.arm("trial")} == {ItemStatus.REJECTED}



def test_an_item_admitted_by_hand_is_never_shown_as_verified_by_trials(kit):
    mem = _admitted_by_hand(kit, MemorySpec())
    inj = mem.recall(form_query(4))
    assert inj.items and all(i.manual for i in inj.items)
    assert "(verified)" not in inj.text and inj.text.startswith("Admitted by hand (not verified by trials):")


def test_a_reopened_stack_runs_a_skill_it_did_not_show_without_holding_every_item(kit, tmp_path):
    import dataclasses

    cached = dataclasses.replace(kit, cache_dir=tmp_path / "cache")
    mem = StackMemory(cached, MemorySpec(), env_factory=FormEnv)
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    mem.commit_round(0, [])
    (skill,) = [it for it, _ in mem.items().values() if it.kind == "skill"]
    again = StackMemory(cached, MemorySpec(), env_factory=FormEnv)
    assert not again.lifecycle.loaded
    env = FormEnv()
    obs = env.reset(Task(id="form", goal="", app="form", seed=6))
    from guimem.types import Action, ActionKind

    transition, _ = again.run_skill(env, Action(kind=ActionKind.RUN_SKILL, skill=skill.name), env.task, obs)
    assert transition.done and env.evaluate().success
    assert not again.lifecycle.loaded, "found by reading a chunk at a time, nothing kept"


def test_an_empty_memory_says_so_whether_or_not_it_has_a_cache(kit, tmp_path):
    import dataclasses

    from guimem.memory.steer.memory import SteerMemory

    for k in (kit, dataclasses.replace(kit, cache_dir=tmp_path / "cache")):
        for cls in (SteerMemory, StackMemory):
            inj = cls(k).recall(form_query(4))
            assert not inj.abstained and inj.note == "memory is empty", cls.__name__


def test_a_text_vector_save_that_fails_keeps_them_for_the_next(kit, tmp_path, monkeypatch):
    import dataclasses

    from guimem.memory.indexcache import IndexCache

    cached = dataclasses.replace(kit, cache_dir=tmp_path / "cache")
    mem = StackMemory(cached, MemorySpec(), env_factory=FormEnv)
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    monkeypatch.setattr(IndexCache, "save_index", lambda *a, **k: None)  # a full disk
    mem.commit_round(0, [])
    held = len(mem._texts)
    assert held > 0 and mem._unsaved
    monkeypatch.undo()
    mem._save_cache()  # the next save writes them
    assert not mem._unsaved and len(mem._texts) == held
    again = StackMemory(cached, MemorySpec(), env_factory=FormEnv)
    assert len(again._texts) == held
