from __future__ import annotations

import pytest
from pydantic import BaseModel

from guimem.errors import LLMError, LLMResponseError
from guimem.llm import complete_json, extract_json, text_message
from guimem.llm.openai import OpenAIChatClient
from guimem.settings import LLMSettings
from guimem.testing import ScriptedLLM, ScriptedOpenAIServer
from guimem.tokens import TiktokenCounter


class Verdict(BaseModel):
    success: bool
    reason: str


def client_for(server, retries=2) -> OpenAIChatClient:
    return OpenAIChatClient(LLMSettings(base_url=server.base_url, model="m", api_key="k", max_retries=retries,
                                        timeout_s=5), backoff_s=0.01)


def test_client_sends_openai_chat_and_accounts_usage():
    with ScriptedOpenAIServer(["hello there"]) as server:
        client = client_for(server)
        result = client.chat([text_message("user", "hi you")])
        assert result.text == "hello there"
        assert client.usage.prompt_tokens == 2 and client.usage.completion_tokens == 2
        req = server.requests[0]
        assert req["path"] == "/v1/chat/completions" and req["headers"]["Authorization"] == "Bearer k"
        assert req["body"]["messages"] == [{"role": "user", "content": "hi you"}]


def test_client_retries_429_and_5xx_then_succeeds():
    with ScriptedOpenAIServer([(429, "slow down"), (503, "busy"), "ok"]) as server:
        assert client_for(server).chat([text_message("user", "x")]).text == "ok"
        assert len(server.requests) == 3


def test_client_gives_up_after_retries_with_a_typed_error():
    with ScriptedOpenAIServer([(500, "a"), (500, "b"), (500, "c")]) as server, \
            pytest.raises(LLMError, match="HTTP 500"):
        client_for(server, retries=2).chat([text_message("user", "x")])


def test_client_does_not_retry_client_errors():
    with ScriptedOpenAIServer([(400, "bad request"), "never"]) as server:
        with pytest.raises(LLMError, match="HTTP 400"):
            client_for(server).chat([text_message("user", "x")])
        assert len(server.requests) == 1


def test_non_openai_body_is_a_typed_error():
    with ScriptedOpenAIServer([(200, "not json at all")]) as server, pytest.raises(LLMError, match="not an OpenAI"):
        client_for(server).chat([text_message("user", "x")])


def test_unreachable_endpoint_is_a_typed_error():
    client = OpenAIChatClient(LLMSettings(base_url="http://127.0.0.1:9/v1", max_retries=0, timeout_s=1))
    with pytest.raises(LLMError, match="request failed"):
        client.chat([text_message("user", "x")])


def test_extract_json_from_fences_and_prose():
    assert extract_json('Sure! ```json\n{"a": 1}\n```') == {"a": 1}
    assert extract_json('The answer is {"a": [1, 2]} ok') == {"a": [1, 2]}
    with pytest.raises(LLMResponseError):
        extract_json("no json here")


def test_complete_json_asks_again_with_the_validation_error():
    with ScriptedOpenAIServer(['{"success": "maybe"}', '{"success": true, "reason": "done"}']) as server:
        verdict = complete_json(client_for(server), [text_message("user", "judge")], Verdict)
        assert verdict == Verdict(success=True, reason="done")
        retry_prompt = server.requests[1]["body"]["messages"][-1]["content"]
        assert "not valid" in retry_prompt and "success" in retry_prompt


def test_complete_json_raises_after_one_retry():
    llm = ScriptedLLM(["nothing", "still nothing"])
    with pytest.raises(LLMResponseError, match="no JSON"):
        complete_json(llm, [text_message("user", "judge")], Verdict)
    assert len(llm.calls) == 2


def test_token_counter_uses_real_bpe_offline():
    counter = TiktokenCounter()
    assert counter.count("hello world") == 2
    assert counter.count("") == 0
    assert counter.count("tokenization is subword") > 3


def test_image_parts_are_data_urls(tmp_path):
    from guimem.llm import image_part

    png = tmp_path / "s.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    part = image_part(png)
    assert part.type == "image_url" and part.image_url["url"].startswith("data:image/png;base64,")


@pytest.mark.parametrize("served,configured,expected", [(4096, None, 4096), (4096, 2048, 2048), (None, None, None)])
def test_the_context_budget_comes_from_the_server_when_settings_give_none(served, configured, expected):
    from guimem.agents.llm import LLMPolicy

    with ScriptedOpenAIServer(max_model_len=served) as server:
        client = OpenAIChatClient(LLMSettings(base_url=server.base_url, model="scripted"))
        policy = LLMPolicy(client, context_tokens=configured)
        said = policy.preflight()
        assert policy.context_tokens == expected
        assert ("context 4096" in said) == (served is not None)
