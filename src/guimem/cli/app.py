"""The ``guimem`` command: global options, and the sub-commands registered from sibling modules."""

from __future__ import annotations

import logging

import typer

from guimem import __version__
from guimem.cli import evaluate as eval_cmd
from guimem.cli import memory as memory_cmd
from guimem.cli import run as run_cmd
from guimem.cli import serve as serve_cmd
from guimem.cli.help import Command, Group
from guimem.cli.output import CliState, emit_json, fail, state
from guimem.errors import ConfigError
from guimem.harness.doctor import run_doctor
from guimem.settings import GuimemSettings, load_settings

app = typer.Typer(
    name="guimem",
    cls=Group,
    help="Long-term memory for frozen GUI agents, and a lifelong evaluation that proves it helps.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"guimem {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document instead of tables."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress details to stderr."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Global options (put them before the sub-command: ``guimem --json doctor``)."""
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = load_settings()
    except ConfigError as exc:
        ctx.obj = CliState(json=json_output, settings=GuimemSettings.model_construct())
        raise fail(ctx, exc) from None
    ctx.obj = CliState(json=json_output, settings=settings)


@app.command(cls=Command)
def doctor(
    ctx: typer.Context,
    json_output: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    no_browser: bool = typer.Option(False, "--no-browser", help="Skip starting a real headless Chromium."),
    model: bool = typer.Option(False, "--model", help="Also check the model endpoint (GUIMEM_LLM__BASE_URL) "
                               "answers, and that the local llama.cpp decodes (in a child process)."),
) -> None:
    """Check Chromium, chromedriver, the e5 embedder, the store, the desktop display stack and optional extras; exit 1
    if a required part fails."""
    st = state(ctx, json_output)
    report = run_doctor(st.settings, browser=not no_browser, model=model)
    if st.json or json_output:
        emit_json(report)
    else:
        from rich.markup import escape
        from rich.table import Table

        table = Table(title="guimem doctor")
        for col in ("part", "status", "detail"):
            table.add_column(col)
        for c in report.checks:
            status = "[green]ok[/]" if c.ok else ("[red]MISSING[/]" if c.required else "[yellow]optional[/]")
            detail = escape(c.detail) if c.ok or not c.fix else f"{escape(c.detail)}\n[dim]fix: {escape(c.fix)}[/]"
            table.add_row(c.name, status, detail)
        st.console.print(table)
    if not report.ok:
        raise typer.Exit(1)


app.command("run", cls=Command)(run_cmd.run)
app.command("suites", cls=Command)(run_cmd.suites)
app.command("eval", cls=Command)(eval_cmd.eval_command)
app.command("report", cls=Command)(eval_cmd.report_command)
app.command("compare", cls=Command)(eval_cmd.compare_command)
app.command("learn", cls=Command)(memory_cmd.learn)
app.command("recall", cls=Command)(memory_cmd.recall)
app.add_typer(memory_cmd.memory_app, name="memory")
app.command("serve", cls=Command)(serve_cmd.serve)


def main() -> None:
    """Entry point of the ``guimem`` script."""
    app()
