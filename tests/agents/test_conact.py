from __future__ import annotations

import json

import pytest

from guimem.agents.base import PolicyInput
from guimem.agents.conact import ConActContext, FivePartProtocol, Fold, parse
from guimem.agents.llm import LLMPolicy, make_context
from guimem.harness.episode import run_episode
from guimem.testing import FormEnv, ScriptedLLM
from guimem.tokens import WhitespaceCounter
from guimem.types import ActionErrorCode, ActionKind, Observation, Task


def reply(tool: dict | str | None = None, fold: dict | str | None = None, parts=("thinking", "ui_observation",
                                                                                 "action_intent")) -> str:
    out = []
    if "thinking" in parts:
        out.append("<thinking>think</thinking>")
    if fold is not None:
        out.append(f"<folding>{fold if isinstance(fold, str) else json.dumps(fold)}</folding>")
    if tool is not None:
        out.append(f"<tool_call>{tool if isinstance(tool, str) else json.dumps(tool)}</tool_call>")
    if "ui_observation" in parts:
        out.append("<ui_observation>Total: $1,284.50</ui_observation>")
    if "action_intent" in parts:
        out.append("<action_intent>read the total</action_intent>")
    return "\n".join(out)


TAP = {"kind": "tap", "ref": "5"}


def test_a_complete_reply_parses_into_all_five_parts():
    r = parse(reply(TAP, {"range": [1, 1], "summary": "opened"}), step=2)
    assert r.errors == [] and r.action.kind is ActionKind.TAP and r.fold == Fold(range=(1, 1), summary="opened")
    assert r.ui_observation == "Total: $1,284.50" and r.action_intent == "read the total" and r.thinking == "think"


@pytest.mark.parametrize("text, step, message", [
    (reply(TAP, parts=()), 1, "<thinking> is missing"),
    (reply(TAP, parts=("thinking", "action_intent")), 1, "<ui_observation> is missing"),
    (reply(TAP, parts=("thinking", "ui_observation")), 1, "<action_intent> is missing"),
    (reply(TAP), 2, "<folding> is missing (required from step 2)"),
    (reply(TAP, "{not json"), 2, "<folding> is not valid"),
    (reply(TAP, {"range": [3], "summary": "x"}), 2, "<folding> is not valid"),
    (reply(None), 1, "<tool_call> is missing: no action was taken"),
    (reply("tap the button"), 1, "<tool_call> is not a valid action"),
    (reply({"kind": "type", "ref": "2"}), 1, "type: needs text"),
    (reply({"kind": "memory", "op": "update", "text": "x"}), 1, "update needs memory_id"),
    ("complete garbage", 3, "<tool_call> is missing"),
])
def test_every_malformed_part_becomes_an_error_message(text, step, message):
    r = parse(text, step)
    assert any(message in e for e in r.errors), r.errors


def test_folding_step_distillation_and_cross_step_abstraction():
    ctx = ConActContext()
    ctx.reset(Task(id="t", goal="g", app="a"))
    for step in (1, 2, 3):
        assert ctx.update(step, parse(reply(TAP, {"range": [step, step], "summary": f"s{step}"}), step), "") == []
    assert [(e.start, e.end, e.summary) for e in ctx.state.history] == [(1, 1, "s1"), (2, 2, "s2"), (3, 3, "s3")]
    assert ctx.update(4, parse(reply(TAP, {"range": [1, 3], "summary": "logged in"}), 4), "") == []
    assert [(e.start, e.end) for e in ctx.state.history] == [(1, 3), (4, 4)]


@pytest.mark.parametrize("fold, message", [
    ({"range": [3, 1], "summary": "x"}, "start after end"),
    ({"range": [7, 9], "summary": "x"}, "covers no history entry"),
    ({"range": [2, 3], "summary": "x"}, "cuts through an already folded entry"),
])
def test_invalid_fold_ranges_are_reported_not_applied(fold, message):
    ctx = ConActContext()
    ctx.reset(Task(id="t", goal="g", app="a"))
    ctx.update(1, parse(reply(TAP), 1), "")
    ctx.update(2, parse(reply(TAP, {"range": [1, 2], "summary": "a"}), 2), "")
    ctx.update(3, parse(reply(TAP, {"range": [3, 3], "summary": "b"}), 3), "")
    before = list(ctx.state.history)
    problems = ctx.update(4, parse(reply(TAP, fold), 4), "")
    assert any(message in p for p in problems)
    assert ctx.state.history[:len(before)] == before


def test_memory_actions_keep_exact_values_and_report_bad_ids():
    ctx = ConActContext()
    ctx.reset(Task(id="t", goal="g", app="a"))
    add = {"kind": "memory", "op": "add", "memory_id": "total", "description": "order total", "text": "$1,284.50"}
    assert ctx.update(1, parse(reply(add), 1), "") == []
    assert ctx.state.memory["total"].content == "$1,284.50"
    dup = ctx.update(2, parse(reply(add, {"range": [1, 1], "summary": "x"}), 2), "")
    assert any("already exists" in p for p in dup)
    upd = {"kind": "memory", "op": "update", "memory_id": "nope", "text": "1"}
    assert any("unknown memory id 'nope'" in p for p in ctx.update(3, parse(reply(upd, {"range": [2, 2],
                                                                                           "summary": "y"}), 3), ""))
    delete = {"kind": "memory", "op": "delete", "memory_id": "total"}
    assert ctx.update(4, parse(reply(delete, {"range": [3, 3], "summary": "z"}), 4), "") == []
    assert ctx.state.memory == {}


def test_problems_are_shown_in_the_next_prompt():
    llm = ScriptedLLM([reply(TAP), "garbage", reply(TAP, {"range": [1, 1], "summary": "x"})])
    policy = LLMPolicy(llm, ConActContext(), FivePartProtocol(), WhitespaceCounter())
    task = Task(id="t", goal="Read the total", app="a")
    policy.reset(task)
    obs = Observation(app="a", location="/")
    first = policy.act(PolicyInput(task=task, observation=obs, step=0))
    second = policy.act(PolicyInput(task=task, observation=obs, step=1))
    policy.act(PolicyInput(task=task, observation=obs, step=2))
    assert first.action.kind is ActionKind.TAP
    assert second.action.kind is ActionKind.WAIT and second.error.code is ActionErrorCode.PARSE_ERROR
    third_prompt = llm.calls[2][1].text()
    assert "Problems with your last reply" in third_prompt and "<tool_call> is missing" in third_prompt


def test_a_memory_action_does_not_touch_the_env():
    add = {"kind": "memory", "op": "add", "memory_id": "u", "description": "user", "text": "kept"}
    llm = ScriptedLLM([reply(add), reply({"kind": "done"}, {"range": [1, 1], "summary": "kept the user"})])
    env = FormEnv()
    traj = run_episode(env, LLMPolicy(llm, ConActContext(), FivePartProtocol(), WhitespaceCounter()),
                       Task(id="form", goal="", app="form", seed=1, max_steps=4))
    assert traj.steps[0].action.kind is ActionKind.MEMORY and env.actions == []
    assert traj.steps[1].action.kind is ActionKind.DONE and len(traj.steps) == 2


def test_conact_prompts_stay_flat_while_react_grows():
    def script(n):
        return [reply(TAP, {"range": [s, s], "summary": "step"} if s > 1 else None) for s in range(1, n + 1)]

    sizes = {}
    for name in ("conact", "react"):
        policy = LLMPolicy(ScriptedLLM(script(30)), make_context(name), FivePartProtocol(), WhitespaceCounter())
        task = Task(id="t", goal="g", app="a")
        policy.reset(task)
        for step in range(30):
            policy.act(PolicyInput(task=task, observation=Observation(app="a"), step=step))
        sizes[name] = policy.prompt_tokens
    assert sizes["react"][-1] > 3 * sizes["react"][0]
    assert sizes["conact"][-1] < sizes["react"][-1] / 2


def test_conact_policy_runs_end_to_end_against_the_local_openai_server():
    from guimem.llm.openai import OpenAIChatClient
    from guimem.settings import LLMSettings
    from guimem.testing import ScriptedOpenAIServer

    def answer(messages):
        prompt = messages[-1].text()
        step = int(prompt.split("Current screen (step ")[1].split(")")[0])
        lines = prompt.split("Current screen")[1].splitlines()
        ref = {name: next(x.split("]")[0].lstrip("[") for x in lines if f"#{name}" in x)
               for name in ("username", "password")}
        login = next(x.split("]")[0].lstrip("[") for x in lines if '"Login"' in x)
        goal = prompt.split("Goal: ")[1].splitlines()[0]
        values = [v.split('"')[1] for v in goal.split(" the ")[1:]]
        tools = {1: {"kind": "memory", "op": "add", "memory_id": "user", "description": "username",
                     "text": values[0]},
                 2: {"kind": "type", "ref": ref["username"], "text": values[0]},
                 3: {"kind": "type", "ref": ref["password"], "text": values[1]},
                 4: {"kind": "tap", "ref": login}}
        fold = {"range": [step - 1, step - 1], "summary": "done"} if step > 1 else None
        return reply(tools[step], fold)

    with ScriptedOpenAIServer(default="", replies=[answer] * 4) as server:
        client = OpenAIChatClient(LLMSettings(base_url=server.base_url, model="scripted", timeout_s=5))
        traj = run_episode(FormEnv(), LLMPolicy(client, ConActContext(), FivePartProtocol(), WhitespaceCounter()),
                           Task(id="form", goal="", app="form", seed=3, max_steps=6))
    assert traj.outcome.success, [s.action.describe() for s in traj.steps]
    assert [s.action.kind for s in traj.steps] == [ActionKind.MEMORY, ActionKind.TYPE, ActionKind.TYPE,
                                                  ActionKind.TAP]
    assert "user (username)" in server.requests[1]["body"]["messages"][1]["content"]
