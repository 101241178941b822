"""Structured output negotiated per server, and a reply schema that says exactly what the code executes."""

from __future__ import annotations

import json

import jsonschema
import pytest

from guimem.agents.llm import JsonReply, LLMPolicy, reply_schema
from guimem.harness.episode import run_episode
from guimem.llm import text_message
from guimem.llm.base import OutputMode
from guimem.llm.openai import OpenAIChatClient
from guimem.settings import LLMSettings
from guimem.testing import FormEnv, ScriptedOpenAIServer
from guimem.types import Task

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def client(server, **kw) -> OpenAIChatClient:
    return OpenAIChatClient(LLMSettings(base_url=server.base_url, model="m", timeout_s=5, **kw), backoff_s=0.01)


@pytest.mark.parametrize(("refused", "chosen"), [((), OutputMode.JSON_SCHEMA),
                                                 (("json_schema",), OutputMode.JSON_OBJECT),
                                                 (("json_schema", "json_object"), OutputMode.TEXT)])
def test_the_output_mode_is_detected_once_per_endpoint(refused, chosen):
    with ScriptedOpenAIServer(default='{"a": "x"}', refuse_formats=refused) as server:
        c = client(server)
        assert c.chat_structured([text_message("user", "hi")], SCHEMA).text == '{"a": "x"}'
        assert c.mode is chosen
        detected = len(server.requests)
        c.chat_structured([text_message("user", "again")], SCHEMA)
        assert len(server.requests) == detected + 1, "the mode is kept, not negotiated again"
    sent = [r["body"].get("response_format", {}).get("type") for r in server.requests]
    assert sent[-1] == (None if chosen is OutputMode.TEXT else chosen.value)
    if chosen is OutputMode.JSON_OBJECT:
        assert server.requests[-1]["body"]["response_format"]["schema"] == SCHEMA  # llama.cpp's form


def test_a_configured_mode_is_used_as_is_and_a_dead_endpoint_is_not_mistaken_for_a_refusal():
    with ScriptedOpenAIServer(default='{"a": "x"}') as server:
        c = client(server, structured_output="json_object")
        c.chat_structured([text_message("user", "hi")], SCHEMA)
        assert [r["body"]["response_format"]["type"] for r in server.requests] == ["json_object"]
    from guimem.errors import LLMError

    dead = OpenAIChatClient(LLMSettings(base_url="http://127.0.0.1:9/v1", max_retries=0, timeout_s=2))
    with pytest.raises(LLMError):
        dead.chat_structured([text_message("user", "hi")], SCHEMA)
    assert dead.mode is None


def _screen():
    return FormEnv().reset(Task(id="form", goal="", app="form", seed=1))


ACCEPTED = [{"kind": "tap", "ref": "{ref}"}, {"kind": "type", "ref": "{ref}", "text": "alice"},
            {"kind": "key", "key": "enter"}, {"kind": "scroll", "direction": "down"}, {"kind": "wait"},
            {"kind": "done"}, {"kind": "answer", "text": "42"}, {"kind": "run_skill", "skill": "login"},
            {"kind": "open_app", "app": "mail"}]
REFUSED = [{"kind": "tap"}, {"kind": "type", "ref": "{ref}"}, {"kind": "tap", "ref": "no-such-ref"},
           {"kind": "key"}, {"kind": "teleport"}, {"kind": "memory", "op": "add", "text": "x"},
           # the validator refuses an empty name: a constrained model must not be able to write one
           {"kind": "run_skill", "skill": ""}, {"kind": "open_app", "app": ""}]


@pytest.mark.parametrize("action", ACCEPTED)
def test_every_reply_the_schema_allows_parses_as_an_executable_action(action):
    obs = _screen()
    ref = obs.elements[1].ref
    reply = {"thought": "t", "intent": "i", "action": json.loads(json.dumps(action).replace("{ref}", ref))}
    jsonschema.validate(reply, reply_schema(obs))
    parsed = JsonReply.model_validate(reply).action
    assert parsed.ref is None or obs.element(parsed.ref) is not None


@pytest.mark.parametrize("action", REFUSED)
def test_the_schema_refuses_actions_the_code_would_refuse_or_could_not_execute(action):
    obs = _screen()
    reply = {"thought": "t", "intent": "i",
             "action": json.loads(json.dumps(action).replace("{ref}", obs.elements[1].ref))}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply, reply_schema(obs))


def test_a_reask_raises_the_temperature_so_the_model_does_not_repeat_itself():
    with ScriptedOpenAIServer(["not json at all", '{"thought": "t", "intent": "i", "action": {"kind": "wait"}}'],
                              default='{"thought": "t", "intent": "i", "action": {"kind": "done"}}') as server:
        c = client(server, structured_output="text")
        run_episode(FormEnv(), LLMPolicy(c), Task(id="form", goal="", app="form", seed=1, max_steps=1))
    temps = [r["body"]["temperature"] for r in server.requests[:2]]
    assert temps[0] == 0.0 and temps[1] > temps[0]


def test_a_reply_split_into_two_objects_or_with_raw_newlines_still_parses():
    from guimem.llm.structured import validate_reply

    split = '{"thought": "fill it", "intent": "user"}\n{"action": {"kind": "tap", "ref": "3"}}'
    assert validate_reply(split, JsonReply).action.ref == "3"
    newline = '{"thought": "line one\nline two", "intent": "i", "action": {"kind": "wait"}}'
    assert validate_reply(newline, JsonReply).thought == "line one\nline two"
    first_valid = 'Plan: {"not": "it"} then {"thought": "t", "action": {"kind": "done"}}'
    assert validate_reply(first_valid, JsonReply).action.kind.value == "done"


@pytest.mark.parametrize("call", [{"kind": "memory", "op": "delete", "memory_id": ""},
                                  {"kind": "memory", "op": "update", "memory_id": "", "text": "x"},
                                  {"kind": "run_skill", "skill": ""}])
def test_the_five_part_schema_refuses_what_the_action_validator_refuses(call):
    from guimem.agents.base import PolicyInput
    from guimem.agents.conact import FivePartProtocol

    obs = _screen()
    reply = {"thinking": "t", "folding": None, "tool_call": call, "ui_observation": "u", "action_intent": "i"}
    with pytest.raises(jsonschema.ValidationError):
        task = Task(id="form", goal="", app="form", seed=1)
        jsonschema.validate(reply, FivePartProtocol().schema(PolicyInput(task=task, observation=obs)))


@pytest.mark.parametrize("budget", [240, 400, 1024])
def test_the_schema_sent_never_allows_a_reply_longer_than_the_token_budget(budget):
    from guimem.agents.base import PolicyInput
    from guimem.agents.conact import FivePartProtocol
    from guimem.agents.schemas import fit_to_budget, worst_tokens

    obs = _screen()
    task = Task(id="form", goal="", app="form", seed=1)
    for schema in (FivePartProtocol().schema(PolicyInput(task=task, observation=obs)), reply_schema(obs)):
        fitted = fit_to_budget(schema, budget)
        assert worst_tokens(fitted) <= budget
        free_text = fitted["properties"]["thinking" if "thinking" in fitted["properties"] else "thought"]
        assert 8 <= free_text["maxLength"] <= 160
    assert fit_to_budget(reply_schema(obs), 4096) == reply_schema(obs), "a roomy budget changes nothing"


def test_a_reply_cut_at_max_tokens_says_so_in_the_step_error():
    with ScriptedOpenAIServer(default='{"thought": "a long thou', finish_reason="length") as server:
        c = client(server, structured_output="text")
        traj = run_episode(FormEnv(), LLMPolicy(c), Task(id="form", goal="", app="form", seed=1, max_steps=1))
    assert "cut at max_tokens" in traj.steps[0].error.message
