"""Issue 29, item 7: over MCP stdio every malformed line gets its JSON-RPC error, every valid request an
answer (lone surrogates included), and tool arguments are validated strictly with the message passed on."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

from guimem.service.mcpwire import check_line
from tests.memory.conftest import LOGIN, PASS, USER, episode

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


@pytest.mark.parametrize(("raw", "code"), [
    (b"garbage\n", -32700), (b'{"jsonrpc": "2.0", "id": 3, "method": "ping"\n', -32700), (b"\xff\xfe{}\n", -32700),
    (b"[]\n", -32600), (b"[" * 5000 + b"\n", -32700), (b'{"jsonrpc": "2.0", "id": 4}\n', -32600),
    (b'{"jsonrpc": "1.0", "id": 5, "method": "ping"}\n', -32600), (b'{"id": 1, "method": "x", "p": NaN}\n', -32700),
    (b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "recall", "arguments": '
     b'{"goal": "\\ud800"}}}\n', -32602),
])
def test_each_malformed_line_gets_its_json_rpc_error(raw, code):
    line, error = check_line(raw)
    assert line is None and error is not None
    assert json.loads(error)["error"]["code"] == code


def test_a_valid_line_is_passed_on_whole():
    assert check_line(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\r\n') == (
        '{"jsonrpc": "2.0", "id": 1, "method": "ping"}', None)
    assert check_line(b"  \n") == (None, None)


class Wire:
    """A spawned ``guimem serve --mcp stdio``, spoken to line by line (every read bounded in time)."""

    def __init__(self, tmp_path):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "guimem.cli", "serve", "--mcp", "stdio", "--store", str(tmp_path / "m.sqlite"),
             "--method", "graph", "--data-dir", str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing"})

    def send(self, raw: bytes | dict) -> None:
        data = raw if isinstance(raw, bytes) else json.dumps(raw).encode() + b"\n"
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def answer(self, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                return json.loads(self.proc.stdout.readline())
        raise AssertionError("no answer within the time bound")

    def call(self, ident: int, tool: str, arguments: dict) -> dict:
        self.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": tool,
                                                                                  "arguments": arguments}})
        reply = self.answer()
        assert reply["id"] == ident, reply
        return reply

    def close(self) -> str:
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.stderr.read().decode()


def _tool(reply: dict) -> dict:
    result = reply["result"]
    if result.get("isError"):
        return {"ok": False, "message": result["content"][0]["text"]}
    data = result.get("structuredContent") or json.loads(result["content"][0]["text"])
    return data.get("result", data) if set(data) == {"result"} else data


def test_a_real_stdio_session_answers_every_line(tmp_path):
    wire = Wire(tmp_path)
    try:
        wire.send(INIT)
        assert wire.answer()["id"] == 1
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for raw, code in ((b"garbage\n", -32700), (b"[]\n", -32600), (b'{"jsonrpc": "2.0"\n', -32700),
                          (b'{"jsonrpc": "1.0", "id": 9, "method": "ping"}\n', -32600), (b"\xc3\x28\n", -32700),
                          (b'{"jsonrpc": "2.0", "id": 10}\n', -32600), (b'{"a":' * 3000 + b"\n", -32700)):
            wire.send(raw)
            assert wire.answer()["error"]["code"] == code, raw[:40]
        wire.send(b'{"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "recall", '
                  b'"arguments": {"goal": "\\ud800", "observation": {"app": "a"}}}}\n')
        assert wire.answer() == {"jsonrpc": "2.0", "id": 11, "error": {"code": -32602, "message": pytest.approx(
            "Invalid params: a string holds a lone surrogate (\\ud800-\\udfff): not valid Unicode")}}
        trajs = [episode([USER, PASS, LOGIN], seed=1).model_dump(mode="json")]
        refused = _tool(wire.call(12, "learn", {"trajectories": trajs, "end_round": "yes"}))
        assert not refused["ok"] and "end_round" in refused["message"] and "boolean" in refused["message"]
        bad = _tool(wire.call(13, "recall", {"goal": "g", "observation": {"app": 3}}))
        assert not bad["ok"] and bad["error"] == "ValidationError" and "app" in bad["message"]
        txt = _tool(wire.call(14, "export_memory", {"path": "mcp-notjsonl.txt"}))
        assert not txt["ok"] and ".jsonl" in txt["message"] and not (tmp_path / "mcp-notjsonl.txt").exists()
        learned = _tool(wire.call(15, "learn", {"trajectories": trajs, "end_round": True}))
        assert learned["ok"] and learned["result"]["episodes"] == 1
    finally:
        stderr = wire.close()
    assert "Traceback" not in stderr, stderr
