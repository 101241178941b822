"""CLI, HTTP and MCP expose the same operations (one service object underneath)."""

from __future__ import annotations

import asyncio
import sys

from typer.main import get_command

from guimem.cli.app import app as cli_app
from guimem.service.mcp import TOOL_OPERATIONS, build_server
from guimem.service.operations import OPERATIONS
from tests.service.test_core import service

CLI = {"recall": "recall", "learn": "learn", "end_round": "memory end-round", "stats": "memory stats",
       "list": "memory list", "show": "memory show", "history": "memory history", "export": "memory export",
       "import": "memory import", "admit": "memory admit", "retire": "memory retire"}
HTTP = {"recall": ("POST", "/v1/recall"), "learn": ("POST", "/v1/learn"), "end_round": ("POST", "/v1/end_round"),
        "stats": ("GET", "/v1/stats"), "list": ("GET", "/v1/items"), "show": ("GET", "/v1/items/{item_id}"),
        "history": ("GET", "/v1/items/{item_id}/history"), "export": ("POST", "/v1/export"),
        "import": ("POST", "/v1/import"), "admit": ("POST", "/v1/items/{item_id}/admit"),
        "retire": ("POST", "/v1/items/{item_id}/retire")}


def _cli_commands() -> set[str]:
    root = get_command(cli_app)
    names = set(root.commands)  # type: ignore[attr-defined]
    memory = root.commands["memory"]  # type: ignore[attr-defined]
    return names | {f"memory {n}" for n in memory.commands}


def test_every_operation_is_a_cli_command():
    assert set(CLI) == set(OPERATIONS)
    assert set(CLI.values()) <= _cli_commands()


def test_every_operation_is_an_http_route(tmp_path):
    from guimem.service.http import create_app

    app = create_app(service(tmp_path))
    routes = {(m, r.path) for r in app.routes for m in getattr(r, "methods", set())}
    assert set(HTTP) == set(OPERATIONS)
    assert set(HTTP.values()) <= routes


def test_every_operation_is_an_mcp_tool(tmp_path):
    server = build_server(service(tmp_path))
    tools = {t.name for t in asyncio.run(server.list_tools())}
    assert set(TOOL_OPERATIONS.values()) == set(OPERATIONS)
    assert set(TOOL_OPERATIONS) == tools, sys.version
