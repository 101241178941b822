from __future__ import annotations

import numpy as np

from guimem.agents.base import Decision
from guimem.harness.episode import run_episode
from guimem.memory.base import RecallQuery
from guimem.memory.kit import MemoryKit
from guimem.memory.program import SkillProgram, execute
from guimem.memory.ranking import mmr
from guimem.memory.settings import SkillSettings
from guimem.memory.skills.induce import induce
from guimem.memory.skills.library import SkillMemory
from guimem.memory.skills.verify import verify
from guimem.storage.sqlite import SQLiteStore
from guimem.testing import FormEnv
from guimem.types import Action, ActionErrorCode, ActionKind, ItemKind, Role, Selector, Task
from tests.memory.conftest import LOGIN, PASS, USER, ScriptPolicy, episode


def test_windows_of_two_to_five_actions_from_successes_only():
    ok = episode([USER, PASS, LOGIN], seed=1)
    assert ok.outcome.success
    cands = induce(ok)
    assert sorted(len(c.program.steps) for c in cands) == [2, 2, 3]
    assert induce(episode([LOGIN], seed=1)) == []


def test_skill_parameters_come_from_task_values():
    (full,) = [c for c in induce(episode([USER, PASS, LOGIN], seed=1)) if len(c.program.steps) == 3]
    assert full.program.params == ("username", "password")
    code = full.program.render(full.name)
    assert "type(textbox('username'), username)" in code and "tap(button('Login'))" in code


def test_a_skill_runs_on_another_seed_with_new_values():
    (full,) = [c for c in induce(episode([USER, PASS, LOGIN], seed=1)) if len(c.program.steps) == 3]
    env = FormEnv()
    obs = env.reset(Task(id="form", goal="", app="form", seed=5))
    run = execute(env, full.program, env.task.params, obs)
    assert run.error is None and run.done and env.evaluate().success


def test_interpreter_stops_with_a_typed_error_when_a_selector_does_not_resolve():
    program = SkillProgram.from_templates((Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON,
                                                                                         text="Nope")),))
    env = FormEnv()
    obs = env.reset(Task(id="form", goal="", app="form", seed=1))
    run = execute(env, program, {}, obs, name="broken")
    assert run.error.code is ActionErrorCode.SKILL_FAILED and "no_match" in run.error.message


def test_verification_accepts_a_reproducing_skill_and_rejects_one_that_does_not():
    (full,) = [c for c in induce(episode([USER, PASS, LOGIN], seed=1)) if len(c.program.steps) == 3]
    assert verify(FormEnv(), full.program, full.source).ok
    wrong_steps = tuple(a.model_copy(update={"text": "{password}"}) if a.text == "{username}" else a
                        for a in full.program.steps)
    wrong = SkillProgram.from_templates(wrong_steps)
    verdict = verify(FormEnv(), wrong, full.source)
    assert not verdict.ok and "did not succeed" in verdict.reason


def test_unverified_skills_are_not_recalled_unless_configured(kit):
    trajectory = episode([USER, PASS, LOGIN], seed=1)
    env = FormEnv()
    q = RecallQuery(task=Task(id="form", goal="x", app="form", params={"username": "a", "password": "b"}),
                    observation=env.reset(Task(id="form", goal="", app="form", seed=2)))
    no_env = SkillMemory(kit, SkillSettings())
    no_env.learn(trajectory)
    no_env.end_round()
    assert no_env.stats() == {"unverified": 3} and no_env.recall(q).items == ()
    allowed = SkillMemory(kit, SkillSettings(recall_unverified=True))
    assert len(allowed.recall(q).items) == 2, "the third (password, Login) needs the username typed first"


def test_verified_skills_are_recalled_with_code_and_merged_by_program(kit):
    mem = SkillMemory(kit, SkillSettings(k=2), env_factory=FormEnv)
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    mem.learn(episode([USER, PASS, LOGIN], seed=2))
    mem.end_round()
    merges = [e for e in kit.store.events(namespace=kit.namespace) if e.type == "merged"]
    assert mem.stats() == {"verified": 3} and len(merges) == 3
    env = FormEnv()
    obs = env.reset(Task(id="form", goal="", app="form", seed=4))
    inj = mem.recall(RecallQuery(task=env.task, observation=obs))
    assert len(inj.items) == 2 and all(i.kind is ItemKind.SKILL and i.name for i in inj.items)
    assert "def " in inj.text


def test_use_is_counted_only_when_the_skill_runs(kit):
    mem = SkillMemory(kit, SkillSettings(), env_factory=FormEnv)
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    mem.end_round()
    env = FormEnv()
    obs = env.reset(Task(id="form", goal="", app="form", seed=4))
    inj = mem.recall(RecallQuery(task=env.task, observation=obs))
    shown = inj.items[0]
    mem.recall(RecallQuery(task=env.task, observation=obs))
    assert mem.usage(shown.id)["uses"] == 0 and mem.usage(shown.id)["shown"] == 2
    transition, performed = mem.run_skill(env, Action(kind=ActionKind.RUN_SKILL, skill=shown.name), env.task, obs)
    assert transition.error is None and performed
    mem.end_round()
    assert mem.usage(shown.id) == {"shown": 2, "uses": 1, "successes": 1, "failures": 0}


def test_mmr_prefers_novel_items_over_near_duplicates():
    vecs = np.array([[1, 0, 0], [0.99, 0.14, 0], [0, 1, 0]], dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    scores = np.array([0.9, 0.89, 0.6], dtype=np.float32)
    assert mmr(scores, vecs, 2, 0.7) == [0, 2]
    assert mmr(scores, vecs, 2, 1.0) == [0, 1]


def test_leave_one_task_out_hides_a_merged_skill_from_every_task_that_contributed(kit):
    mem = SkillMemory(kit, SkillSettings(exclude_source_task=True, recall_unverified=True))
    mem.learn(episode([USER, PASS, LOGIN], seed=1, task_id="form-a"))
    mem.learn(episode([USER, PASS, LOGIN], seed=2, task_id="form-b"))  # the same programs: merged
    mem.end_round()

    def shown(task_id):
        env = FormEnv()
        obs = env.reset(Task(id=task_id, goal="", app="form", seed=9))
        return mem.recall(RecallQuery(task=env.task, observation=obs)).items

    assert shown("form-a") == () and shown("form-b") == ()
    assert shown("form-c")



class _RunsSkill:
    """Runs one recalled skill, then performs ``then`` itself (`ScriptPolicy` steps)."""

    name = "runs-skill"

    def __init__(self, skill, then=()):
        self.skill, self.then = skill, ScriptPolicy(then)

    def reset(self, task):
        self.ran = False
        self.then.reset(task)

    def act(self, inp):
        if not self.ran:
            self.ran = True
            return Decision(action=Action(kind=ActionKind.RUN_SKILL, skill=self.skill))
        return self.then.act(inp)


def test_a_task_that_only_ran_another_tasks_skill_is_not_a_source_of_it_but_its_own_steps_are(kit):
    mem = SkillMemory(kit, SkillSettings(exclude_source_task=True, k=4), env_factory=FormEnv)
    mem.learn(episode([USER, PASS, LOGIN], seed=1, task_id="form-a"))
    mem.end_round()

    def shown(task_id):
        env = FormEnv()
        obs = env.reset(Task(id=task_id, goal="", app="form", seed=9))
        return {len(i.behaviour.actions): i for i in mem.recall(RecallQuery(task=env.task, observation=obs)).items}

    whole, typing = shown("form-b")[3], shown("form-b")[2]
    for task_id, policy in (("form-b", _RunsSkill(whole.name)), ("form-c", _RunsSkill(typing.name, [LOGIN]))):
        traj = run_episode(FormEnv(), policy, Task(id=task_id, goal="", app="form", seed=2, max_steps=6),
                           memory=mem, skill_runner=mem.run_skill)
        assert traj.outcome.success
        mem.learn(traj)
    mem.end_round()
    # form-b's episode only replayed form-a's routine: nothing in it is form-b's own, so leave-one-task-out
    # still shows form-b what form-a taught (it would otherwise hide a routine for having worked)
    assert {n: i.id for n, i in shown("form-b").items()} == {3: whole.id, 2: typing.id}
    # form-c typed the routine's values by the skill and tapped Login itself: the three steps are its own too
    assert set(shown("form-c")) == {2}

def test_a_window_from_the_middle_of_an_episode_starts_only_where_the_steps_before_it_left_their_mark():
    from guimem.memory.program import can_start

    ok = episode([USER, PASS, LOGIN], seed=1)
    windows = {tuple(a.selector.label or a.selector.text for a in c.program.steps): c.program for c in induce(ok)}
    full, tail = windows[("username", "password", "Login")], windows[("password", "Login")]
    assert full.needs == () and tail.needs == ("username",)
    env = FormEnv()
    fresh = env.reset(Task(id="form", goal="", app="form", seed=3, max_steps=6))
    args = dict(env.task.params)
    assert can_start(full, args, fresh, env.task)
    assert not can_start(tail, args, fresh, env.task), "it would log in without a username"
    user = Selector(role=Role.TEXTBOX, label="username").resolve(fresh).element
    typed = env.step(Action(kind=ActionKind.TYPE, ref=user.ref, text=args["username"])).observation
    assert can_start(tail, args, typed, env.task)


def test_a_routine_that_finished_its_goal_does_not_start_where_the_goal_asks_for_a_value_it_never_places():
    """A save-in-home routine learned where the goal named no folder must not finish a goal that names one: on a
    form whose goal also asks for a code, "type username; type password; Login" would log in without it."""
    from guimem.memory.program import can_start

    windows = {tuple(a.selector.label or a.selector.text for a in c.program.steps): c.program
               for c in induce(episode([USER, PASS, LOGIN], seed=1))}
    full, head = windows[("username", "password", "Login")], windows[("username", "password")]
    assert full.unplaced == 0 and head.unplaced is None, "only a window that ended the episode finished a goal"
    for fields, starts in ((("username", "password"), True), (("username", "password", "code"), False)):
        env = FormEnv(fields=fields)
        screen = env.reset(Task(id="form", goal="", app="form", seed=3, max_steps=6))
        args = full.args_for(env.task)
        assert can_start(full, args, screen, env.task) is starts, env.task.goal
        assert can_start(head, head.args_for(env.task), screen, env.task), "a step on the way serves any goal"
    before = full.model_copy(update={"unplaced": None})  # stored before the count was kept: as it was
    env = FormEnv(fields=("username", "password", "code"))
    screen = env.reset(Task(id="form", goal="", app="form", seed=3, max_steps=6))
    assert can_start(before, before.args_for(env.task), screen, env.task)


def test_what_a_finishing_routine_leaves_undone_is_counted_by_name_with_quoted_values_placed_where_held():
    """Two values that happen to be equal are two values the goal asks for, and a quoted goal value the routine
    presupposes in a field is placed there, on the seed it was learned on and on every other."""
    from guimem.memory.roles import placed_here, unplaced

    same = Task(id="add", goal="Add 34 and 34.", app="calc", params={"a": "34", "b": "34"})
    assert unplaced(["a"], same) == 1, "b is asked for too, though its value is a's"
    other = same.model_copy(update={"goal": "Add 12 and 34.", "params": {"a": "12", "b": "34"}})
    assert unplaced(["a"], other) == 1
    quoted = Task(id="edit", goal='Replace the text with "hi" and save.', app="editor")
    assert unplaced(["quoted0"], quoted) == 0
    assert placed_here(["quoted0"], {}, quoted.model_copy(update={"goal": 'Replace the text with "yo".'})) == \
        {"quoted0"}


def test_a_program_also_seen_as_a_step_on_the_way_loses_its_finishing_guard_when_merged():
    from guimem.memory.skills.library import merged_program

    ends = SkillProgram.from_templates((Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON,
                                                                                       text="Save")),), unplaced=0)
    assert merged_program(ends, ends.model_copy(update={"unplaced": 2})).unplaced == 2
    assert merged_program(ends, ends.model_copy(update={"unplaced": None})).unplaced is None
    stored = SkillProgram.model_validate(ends.model_dump(exclude={"unplaced"}))  # kept before the count was
    assert stored.unplaced is None


def test_a_replayed_window_is_told_by_position_and_is_learned_where_the_routine_is_not_held(kit, tmp_path):
    mem = SkillMemory(kit, SkillSettings(k=4), env_factory=FormEnv)
    mem.learn(episode([USER, PASS, LOGIN], seed=1, task_id="form-a"))
    mem.end_round()
    env = FormEnv()
    obs = env.reset(Task(id="form-b", goal="", app="form", seed=9))
    typing = next(i for i in mem.recall(RecallQuery(task=env.task, observation=obs)).items
                  if len(i.behaviour.actions) == 2)
    ran = run_episode(FormEnv(), _RunsSkill(typing.name, [LOGIN]), Task(id="form-b", goal="", app="form", seed=2),
                      memory=mem, skill_runner=mem.run_skill)
    assert [c.replay for c in induce(ran)] == [True, False, False]  # (user, password) | (password, Login) | all
    # a trajectory's indices are what its writer sent: equal indices do not make the agent's own tap a replay
    hostile = ran.model_copy(update={"steps": [s.model_copy(update={"index": 0}) for s in ran.steps]})
    assert [c.replay for c in induce(hostile)] == [True, False, False]
    # learned into a memory that never held the routine, the run is its first demonstration there
    store = SQLiteStore(tmp_path / "other.sqlite")
    other = SkillMemory(MemoryKit(store=store, embedder=kit.embedder, counter=kit.counter, namespace="o"),
                        SkillSettings(), env_factory=FormEnv)
    other.learn(ran)
    other.end_round()
    assert other.stats() == {"verified": 3}
    store.close()
