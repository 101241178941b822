"""What a step that ran a skill did (#33): the actions a skill performed before it stopped succeeded; only an
action the env refused failed. A skill that stopped because its next target was gone (a changed UI) must not
teach memory that the steps it took were failures (they would be cut from procedures and blamed in warnings)."""

from __future__ import annotations

from guimem.envs.drift import DriftEnv
from guimem.harness.episode import run_episode
from guimem.memory.generalise import performed_actions
from guimem.memory.settings import SkillSettings
from guimem.memory.skills.library import SkillMemory
from guimem.memory.steer.contract import OfflineContractParser
from guimem.memory.steer.propose import OfflineProposer
from guimem.testing import FormEnv
from guimem.testing.memory import ScriptedPolicy
from guimem.types import Action, ActionKind, Role, Selector, Task
from tests.memory.conftest import LOGIN, PASS, USER, episode

TASK = Task(id="form", goal="", app="form", seed=4, max_steps=6)


class RunThenScript(ScriptedPolicy):
    """Runs the skill ``name`` first, then the scripted steps."""

    def __init__(self, name: str, steps):
        super().__init__(steps)
        self.name_of_skill = name
        self.ran = False

    def act(self, inp):
        if not self.ran:
            self.ran = True
            from guimem.agents.base import Decision

            return Decision(action=Action(kind=ActionKind.RUN_SKILL, skill=self.name_of_skill,
                                          args=dict(inp.task.params)))
        return super().act(inp)


def test_the_actions_a_skill_took_before_its_next_target_was_gone_are_not_failures(kit):
    skills = SkillMemory(kit, SkillSettings(match_state=False), env_factory=FormEnv)
    skills.commit_round(0, [episode([USER, PASS, LOGIN], seed=s) for s in (1, 2)])
    name = max((entry[1] for entry in skills._skills.values()), key=lambda b: len(b.program.steps)).name
    env = DriftEnv(FormEnv(), "v1", frozenset({"relabel"}))  # Cancel relabelled: a skill through it breaks
    stop = (ActionKind.TAP, {"role": Role.BUTTON, "text": "Login"}, None)
    broken = skills._skills[name][1].program.model_copy(update={"steps": (
        *skills._skills[name][1].program.steps[:-1],
        Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="Cancel")))})
    skills._skills[name] = (skills._skills[name][0], skills._skills[name][1].model_copy(
        update={"program": broken}), skills._skills[name][2])
    traj = run_episode(env, RunThenScript(name, [stop]), TASK, memory=skills, skill_runner=skills.run_skill)
    first = traj.steps[0]
    assert first.action.kind is ActionKind.RUN_SKILL and first.error is not None and first.performed
    performed = performed_actions(traj)
    assert [p.failed for p in performed] == [False] * len(performed), "nothing the skill performed failed"
    assert traj.outcome.success
    (proc,) = OfflineProposer(OfflineContractParser()).propose(traj, 0)
    assert [a.kind for a in proc.behaviour.actions][:2] == [ActionKind.TYPE, ActionKind.TYPE], proc.content


def test_a_step_that_idly_repeats_the_one_before_it_is_in_no_skill():
    """The second tap on a sender whose e-mail the first tap opened changes nothing; a skill holding it ("tap
    {by}; tap {by}; tap {by}") replays no-ops on whatever screen it meets (a `families` harm, issue #28). Typing the
    username twice is the same on the form, and the second entry replaces the first (`unused_steps`): the routines
    are those of typing it once."""
    from guimem.memory.generalise import idle_repeats
    from guimem.memory.skills.induce import induce

    task = Task(id="form", goal="", app="form", seed=4, max_steps=6)
    twice = run_episode(FormEnv(), ScriptedPolicy([USER, USER, PASS, LOGIN]), task)
    once = run_episode(FormEnv(), ScriptedPolicy([USER, PASS, LOGIN]), task)
    assert twice.outcome.success and once.outcome.success
    assert idle_repeats(performed_actions(twice), twice.task) == {1}
    assert idle_repeats(performed_actions(once), once.task) == set()
    kinds = [[(a.kind, a.selector.label or a.selector.text) for a in c.program.steps] for c in induce(twice)]
    once_kinds = [[(a.kind, a.selector.label or a.selector.text) for a in c.program.steps] for c in induce(once)]
    assert len(once_kinds) == 3  # username-password, password-Login, all three
    assert kinds == once_kinds
