"""How the CLI prints: rich tables for people, one JSON document for machines (``--json``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import typer
from pydantic import BaseModel
from rich.console import Console

from guimem.errors import GuimemError
from guimem.settings import GuimemSettings, load_settings


def _width() -> int | None:
    """Tables are wide: when stdout is not a terminal (make, CI logs, pipes) use 160 columns, not 80."""
    import os
    import sys

    if sys.stdout.isatty() or "COLUMNS" in os.environ:
        return None
    return 160


@dataclass
class CliState:
    """Options every command sees."""

    json: bool = False
    settings: GuimemSettings = field(default_factory=load_settings)
    console: Console = field(default_factory=lambda: Console(highlight=False, width=_width()))
    err: Console = field(default_factory=lambda: Console(stderr=True, highlight=False))


def state(ctx: typer.Context) -> CliState:
    """The shared CLI state."""
    obj = ctx.find_root().obj
    if not isinstance(obj, CliState):
        obj = CliState()
        ctx.find_root().obj = obj
    return obj


def emit_json(value: BaseModel | dict[str, Any] | list[Any]) -> None:
    """Print one JSON document on stdout."""
    if isinstance(value, BaseModel):
        typer.echo(value.model_dump_json(indent=2))
    else:
        typer.echo(json.dumps(value, indent=2, default=str))


def fail(ctx: typer.Context, exc: GuimemError, code: int = 2) -> typer.Exit:
    """Report a guimem error (as JSON under ``--json``) and return the exit to raise."""
    st = state(ctx)
    if st.json:
        emit_json({"error": type(exc).__name__, "message": exc.message, "suggestion": exc.suggestion})
    else:
        st.err.print(f"[bold red]error:[/] {exc.message}")
        if exc.suggestion:
            st.err.print(f"[yellow]hint:[/] {exc.suggestion}")
    return typer.Exit(code)
