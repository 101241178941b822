"""Scope earned, not assumed: the stack tries one task's skills and subgoals on sibling tasks whose verb and
screen they fit, as trials against those tasks' controls; scope widens on that evidence and narrows where
it harms; an unrelated task, a sibling with another verb, and (leave-one-task-out) a source task never
see them."""

from __future__ import annotations

from guimem.memory.base import RecallQuery
from guimem.memory.settings import AdmissionRules, GateSettings, MemorySpec
from guimem.memory.stack import StackMemory
from guimem.memory.steer.contract import OfflineContractParser
from guimem.memory.steer.items import Applicability, KnowledgeItem, Provenance, Scope, TrialRecord
from guimem.memory.steer.scope import earn_scope, offerable
from guimem.testing import FormEnv
from guimem.types import Behaviour, Task
from tests.memory.conftest import LOGIN, PASS, USER, episode
from tests.memory.test_steer import FORWARD, FORWARD_2, LOGIN_TASK, REPLY

PARSER = OfflineContractParser()


def _item(source: Task, kind: str = "skill") -> KnowledgeItem:
    return KnowledgeItem(kind=kind, applicability=Applicability(app=source.app, task=source.id,
                                                                contract=PARSER.parse(source)),
                         completion="", content="x", behaviour=Behaviour(), key=f"{kind}:{source.id}",
                         provenance=Provenance(episodes=["e"], tasks=[source.id], outcomes=[True]))


def test_an_item_is_offered_where_the_verb_fits_and_withheld_where_it_does_not():
    item = _item(FORWARD)
    assert offerable(item, FORWARD_2, PARSER.parse(FORWARD_2), exclude_source=False)
    assert not offerable(item, REPLY, PARSER.parse(REPLY), exclude_source=False), "forward is not reply"
    assert not offerable(item, LOGIN_TASK, PARSER.parse(LOGIN_TASK), exclude_source=False), "unrelated task"
    assert not offerable(item, FORWARD, PARSER.parse(FORWARD), exclude_source=False), "its own task: not a transfer"
    refused = item.model_copy(update={"refused": [FORWARD_2.id]})
    assert not offerable(refused, FORWARD_2, PARSER.parse(FORWARD_2), exclude_source=False)
    assert not offerable(_item(FORWARD, "warning"), FORWARD_2, PARSER.parse(FORWARD_2), exclude_source=False)


def _rec(task: str, seed: int, rnd: int, arm: str, score: float, effective: bool = False) -> TrialRecord:
    return TrialRecord(episode=f"{task}-{seed}-{rnd}-{arm}", task=task, seed=seed, round=rnd, arm=arm, score=score,
                       effective=effective)


def test_scope_widens_on_other_tasks_evidence_and_narrows_where_it_harms():
    item, gate = _item(FORWARD), GateSettings()
    helped = [_rec("b", 1, 2, "trial", 1.0, True), _rec("b", 2, 2, "control", 0.0),
              _rec("c", 1, 2, "trial", 1.0, True), _rec("c", 2, 2, "control", 0.0)]
    half, change = earn_scope(item, helped[:2], {}, gate)
    assert half.scope is Scope.TASK and change is None, "one trial and one control are not enough"
    one_task = [_rec("b", s, r, arm, 1.0 if arm == "trial" else 0.0, True) for s in (1, 2) for r in (3, 4)
                for arm in ("trial", "control")]
    assert earn_scope(item, one_task, {}, gate)[0].scope is Scope.TASK, "one other task is not the app"
    wide, change = earn_scope(half, helped[2:], {}, gate)
    assert wide.scope is Scope.APP and change == {"widened": "app", "tasks": ["b", "c"]}
    history = {"d": [TrialRecord(episode="old", task="d", seed=7, round=1, arm="control", score=1.0,
                                 historical=True)]}
    narrow, change = earn_scope(wide, [_rec("d", 7, 3, "trial", 0.0)], history, gate)
    assert narrow.scope is Scope.TASK and narrow.refused == ["d"] and change["narrowed"] == ["d"]


def _learned_on(kit, task_id: str, **rules) -> StackMemory:
    mem = StackMemory(kit, MemorySpec(admission=AdmissionRules(**rules)), env_factory=FormEnv)
    mem.learn(episode([USER, PASS, LOGIN], seed=1, task_id=task_id))
    mem.end_round()
    return mem


def _recall(mem: StackMemory, task_id: str, slot: int):
    env = FormEnv()
    obs = env.reset(Task(id=task_id, goal="", app="form", seed=5))
    return mem.recall(RecallQuery(task=env.task, observation=obs, slot=slot))


def test_a_sibling_task_gets_another_tasks_item_as_a_trial_against_its_own_controls(kit):
    mem = _learned_on(kit, "form-a")
    arms = [_recall(mem, "form-b", slot) for slot in (0, 1)]
    shown = [inj for inj in arms if inj.items]
    held = [inj for inj in arms if inj.withheld]
    assert len(shown) == 1 and len(held) == 1, "one episode of the task is the trial, the other its control"
    (item,) = shown[0].items
    assert item.trial and item.sources == ("form-a",) and shown[0].text.startswith("Under trial (not yet verified")
    assert held[0].withheld == (item.id,)


def test_transfer_can_be_switched_off(kit):
    mem = _learned_on(kit, "form-a", transfer=False)
    assert not any(_recall(mem, "form-b", slot).items for slot in (0, 1))
