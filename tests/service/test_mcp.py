"""The MCP server, driven by a real MCP client session over stdio (a spawned `guimem serve --mcp stdio`)."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.memory.conftest import LOGIN, PASS, USER, episode
from tests.service.test_core import request


def _payload(result) -> dict:
    if result.structured_content:
        data = result.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(result.content[0].text)


async def _session(store: str, data_dir: str) -> list[dict]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "guimem.cli", "serve", "--mcp", "stdio", "--store", store,
                                      "--method", "graph", "--data-dir", data_dir],
        env={**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing"})
    out = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        out.append({"server": init.server_info.name, "version": init.server_info.version})
        tools = await session.list_tools()
        out.append({"tools": sorted(t.name for t in tools.tools)})
        trajs = [episode([USER, PASS, LOGIN], seed=1).model_dump(mode="json"),
                 episode([LOGIN], seed=2).model_dump(mode="json")]
        out.append(_payload(await session.call_tool("learn", {"trajectories": trajs, "end_round": True})))
        out.append(_payload(await session.call_tool("stats", {})))
        req = request()
        out.append(_payload(await session.call_tool("recall", {"goal": req.goal,
                                                               "observation": req.observation.model_dump(mode="json"),
                                                               "task_id": "form", "params": req.params})))
        out.append(_payload(await session.call_tool("show_item", {"item_id": "nope"})))
    return out


def test_mcp_tools_over_a_real_stdio_session(tmp_path):
    server, tools, learned, stats, recalled, missing = asyncio.run(_session(str(tmp_path / "m.sqlite"),
                                                                           str(tmp_path)))
    from guimem import __version__

    assert server == {"server": "guimem", "version": __version__}
    assert {"recall", "learn", "end_round", "stats", "show_item", "item_history"} <= set(tools["tools"])
    assert learned["ok"] and learned["result"]["episodes"] == 2
    assert stats["ok"] and stats["result"]["items"]["node:active"] >= 1
    assert recalled["ok"] and {i["success"] for i in recalled["result"]["injection"]["items"]} == {True, False}
    assert not missing["ok"] and missing["error"] == "NotFoundError"


async def _unknown_arguments(store: str, data_dir: str) -> list:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "guimem.cli", "serve", "--mcp", "stdio", "--store", store,
                                      "--method", "graph", "--data-dir", data_dir],
        env={**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing"})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        typo = await session.call_tool("learn", {"trajectories": [], "end_rond": True})
        extra = await session.call_tool("end_round", {"yes": "x"})
        fine = await session.call_tool("stats", {})
        return [tools, typo, extra, fine]


def test_a_tool_call_with_an_argument_the_tool_does_not_take_is_an_error_not_ignored(tmp_path):
    tools, typo, extra, fine = asyncio.run(_unknown_arguments(str(tmp_path / "m.sqlite"), str(tmp_path)))
    assert all(t.input_schema.get("additionalProperties") is False for t in tools.values())
    assert typo.is_error and "end_rond" in typo.content[0].text
    assert extra.is_error and "yes" in extra.content[0].text
    assert not fine.is_error
