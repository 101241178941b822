"""Any OpenAI-compatible chat endpoint (vLLM, Ollama, llama.cpp server, hosted APIs)."""

from __future__ import annotations

import logging
import time

import httpx

from guimem.errors import LLMError
from guimem.llm.base import ChatMessage, ChatResult, OutputMode, Usage
from guimem.settings import LLMSettings

log = logging.getLogger(__name__)
_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


def _response_format(mode: OutputMode, schema: dict[str, object]) -> dict[str, object]:
    if mode is OutputMode.JSON_SCHEMA:
        return {"response_format": {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}}
    if mode is OutputMode.JSON_OBJECT:
        return {"response_format": {"type": "json_object", "schema": schema}}
    return {}
_ENDPOINT_HINT = "start the model server, or point GUIMEM_LLM__BASE_URL at one that runs"


class OpenAIChatClient:
    """``POST {base_url}/chat/completions`` with timeouts, backoff retries and usage accounting.

    Args:
        settings: Endpoint, model, key, timeout, retries and defaults.
        backoff_s: First retry delay; doubles each retry (``Retry-After`` wins when sent).
    """

    def __init__(self, settings: LLMSettings, backoff_s: float = 0.5) -> None:
        self.settings = settings
        self.backoff_s = backoff_s
        self.usage = Usage()
        self.calls = 0
        self.served_models: list[str] = []
        self.context_length: int | None = None
        """The model's context length, when the server says it (``max_model_len`` in ``/models``, as vLLM)."""
        self.mode: OutputMode | None = None if settings.structured_output == "auto" \
            else OutputMode(settings.structured_output)
        headers = {}
        if settings.api_key is not None:
            headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
        self._client = httpx.Client(base_url=settings.base_url.rstrip("/"), timeout=settings.timeout_s, headers=headers)

    @property
    def name(self) -> str:
        """``openai:<model>@<base_url>``."""
        return f"openai:{self.settings.model}@{self.settings.base_url}"

    def chat(self, messages: list[ChatMessage], *, temperature: float | None = None,
             max_tokens: int | None = None) -> ChatResult:
        """One completion, retried on 429/5xx and transport errors."""
        return self._complete(self._payload(messages, temperature, max_tokens), retry=True)

    def chat_structured(self, messages: list[ChatMessage], schema: dict[str, object], *,
                        temperature: float | None = None, max_tokens: int | None = None) -> ChatResult:
        """One completion constrained to ``schema`` in the endpoint's mode.

        With ``structured_output: auto`` the first call tries ``json_schema`` (OpenAI, vLLM), then
        ``json_object`` with a schema (llama.cpp's server answers HTTP 500 to ``json_schema``), then
        plain text; the first mode the server accepts is kept for every later call (``self.mode``).
        """
        payload = self._payload(messages, temperature, max_tokens)
        if self.mode is not None:
            return self._complete({**payload, **_response_format(self.mode, schema)}, retry=True)
        for mode in (OutputMode.JSON_SCHEMA, OutputMode.JSON_OBJECT):
            try:
                result = self._complete({**payload, **_response_format(mode, schema)}, retry=False)
            except LLMError as exc:
                if exc.status is None or exc.status in (401, 403, 404, 429):
                    raise
                log.info("%s: %s output refused (HTTP %s); trying the next mode", self.name, mode, exc.status)
                continue
            self.mode = mode
            return result
        self.mode = OutputMode.TEXT
        return self._complete(payload, retry=True)

    def _payload(self, messages: list[ChatMessage], temperature: float | None, max_tokens: int | None
                 ) -> dict[str, object]:
        return {
            "model": self.settings.model,
            "messages": [m.model_dump(exclude_none=True) for m in messages],
            "temperature": self.settings.temperature if temperature is None else temperature,
            "max_tokens": max_tokens or self.settings.max_tokens,
        }

    def _complete(self, payload: dict[str, object], retry: bool) -> ChatResult:
        start = time.perf_counter()
        resp = self._post_with_retries(payload, retry)
        try:
            body = resp.json()
            choice = body["choices"][0]
            text = choice["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"{self.name}: reply is not an OpenAI chat completion: {resp.text[:200]!r}") from exc
        usage = Usage.model_validate(body.get("usage") or {})
        self.usage = self.usage + usage
        self.calls += 1
        return ChatResult(text=text, usage=usage, model=str(body.get("model", "")),
                          latency_ms=(time.perf_counter() - start) * 1000,
                          truncated=isinstance(choice, dict) and choice.get("finish_reason") == "length")

    def preflight(self) -> str:
        """Ask the endpoint for its models, once, without retries (a preflight).

        Raises:
            LLMError: Nothing answers at ``base_url``, or it answers with an error.
        """
        try:
            resp = self._client.get("/models", timeout=min(self.settings.timeout_s, 10.0))
        except httpx.TransportError as exc:
            raise LLMError(f"no model server answers at {self.settings.base_url} ({type(exc).__name__}: {exc})",
                           suggestion=_ENDPOINT_HINT) from None
        if resp.status_code == 404:  # some servers have no /models; the first chat call will tell
            return f"{self.settings.base_url} answers (no /models route)"
        if resp.status_code >= 400:
            raise LLMError(f"{self.settings.base_url}/models answered HTTP {resp.status_code}: {resp.text[:200]}",
                           suggestion=_ENDPOINT_HINT)
        try:
            models = [m for m in resp.json().get("data", []) if isinstance(m, dict)]
        except (ValueError, AttributeError, TypeError):
            models = []
        names = [str(m.get("id")) for m in models]
        self.served_models = names
        mine = next((m for m in models if m.get("id") == self.settings.model), models[0] if models else {})
        length = mine.get("max_model_len")  # vLLM says its context length; OpenAI and llama.cpp do not
        self.context_length = length if isinstance(length, int) and not isinstance(length, bool) and length > 0 \
            else None
        told = f", context {self.context_length}" if self.context_length else ""
        return f"{self.settings.base_url} serves {', '.join(names) or 'an unnamed model'}{told}"

    def _post_with_retries(self, payload: dict[str, object], retry: bool = True) -> httpx.Response:
        delay = self.backoff_s
        last = ""
        status: int | None = None
        deadline = time.monotonic() + self.settings.max_total_s
        for attempt in range((self.settings.max_retries if retry else 0) + 1):
            try:
                resp = self._client.post("/chat/completions", json=payload)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code < 400:
                    return resp
                status = resp.status_code
                last = f"HTTP {resp.status_code}: {resp.text[:200]}"
                if resp.status_code not in _RETRY_STATUS:
                    break
                retry_after = resp.headers.get("retry-after", "")
                if retry_after.replace(".", "", 1).isdigit():
                    delay = float(retry_after)
            if time.monotonic() + delay > deadline:
                break
            if retry and attempt < self.settings.max_retries:
                log.warning("%s: %s; retrying in %.1fs", self.name, last, delay)
                time.sleep(delay)
                delay *= 2
        raise LLMError(f"{self.name}: request failed: {last}", status=status, suggestion=_ENDPOINT_HINT)
