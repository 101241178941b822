"""Every model call is recorded (trace, results, summary, report); an unreadable reply is not executed."""

from __future__ import annotations

import json

from guimem.agents.llm import LLMPolicy, make_context
from guimem.harness.episode import run_episode
from guimem.harness.evaluate import Evaluation
from guimem.llm.openai import OpenAIChatClient
from guimem.settings import LLMSettings
from guimem.testing import FormEnv, ScriptedOpenAIServer
from guimem.types import ActionErrorCode, Task
from tests.harness.test_evaluate import settings, spec

WAIT = '{"thought": "t", "intent": "i", "action": {"kind": "wait"}}'


def test_each_step_records_its_model_calls_with_usage_reply_and_parse_result():
    with ScriptedOpenAIServer(["no JSON here", WAIT], default=WAIT, refuse_formats=["json_schema"]) as server:
        client = OpenAIChatClient(LLMSettings(base_url=server.base_url, timeout_s=5))
        traj = run_episode(FormEnv(), LLMPolicy(client), Task(id="form", goal="", app="form", seed=1, max_steps=2))
    first = traj.steps[0].model_calls
    assert [c.parsed for c in first] == [False, True] and first[0].reply == "no JSON here"
    assert all(c.prompt_tokens > 0 and c.completion_tokens > 0 and c.latency_ms > 0 for c in first)
    assert {c.mode for c in first} == {"json_object"}


def test_an_unreadable_reply_fails_the_step_without_touching_the_screen():
    env = FormEnv()
    with ScriptedOpenAIServer(default="garbage") as server:
        client = OpenAIChatClient(LLMSettings(base_url=server.base_url, timeout_s=5, structured_output="text"))
        traj = run_episode(env, LLMPolicy(client), Task(id="form", goal="", app="form", seed=1, max_steps=3))
    assert all(s.error.code is ActionErrorCode.PARSE_ERROR for s in traj.steps)
    assert env.actions == [], "a parse failure is recorded, never executed as a wait"


def test_results_summary_and_report_carry_the_model_totals(tmp_path):
    with ScriptedOpenAIServer(["oops", *[WAIT] * 200], default=WAIT) as server:
        s = settings()
        s.llm = LLMSettings(base_url=server.base_url, timeout_s=5)
        llm_spec = spec(rounds=1, methods=["none"]).model_copy(update={"policy": "llm"})
        summary = Evaluation(llm_spec, tmp_path, s).run()
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sum(r["model_calls"] for r in lines) == len(server.requests) and lines[0]["parse_failures"] == 0
    model = summary.methods["none"].model
    assert model is not None and model.calls == len(server.requests) and model.model_ms_per_step > 0
    assert model.prompt_tokens > 0 and model.parse_failure_rate == 0.0  # the first reply was re-asked and fixed
    assert model.output_modes == ["json_schema"]
    assert "Model calls" in (tmp_path / "report.html").read_text()


def test_a_react_history_that_outgrows_the_context_ends_with_a_recorded_overflow(tmp_path):
    from guimem.tokens import TiktokenCounter

    counter = TiktokenCounter()
    with ScriptedOpenAIServer(default=WAIT, refuse_formats=["json_schema"]) as server:
        client = OpenAIChatClient(LLMSettings(base_url=server.base_url, timeout_s=5))
        policy = LLMPolicy(client, make_context("react"), counter=counter, context_tokens=1200, max_tokens=200)
        traj = run_episode(FormEnv(), policy, Task(id="form", goal="", app="form", seed=1, max_steps=200))
    last = traj.steps[-1]
    assert last.error.code is ActionErrorCode.MODEL_ERROR and "context overflow" in last.error.message
    assert traj.outcome.reason.startswith("context overflow") and len(traj.steps) < 200
    assert last.model_calls == (), "the overflowing prompt is never sent"
    for request in server.requests:  # every request that was sent fits: prompt + max_tokens within the context
        sent = sum(counter.count(m["content"]) for m in request["body"]["messages"])
        assert int(sent * 1.2) + 48 + request["body"]["max_tokens"] <= 1200
