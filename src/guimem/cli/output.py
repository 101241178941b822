"""How the CLI prints: rich tables for people, one JSON document for machines (``--json``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape

from guimem.errors import ConfigError, GuimemError
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


def state(ctx: typer.Context, json_output: bool = False) -> CliState:
    """The shared CLI state; a command's own ``--json`` makes its errors JSON too."""
    obj = ctx.find_root().obj
    if not isinstance(obj, CliState):
        obj = CliState()
        ctx.find_root().obj = obj
    obj.json = obj.json or json_output
    return obj


def emit_json(value: BaseModel | dict[str, Any] | list[Any]) -> None:
    """Print one JSON document on stdout."""
    if isinstance(value, BaseModel):
        typer.echo(value.model_dump_json(indent=2))
    else:
        typer.echo(json.dumps(value, indent=2, default=str))


def registered(kind: str) -> str:
    """The registered names of ``kind`` for a ``--help`` text (from the registry, so never out of date)."""
    from guimem.registry import default_registry

    return ", ".join(default_registry().names(kind))


EXIT_INFRA = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def exit_code_for(exc: GuimemError) -> int:
    """1 when the infrastructure failed (`GuimemError.infrastructure`: browser, model endpoint, store, a
    stopped run), 2 for bad input, a reply in the wrong form or an id that does not exist."""
    return EXIT_INFRA if exc.infrastructure else EXIT_USAGE


def fail(ctx: typer.Context, exc: GuimemError, code: int | None = None) -> typer.Exit:
    """Report a guimem error on one line (one JSON document under ``--json``); return the exit to raise."""
    st = state(ctx)
    if st.json:
        emit_json({"error": type(exc).__name__, "message": exc.message, "suggestion": exc.suggestion})
    else:
        fix = f" [yellow]fix:[/] {escape(exc.suggestion)}" if exc.suggestion else ""
        st.err.print(f"[bold red]error:[/] {escape(exc.message)}{fix}", soft_wrap=True)
    return typer.Exit(exit_code_for(exc) if code is None else code)


def check_out_dir(out: Path) -> None:
    """Create the run folder, or say in one line why it cannot be one.

    Raises:
        ConfigError: ``out`` is a file, or cannot be created.
    """
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a folder", suggestion="give a new or existing folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the run folder {out}: {exc.strerror or exc}",
                          suggestion="give a folder you can write to") from None
