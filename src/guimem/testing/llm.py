"""Scripted language models: in-process, and as a real OpenAI-compatible HTTP server on loopback."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from guimem.llm.base import ChatMessage, ChatResult, Usage

Reply = str | Callable[[list[ChatMessage]], str]


class ScriptedLLM:
    """Replies from a script, in order; a callable entry computes the reply from the messages.

    Args:
        replies: The script.
        default: Reply once the script is used up (None: raise `IndexError`).
    """

    def __init__(self, replies: Iterable[Reply] = (), default: str | None = None) -> None:
        self.replies: deque[Reply] = deque(replies)
        self.default = default
        self.calls: list[list[ChatMessage]] = []

    @property
    def name(self) -> str:
        """``scripted``."""
        return "scripted"

    def chat(self, messages: list[ChatMessage], *, temperature: float | None = None,
             max_tokens: int | None = None) -> ChatResult:
        """The next scripted reply."""
        self.calls.append(list(messages))
        if self.replies:
            entry = self.replies.popleft()
            text = entry(messages) if callable(entry) else entry
        elif self.default is not None:
            text = self.default
        else:
            raise IndexError("ScriptedLLM: script exhausted")
        prompt = sum(len(m.text().split()) for m in messages)
        return ChatResult(text=text, usage=Usage(prompt_tokens=prompt, completion_tokens=len(text.split())))


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.endswith("/models"):
            model: dict[str, object] = {"id": "scripted", "object": "model"}
            if self.server.owner.max_model_len is not None:  # as vLLM reports its context length
                model["max_model_len"] = self.server.owner.max_model_len
            self._send(200, json.dumps({"object": "list", "data": [model]}).encode())
        else:
            self._send(404, b'{"error": "not found"}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        self.server.owner.requests.append({"path": self.path, "body": request, "headers": dict(self.headers)})
        if self.path.endswith("/embeddings"):
            self._send(200, json.dumps(self.server.owner.embeddings(request)).encode())
            return
        status, body = self.server.owner.next_reply(request)
        self._send(status, body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedOpenAIServer


class ScriptedOpenAIServer:
    """A real HTTP server on 127.0.0.1 that answers ``/v1/chat/completions`` from a script.

    Script entries are reply texts, or ``(status, raw_body)`` tuples for error and malformed
    responses (e.g. ``(429, "")``, ``(200, "not json")``). Use as a context manager.

    Args:
        replies: The script.
        default: Reply text once the script is used up.
        refuse_formats: ``response_format`` types answered with HTTP 500, as a server that does not
            support them does (llama.cpp's server refuses ``json_schema``).
        max_model_len: A context length to report in ``/v1/models``, as vLLM does.
        finish_reason: What every reply says it stopped on (``length``: cut at ``max_tokens``).
    """

    def __init__(self, replies: Iterable[str | tuple[int, str] | Reply] = (), default: str = "",
                 refuse_formats: Iterable[str] = (), max_model_len: int | None = None,
                 finish_reason: str = "stop") -> None:
        self.max_model_len = max_model_len
        self.finish_reason = finish_reason
        self.script: deque[Any] = deque(replies)
        self.default = default
        self.refuse_formats = set(refuse_formats)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> ScriptedOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def next_reply(self, request: dict[str, Any]) -> tuple[int, bytes]:
        """The HTTP status and body for the next chat request."""
        kind = (request.get("response_format") or {}).get("type")
        if kind in self.refuse_formats:
            return 500, json.dumps({"error": f"response_format {kind} is not supported"}).encode()
        with self._lock:
            entry = self.script.popleft() if self.script else self.default
        if isinstance(entry, tuple):
            return entry[0], entry[1].encode()
        if callable(entry):
            messages = [ChatMessage.model_validate(m) for m in request.get("messages", [])]
            entry = entry(messages)
        prompt_words = sum(len(str(m.get("content", "")).split()) for m in request.get("messages", []))
        completion_words = len(str(entry).split())
        body = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "model": request.get("model", "scripted"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": entry},
                         "finish_reason": self.finish_reason}],
            # total_tokens as OpenAI sends it (clients such as browser-use's require it)
            "usage": {"prompt_tokens": prompt_words, "completion_tokens": completion_words,
                      "total_tokens": prompt_words + completion_words},
        }
        return 200, json.dumps(body).encode()

    def embeddings(self, request: dict[str, Any]) -> dict[str, Any]:
        """Deterministic hashing embeddings for ``/v1/embeddings``."""
        from guimem.embeddings.hashing import HashingEmbedder

        inputs = request.get("input", [])
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        vecs = HashingEmbedder(64).embed(texts)
        return {"data": [{"index": i, "embedding": v.tolist()} for i, v in enumerate(vecs)], "model": "hashing"}
