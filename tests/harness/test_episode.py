from __future__ import annotations

import json

from guimem.agents.explorer import ExplorerPolicy
from guimem.agents.llm import LLMPolicy, make_context
from guimem.envs.base import Transition
from guimem.errors import EnvError
from guimem.harness.episode import run_episode
from guimem.memory.base import NoMemory
from guimem.testing import FormEnv, ScriptedLLM
from guimem.tokens import WhitespaceCounter
from guimem.types import Action, ActionErrorCode, ActionKind, Injection, Task, Trajectory

TASK = Task(id="form", goal="", app="form", seed=4, max_steps=6)


class RecordingMemory(NoMemory):
    def __init__(self):
        self.queries = []

    def recall(self, query):
        self.queries.append(query)
        return Injection(method="rec", text="remember this", tokens=2)


def test_episode_records_every_step_with_selectors_and_injection():
    mem = RecordingMemory()
    traj = run_episode(FormEnv(), ExplorerPolicy(seed=1), TASK, memory=mem)
    assert len(mem.queries) == len(traj.steps) >= 1
    assert [q.step for q in mem.queries] == list(range(len(traj.steps)))
    for step in traj.steps:
        assert step.injection.text == "remember this"
        assert set(step.timings_ms) == {"recall", "embed", "policy", "env"}
        if step.action.ref is not None:
            assert step.action.selector is not None
    assert traj.final_observation is not None and traj.memory == "none"
    assert Trajectory.model_validate_json(traj.model_dump_json()) == traj


def test_same_seeds_reproduce_the_same_episode():
    a = run_episode(FormEnv(), ExplorerPolicy(seed=3), TASK)
    b = run_episode(FormEnv(), ExplorerPolicy(seed=3), TASK)
    assert [s.action for s in a.steps] == [s.action for s in b.steps]


def test_an_env_crash_becomes_a_failed_outcome_not_an_exception():
    class Crashing(FormEnv):
        def step(self, action):
            raise EnvError("browser died")

    traj = run_episode(Crashing(), ExplorerPolicy(), TASK)
    assert not traj.outcome.success and "browser died" in traj.outcome.reason


def test_run_skill_without_a_runner_fails_as_data():
    class SkillPolicy(ExplorerPolicy):
        def act(self, inp):
            from guimem.agents.base import Decision

            return Decision(action=Action(kind=ActionKind.RUN_SKILL, skill="login"))

    traj = run_episode(FormEnv(), SkillPolicy(), TASK.model_copy(update={"max_steps": 2}))
    assert traj.steps[0].error.code is ActionErrorCode.UNSUPPORTED


def test_skill_runner_is_called_for_run_skill():
    calls = []

    def runner(env, action, task, obs):
        calls.append(action.skill)
        return Transition(obs, None, done=True), ()

    class SkillPolicy(ExplorerPolicy):
        def act(self, inp):
            from guimem.agents.base import Decision

            return Decision(action=Action(kind=ActionKind.RUN_SKILL, skill="login", args={"u": "x"}))

    run_episode(FormEnv(), SkillPolicy(), TASK, skill_runner=runner)
    assert calls == ["login"]


def _reply_for(messages):
    """A scripted model that reads the screen in the prompt and fills the form correctly."""
    prompt = messages[1].text() if len(messages) > 1 else ""
    params = json.loads(prompt.split("Task parameters: ")[1].split("\n")[0])
    lines = prompt.split("Current screen")[1].splitlines()
    for name, value in params.items():
        for line in lines:
            if f"#{name}" in line and f"value={value!r}" not in line:
                ref = line.split("]")[0].lstrip("[")
                return json.dumps({"thought": "fill", "action": {"kind": "type", "ref": ref, "text": value}})
    ref = next(line.split("]")[0].lstrip("[") for line in lines if '"Login"' in line)
    return json.dumps({"action": {"kind": "tap", "ref": ref}})


def test_llm_policy_solves_the_form_with_a_scripted_model():
    llm = ScriptedLLM(default=None, replies=[_reply_for] * 3)
    traj = run_episode(FormEnv(), LLMPolicy(llm, counter=WhitespaceCounter()), TASK)
    assert traj.outcome.success and len(traj.steps) == 3
    assert traj.steps[0].action.kind is ActionKind.TYPE


def test_malformed_reply_is_fed_back_once_then_the_step_fails_as_data():
    llm = ScriptedLLM(["I think I will click", '{"action": {"kind": "tap"}}'] + ["garbage"] * 10)
    traj = run_episode(FormEnv(), LLMPolicy(llm, counter=WhitespaceCounter()), TASK.model_copy(update={"max_steps": 2}))
    first = traj.steps[0]
    assert first.action.kind is ActionKind.WAIT
    assert first.error.code is ActionErrorCode.PARSE_ERROR and "needs a target" in first.error.message
    feedback = llm.calls[0 + 1][-1].text()
    assert "not valid" in feedback and "no JSON" in feedback
    assert traj.steps[1].error.code is ActionErrorCode.PARSE_ERROR


def test_llm_policy_shows_the_injection_and_the_last_error():
    llm = ScriptedLLM(default='{"action": {"kind": "tap", "ref": "1"}}')
    policy = LLMPolicy(llm, make_context("truncate", keep_last=1), counter=WhitespaceCounter())
    mem = RecordingMemory()
    run_episode(FormEnv(), policy, TASK.model_copy(update={"max_steps": 3}), memory=mem)
    second_prompt = llm.calls[1][1].text()
    assert "remember this" in second_prompt
    assert "Your previous action failed: no element with ref 1" in second_prompt
    third_prompt = llm.calls[2][1].text()
    assert "1 earlier steps not shown" in third_prompt


def test_llm_policy_through_the_real_local_openai_server_with_a_malformed_reply():
    from guimem.llm.openai import OpenAIChatClient
    from guimem.settings import LLMSettings
    from guimem.testing import ScriptedOpenAIServer

    with ScriptedOpenAIServer(["Sure, I will click it!", _reply_for, _reply_for, _reply_for]) as server:
        client = OpenAIChatClient(LLMSettings(base_url=server.base_url, model="scripted", timeout_s=5))
        traj = run_episode(FormEnv(), LLMPolicy(client, counter=WhitespaceCounter()), TASK)
    assert traj.outcome.success
    first_step_messages = server.requests[1]["body"]["messages"]
    assert "not valid" in first_step_messages[-1]["content"], "the malformed reply was fed back once"
