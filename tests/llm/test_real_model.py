"""Against a real model server (llama.cpp's, SmolLM2-135M-Instruct, on loopback): protocol properties.

A 135M model is not a capable agent, so these assert what the path guarantees — replies parse and
name elements that exist, a dead endpoint is an infrastructure failure — not task success.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from guimem.agents.llm import LLMPolicy, make_context
from guimem.harness.episode import run_episode
from guimem.llm.base import OutputMode
from guimem.llm.openai import OpenAIChatClient
from guimem.settings import LLMSettings
from guimem.testing import FormEnv
from guimem.testing.llamacpp import MODEL_ALIAS, llama_server
from guimem.types import ActionErrorCode, ActionKind, InfraComponent, Task

pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.fixture(scope="module")
def model_url():
    with llama_server(n_ctx=2048) as url:
        yield url


def _client(url: str, **kw) -> OpenAIChatClient:
    options = {"base_url": url, "model": MODEL_ALIAS, "max_tokens": 160, "timeout_s": 120, **kw}
    return OpenAIChatClient(LLMSettings(**options))


def _rates(trajectories) -> tuple[int, int, int]:
    steps = [s for t in trajectories for s in t.steps]
    parsed = [s for s in steps if not (s.error and s.error.code is ActionErrorCode.PARSE_ERROR)]
    executable = [s for s in parsed if s.action.kind is not ActionKind.WAIT
                  and (s.action.ref is None or s.observation.element(s.action.ref) is not None)]
    return len(steps), len(parsed), len(executable)


def test_constrained_replies_parse_and_name_elements_on_the_screen(model_url):
    client = _client(model_url)
    policy = LLMPolicy(client, make_context("react"))
    trajs = [run_episode(FormEnv(), policy, Task(id="form", goal="", app="form", seed=s, max_steps=4))
             for s in range(3)]
    steps, parsed, executable = _rates(trajs)
    print(f"constrained ({client.mode}): {parsed}/{steps} parsed, {executable}/{steps} executable, "
          f"{client.calls} calls, {client.usage.prompt_tokens} prompt + {client.usage.completion_tokens} "
          "completion tokens")
    assert client.mode is OutputMode.JSON_OBJECT, "llama.cpp's server takes json_object with a schema"
    assert all(t.outcome.infra is None for t in trajs)
    assert executable >= 0.95 * steps


def test_plain_text_replies_are_measured_too(model_url):
    client = _client(model_url, structured_output="text", max_retries=0)
    traj = run_episode(FormEnv(), LLMPolicy(client, make_context("react")),
                       Task(id="form", goal="", app="form", seed=7, max_steps=2))
    steps, parsed, executable = _rates([traj])
    print(f"plain text: {parsed}/{steps} parsed, {executable}/{steps} executable")
    assert traj.outcome.infra is None and steps == 2  # no threshold: a 135M model rarely follows free-form JSON


def test_doctor_checks_the_real_endpoint(model_url, monkeypatch):
    from guimem.cli.app import app

    monkeypatch.setenv("GUIMEM_LLM__BASE_URL", model_url)
    monkeypatch.setenv("GUIMEM_LLM__MODEL", MODEL_ALIAS)
    result = CliRunner().invoke(app, ["--json", "doctor", "--no-browser", "--model"])
    check = {c["name"]: c for c in json.loads(result.output)["checks"]}["model endpoint"]
    assert check["ok"] and MODEL_ALIAS in check["detail"] and "structured output: json_object" in check["detail"]


def test_a_model_server_killed_mid_run_is_an_infrastructure_failure():
    with llama_server(n_ctx=1024) as url:
        client = _client(url, max_retries=1, max_total_s=5)
        policy = LLMPolicy(client, make_context("react"))
        first = run_episode(FormEnv(), policy, Task(id="form", goal="", app="form", seed=1, max_steps=1))
    after = run_episode(FormEnv(), policy, Task(id="form", goal="", app="form", seed=2, max_steps=1))
    assert first.outcome.infra is None
    assert after.outcome.infra is not None and after.outcome.infra.component is InfraComponent.MODEL
    assert after.steps == () and not after.outcome.success


class GrowingLog(FormEnv):
    """A form whose screen gains a paragraph of log text at every step (a long history, fast)."""

    def observe(self):
        obs = super().observe()
        from guimem.types import Role, UIElement

        lines = tuple(UIElement(ref=f"log{i}", role=Role.TEXT,
                                text=f"log entry {i}: the system recorded event number {i} with several details")
                      for i in range(len(self.actions) * 6))
        return obs.model_copy(update={"elements": obs.elements + lines})

    def step(self, action):
        self.actions.append(action)
        return super().step(action.model_copy(update={"kind": ActionKind.WAIT}))


def test_with_n_ctx_2048_no_request_exceeds_the_context_and_react_ends_with_a_recorded_overflow(model_url):
    client = _client(model_url, structured_output="json_object")
    policy = LLMPolicy(client, make_context("react"), context_tokens=2048, max_tokens=160)
    traj = run_episode(GrowingLog(), policy, Task(id="form", goal="", app="form", seed=3, max_steps=40))
    last = traj.steps[-1]
    assert last.error is not None and last.error.code is ActionErrorCode.MODEL_ERROR, [s.error for s in traj.steps]
    assert last.model_calls == (), "the policy stopped before sending a prompt the model could not hold"
    assert traj.outcome.infra is None and traj.outcome.reason.startswith("context overflow")
    print(f"overflow after {len(traj.steps) - 1} steps; prompts {policy.prompt_tokens[0]} -> "
          f"{policy.prompt_tokens[-1]} tokens (cl100k)")


def test_the_llm_extractors_give_schema_valid_output_from_the_real_model(model_url):
    from guimem.memory.steer.contract import LLMContractParser
    from guimem.memory.steer.propose import LLMProposer
    from guimem.memory.subgoals import LLMAnnotator, LLMSegmenter
    from guimem.testing import form_episodes

    client = _client(model_url, max_tokens=200)
    success, failure = form_episodes()[0], form_episodes()[3]
    segments = LLMSegmenter(client).segment(success)
    assert segments and sum(len(s.actions) for s in segments) == 3
    annotation = LLMAnnotator(client).annotate(segments[0], success, is_last=len(segments) == 1)
    assert annotation.success in ("yes", "no", "uncertain") and annotation.text
    parser = LLMContractParser(client)
    assert parser.parse(success.task) is not None
    proposals = LLMProposer(client, parser).propose(failure, 0) + LLMProposer(client, parser).propose(success, 0)
    assert all(p.kind in ("procedure", "warning") for p in proposals)
    print(f"extractors: {len(segments)} segments, annotation {annotation.success!r}, {len(proposals)} proposals, "
          f"{client.calls} calls in mode {client.mode}")


def test_conact_replies_under_constrained_output_are_executable(model_url):
    from guimem.agents.conact import ConActContext, FivePartProtocol

    client = _client(model_url, max_tokens=240)
    policy = LLMPolicy(client, ConActContext(), FivePartProtocol())
    trajs = [run_episode(FormEnv(), policy, Task(id="form", goal="", app="form", seed=s, max_steps=3))
             for s in range(2)]
    steps, parsed, executable = _rates(trajs)
    memory_ops = sum(1 for t in trajs for s in t.steps if s.action.kind is ActionKind.MEMORY)
    print(f"conact constrained ({client.mode}): {parsed}/{steps} parsed, {executable}/{steps} executable "
          f"({memory_ops} memory actions)")
    assert client.mode is OutputMode.JSON_OBJECT and all(t.outcome.infra is None for t in trajs)
    assert executable + memory_ops >= 0.95 * steps


@pytest.mark.parametrize("context", ["react", "conact"])
def test_guimem_eval_with_the_real_model_records_its_calls(model_url, context, tmp_path, monkeypatch):
    from pathlib import Path

    from guimem.cli.app import app

    suite = Path(__file__).parent.parent / "data" / "form_suite.json"
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    monkeypatch.setenv("GUIMEM_LLM__BASE_URL", model_url)
    monkeypatch.setenv("GUIMEM_LLM__MODEL", MODEL_ALIAS)
    # the reply schema is fitted to this budget (agents/schemas.py fit_to_budget): no reply can be cut at it
    monkeypatch.setenv("GUIMEM_LLM__MAX_TOKENS", "400")
    monkeypatch.setenv("GUIMEM_LLM__CONTEXT_TOKENS", "2048")
    result = CliRunner().invoke(app, ["eval", "--env", "form", "--suite", str(suite), "--rounds", "1", "--methods",
                                      "steer", "--policy", "llm", "--context", context, "--out", str(tmp_path),
                                      "--json"])
    assert result.exit_code == 0, result.output
    model = json.loads(result.output)["methods"]["steer"]["model"]
    print(f"eval {context}: {model}")
    assert model["calls"] >= 4 and model["prompt_tokens"] > 0 and model["parse_failure_rate"] <= 0.05
    traces = [json.loads(x) for x in (tmp_path / "traces" / "steer" / "round-0.jsonl").read_text().splitlines()]
    assert traces[0]["steps"][0]["model_calls"][0]["reply"]
    calls = [c for t in traces for s in t["steps"] for c in s.get("model_calls", []) if c.get("mode") != "text"]
    assert calls and all(c["completion_tokens"] < 400 for c in calls), "a constrained reply reached max_tokens"
