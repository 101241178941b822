"""MCP over stdio with every line checked before the MCP SDK reads it.

The SDK's stdio transport drops a line it cannot parse without answering, so a client that sent
garbage, or a valid request holding a lone surrogate, waits forever. Here each line is read with a
size bound and answered by JSON-RPC itself when it is not a request the SDK can take:

- not UTF-8, not strict JSON (NaN, numbers beyond ±1.8e308, nesting deeper than 64), too long:
  ``-32700`` parse error (``id`` null);
- JSON, but not a JSON-RPC 2.0 message (an array, no ``method``, ``jsonrpc`` other than ``"2.0"``):
  ``-32600`` invalid request, with the request's ``id`` when it has a usable one;
- a string holding a lone surrogate: ``-32602`` invalid params, with its ``id``.

Both the SDK and this reader write whole lines to the one stdout, one at a time.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator
from io import TextIOWrapper
from typing import Any, BinaryIO, cast

import anyio
import anyio.to_thread

from guimem.types.strictjson import LoneSurrogateError, StrictJSONError, loads_strict

log = logging.getLogger(__name__)
MAX_LINE = 50_000_000
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


def _error(code: int, message: str, ident: object = None) -> str:
    usable = ident if isinstance(ident, str | int) and not isinstance(ident, bool) else None
    return json.dumps({"jsonrpc": "2.0", "id": usable, "error": {"code": code, "message": message}})


def check_line(raw: bytes) -> tuple[str | None, str | None]:
    """``(line to pass on, None)``, ``(None, JSON-RPC error to answer)``, or ``(None, None)`` for a blank line."""
    if not raw.strip():
        return None, None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, _error(PARSE_ERROR, f"Parse error: not UTF-8 (byte {exc.start})")
    try:
        value = loads_strict(text, nul=True)
    except LoneSurrogateError as exc:
        return None, _error(INVALID_PARAMS, f"Invalid params: {exc}", _id_of(text))
    except StrictJSONError as exc:
        return None, _error(PARSE_ERROR, f"Parse error: {exc}")
    problem = _not_a_message(value)
    if problem is not None:
        return None, _error(INVALID_REQUEST, f"Invalid Request: {problem}",
                            value.get("id") if isinstance(value, dict) else None)
    return text.rstrip("\r\n"), None


def _id_of(text: str) -> object:
    """The ``id`` of a message that is JSON but failed a later check (depth is already bounded)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value.get("id") if isinstance(value, dict) else None


def _not_a_message(value: object) -> str | None:
    if not isinstance(value, dict):
        return "a message is one JSON object (batches are not supported)"
    if value.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if "method" in value:
        return None if isinstance(value["method"], str) else "method must be a string"
    if "result" in value or "error" in value:
        return None if "id" in value else "a response needs its id"
    return "no method"


class _Wire:
    """The stdout both the SDK and the line checker write: whole lines, one writer at a time."""

    def __init__(self, file: anyio.AsyncFile[str]) -> None:
        self.file = file
        self.lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self.lock:
            await self.file.write(text)
            await self.file.flush()

    async def flush(self) -> None:
        """Every write is flushed already."""


class _CheckedLines:
    """What the SDK reads as stdin: only lines `check_line` passes; the others are answered on the wire."""

    def __init__(self, source: BinaryIO, wire: _Wire) -> None:
        self.source = source
        self.wire = wire

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while True:
            raw = await anyio.to_thread.run_sync(self.source.readline, MAX_LINE + 1)
            if not raw:
                return
            if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
                rest = raw  # the rest of a line too long to read is skipped, never buffered
                while rest and not rest.endswith(b"\n"):
                    rest = await anyio.to_thread.run_sync(self.source.readline, 1 << 20)
                await self.wire.write(_error(PARSE_ERROR, f"Parse error: a line over {MAX_LINE} bytes") + "\n")
                continue
            line, error = check_line(raw)
            if error is not None:
                await self.wire.write(error + "\n")
            elif line is not None:
                yield line


async def serve_stdio(server: Any) -> None:
    """Serve ``server`` (an SDK ``MCPServer``) on stdin/stdout through the line checker.

    While serving, fd 0 reads the null device and fd 1 writes to stderr (as the SDK's own transport
    does), so stray output of a handler never corrupts the wire; both are restored at the end.
    """
    from mcp.server.stdio import stdio_server

    lowlevel = getattr(server, "_lowlevel_server", None)  # the SDK's own run_stdio_async uses it the same way
    if lowlevel is None:
        log.warning("this MCP SDK has no low-level server to wrap; serving stdio without the line checker")
        await server.run_stdio_async()
        return
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    try:
        with os.fdopen(wire_in, "rb", closefd=False) as fin, \
                TextIOWrapper(os.fdopen(wire_out, "wb", closefd=False), encoding="utf-8") as fout:
            wire = _Wire(anyio.wrap_file(fout))
            lines = _CheckedLines(fin, wire)
            # the SDK only iterates stdin and awaits stdout.write/flush: these two are duck-typed AsyncFiles
            async with stdio_server(stdin=cast("anyio.AsyncFile[str]", lines),
                                    stdout=cast("anyio.AsyncFile[str]", wire)) as (read, write):
                await lowlevel.run(read, write, lowlevel.create_initialization_options())
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)
