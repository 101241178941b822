"""Issue 29: generated hostile trajectories (non-finite and huge numbers, deep nesting, odd unicode) through
learn + end_round on HTTP, MCP and the CLI: no 5xx, no traceback, and the memory keeps learning valid ones."""

from __future__ import annotations

import json
import uuid

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from guimem.cli.app import app as cli
from guimem.service.http import create_app
from tests.memory.conftest import LOGIN, PASS, USER, episode
from tests.service.test_core import service
from tests.service.test_mcp_wire import INIT, Wire

BASE = episode([USER, PASS, LOGIN], seed=1)
FIELDS = ("wall_ms", "started_at", "score", "x", "goal", "app", "timing", "index")
NUMBERS = st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1e308", "-1.7976931348623157e308",
                           "1" + "0" * 400, "1e-400", "-0.0", "123456789012345678901234567890"])
ODD_TEXT = st.sampled_from(['"\\ud800"', '"a\\u0000b"', '"\\udfff\\ud800x"', '"\\u202e\\u0301\\ufeff"',
                            '"\\ud83d\\ude00"']) | st.text(max_size=40).map(json.dumps)
NESTED = st.integers(min_value=2, max_value=3000).flatmap(
    lambda d: st.sampled_from(["[" * d + "]" * d, '{"a":' * d + "1" + "}" * d]))
RAW = NUMBERS | ODD_TEXT | NESTED


def _placed(field: str) -> dict:
    """The base episode (a fresh id) with ``"__RAW__"`` where ``field`` is."""
    t = json.loads(BASE.model_copy(update={"episode_id": uuid.uuid4().hex[:16]}).model_dump_json())
    step = t["steps"][0]
    target = {"wall_ms": (t, "wall_ms"), "started_at": (t, "started_at"), "score": (t["outcome"], "score"),
              "x": (step["observation"]["elements"][0]["bounds"], "x"), "goal": (t["task"], "goal"),
              "app": (step["observation"], "app"), "timing": (step["timings_ms"], "x"), "index": (step, "index")}
    holder, key = target[field]
    holder[key] = "__RAW__"
    return t


@st.composite
def hostile(draw: st.DrawFn) -> str:
    """One trajectory as JSON text with one field replaced by a hostile literal."""
    return json.dumps(_placed(draw(st.sampled_from(FIELDS)))).replace('"__RAW__"', draw(RAW))


def _valid() -> dict:
    return json.loads(BASE.model_copy(update={"episode_id": uuid.uuid4().hex[:16]}).model_dump_json())


LIMITS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])


def test_http_never_answers_5xx_and_keeps_learning(tmp_path):
    svc = service(tmp_path, method="graph")
    client = TestClient(create_app(svc), base_url="http://127.0.0.1", raise_server_exceptions=True)

    @LIMITS
    @given(hostile())
    def run(line: str) -> None:
        before = svc.stats().committed_round_index
        body = '{"trajectories": [' + line + ", " + json.dumps(_valid()) + '], "end_round": true}'
        r = client.post("/v1/learn", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code in (200, 400, 413, 422), r.text
        ok = client.post("/v1/learn", json={"trajectories": [_valid()], "end_round": True})
        assert ok.status_code == 200, ok.text
        after = svc.stats()
        assert after.committed_round_index == before + (2 if r.status_code == 200 else 1) and after.queued == 0

    run()
    svc.close()


def _tool_ok(reply: dict) -> bool:
    result = reply.get("result", {})
    if "error" in reply or result.get("isError"):
        return False
    data = result.get("structuredContent") or json.loads(result["content"][0]["text"])
    return bool(data.get("ok"))


def test_mcp_answers_every_hostile_line_and_keeps_learning(tmp_path):
    wire = Wire(tmp_path)
    ident = iter(range(100, 10_000))
    try:
        wire.send(INIT)
        assert wire.answer()["id"] == 1
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        @LIMITS
        @given(hostile())
        def run(line: str) -> None:
            n = next(ident)
            call = (f'{{"jsonrpc": "2.0", "id": {n}, "method": "tools/call", "params": {{"name": "learn", '
                    f'"arguments": {{"trajectories": [{line}], "end_round": true}}}}}}\n')
            wire.send(call.encode())
            reply = wire.answer()
            assert reply.get("id") in (n, None), reply
            assert _tool_ok(wire.call(next(ident), "learn", {"trajectories": [_valid()], "end_round": True}))

        run()
    finally:
        stderr = wire.close()
    assert "Traceback" not in stderr, stderr[-2000:]


@pytest.mark.slow
def test_the_cli_ends_each_hostile_file_in_one_line_and_keeps_learning(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    runner = CliRunner()
    store = str(tmp_path / "s.sqlite")

    @LIMITS
    @given(hostile())
    def run(line: str) -> None:
        bad = tmp_path / "bad.jsonl"
        bad.write_text(line + "\n" + json.dumps(_valid()) + "\n")
        result = runner.invoke(cli, ["learn", str(bad), "--store", store, "--method", "graph"])
        assert result.exit_code in (0, 2) and (result.exception is None or isinstance(result.exception, SystemExit))
        assert "Traceback" not in result.output
        if result.exit_code == 2:
            assert len([x for x in result.output.splitlines() if x.strip()]) == 1, result.output
        good = tmp_path / "good.jsonl"
        good.write_text(json.dumps(_valid()) + "\n")
        assert runner.invoke(cli, ["learn", str(good), "--store", store, "--method", "graph"]).exit_code == 0

    run()
    stats = json.loads(runner.invoke(cli, ["--json", "memory", "stats", "--store", store, "--method", "graph"]).output)
    assert stats["queued"] == 0 and stats["committed_round_index"] >= 24
