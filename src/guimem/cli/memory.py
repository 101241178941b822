"""``guimem learn``, ``guimem recall`` and ``guimem memory ...``: thin layers over `MemoryService`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from pydantic import BaseModel, ValidationError
from rich.table import Table

from guimem.cli.help import Command, Group
from guimem.cli.lookup import FIND, held, print_held, resolve_memory
from guimem.cli.output import CliState, emit_json, fail, state
from guimem.errors import ConfigError, DataError, GuimemError
from guimem.memory.exchange import parse_export
from guimem.memory.settings import MemorySpec
from guimem.registry import default_registry
from guimem.service.core import MemoryService, ServiceSettings
from guimem.service.models import RecallRequest, Stats
from guimem.types import Injection, Observation, plural
from guimem.types.files import read_regular, read_trajectories
from guimem.types.strictjson import StrictJSONError, loads_strict

STORE = typer.Option(..., "--store", help="Store: a SQLite path, or postgresql://...")
ADDS = typer.Option(None, "--method", "-m", help="The memory: a method (steer, my_pkg.mod:MyMemory), the namespace "
                   "it is kept under, or its own name. Default: the store's only memory (steer in a new store).")
JSON = typer.Option(False, "--json", help="Print JSON.")
ADHOC_TASK = "adhoc"
memory_app = typer.Typer(cls=Group, help="Inspect, curate, export and import a memory.", no_args_is_help=True)


@contextmanager
def _service(ctx: typer.Context, store: str, method: str | None, verify: bool = False,
             create: bool = False) -> Iterator[MemoryService]:
    """The service on the memory ``method`` names in ``store`` (`resolve_memory`); only commands that write
    new memory (``create``) may create the store."""
    st = state(ctx)
    try:
        method, namespace = resolve_memory(store, method, adds=create)
    except GuimemError as exc:
        raise fail(ctx, exc) from None
    env_holder: list[object] = []
    factory: Callable[[], object] | None = None
    if verify:
        from guimem.harness.factory import make_env

        def factory() -> object:
            if not env_holder:
                env_holder.append(make_env("miniwob", st.settings))
            return env_holder[0]

    try:
        service = MemoryService(ServiceSettings(store=store, method=method, namespace=namespace, create=create,
                                                spec=MemorySpec(extractor=st.settings.extractor)), st.settings,
                                env_factory=factory)  # type: ignore[arg-type]
    except GuimemError as exc:
        raise fail(ctx, exc) from None
    try:
        yield service
    except GuimemError as exc:
        raise fail(ctx, exc) from None
    finally:
        service.close()
        for env in env_holder:
            env.close()  # type: ignore[attr-defined]


def _out(st: CliState, as_json: bool, value: BaseModel | list[BaseModel], render: Callable[[], None]) -> None:
    if st.json or as_json:
        emit_json([v.model_dump(mode="json") for v in value] if isinstance(value, list) else value)
    else:
        render()


def learn(
    ctx: typer.Context,
    trajectories: Path = typer.Argument(..., help="A trajectory file (JSONL, one episode per line)."),
    store: str = STORE,
    method: str | None = ADDS,
    end_round: bool = typer.Option(True, "--end-round/--no-end-round",
                                   help="Apply the round boundary after learning (STEER admissions, merges)."),
    verify: bool = typer.Option(False, "--verify", help="Verify induced skills by replay in MiniWoB++."),
    json_output: bool = JSON,
) -> None:
    """Learn from a trajectory file. Transactional: a malformed line fails the file and stores nothing."""
    st = state(ctx, json_output)
    try:
        episodes = read_trajectories(trajectories)  # the whole file checked before a store is opened or made
    except GuimemError as exc:
        raise fail(ctx, exc) from None
    with _service(ctx, store, method, verify, create=True) as svc:
        reply = svc.learn(episodes, end_round)
        stats = svc.stats()
    _out(st, json_output, reply, lambda: st.console.print(
        f"learned {plural(reply.episodes - reply.repeated, 'episode')} into {svc.settings.method}"
        + (f" ({reply.repeated} already learned by episode id: not learned again)" if reply.repeated else "")
        + (f" ({stats.queued} kept in the store for the next round boundary)" if stats.queued else "")
        + (f" ({reply.quarantined} set aside: see memory stats)" if reply.quarantined else "")
        + f"; items now {stats.items}", markup=False))


MAX_OBSERVATION_BYTES = 20_000_000


def _observation(path: Path) -> Observation:
    """An observation file: a regular file of bounded size, UTF-8, strict JSON (never a device or FIFO)."""
    data = read_regular(path, MAX_OBSERVATION_BYTES)
    try:
        raw = loads_strict(data.decode("utf-8"), nul=True)
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text (byte offset {exc.start})", path=str(path)) from None
    except StrictJSONError as exc:
        raise DataError(str(exc), path=str(path), suggestion="give an Observation as one JSON object") from None
    try:
        return Observation.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise DataError(first["msg"], path=str(path), field=".".join(str(p) for p in first["loc"])) from None


def recall(
    ctx: typer.Context,
    goal: str = typer.Option(..., "--goal", "-g", help="The task goal in words."),
    observation: Path = typer.Option(..., "--observation", help="The current screen: an Observation as JSON "
                                     "(docs/formats.md, 'Observations'; e.g. examples/observation.json)."),
    store: str = STORE,
    method: str | None = FIND,
    task: str | None = typer.Option(None, "--task", help="Task id, as in the episodes memory learned from (knowledge "
                                    "is kept per task: without it, little or nothing is recalled)."),
    param: list[str] = typer.Option([], "--param", help="Task parameter as key=value (repeatable)."),
    json_output: bool = JSON,
) -> None:
    """What memory would inject for this goal and screen."""
    st = state(ctx, json_output)
    bad = [p for p in param if "=" not in p or not p.split("=", 1)[0].strip()]
    if bad:
        raise fail(ctx, ConfigError(f"--param {bad[0]!r} is not key=value", suggestion="e.g. --param username=alice"))
    params = dict(p.split("=", 1) for p in param)
    try:
        screen = _observation(observation)
        request = _request(goal=goal, observation=screen, task_id=task or ADHOC_TASK, params=params)
    except GuimemError as exc:
        raise fail(ctx, exc) from None
    with _service(ctx, store, method) as svc:
        reply = svc.recall(request)
    inj = reply.injection
    _recall_hints(st, screen, inj, task)

    def render() -> None:
        st.console.print(inj.text or f"(nothing injected{': ' + inj.note if inj.note else ''})", markup=False)
        st.console.print(f"[dim]{plural(len(inj.items), 'item')}, {plural(inj.tokens, 'token')}[/]")

    _out(st, json_output, reply, render)


OPTION_OF = {"goal": "--goal", "task_id": "--task", "params": "--param"}


def _request(**fields: object) -> RecallRequest:
    """The recall request, its limits said as the option that broke them.

    Raises:
        ConfigError: A value out of the request's bounds (an empty or too long goal, a too long task id).
    """
    try:
        return RecallRequest.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        option = OPTION_OF.get(str(first["loc"][0]), str(first["loc"][0]))
        raise ConfigError(f"{option}: {first['msg']}", suggestion=f"give {option} within its bounds "
                          "(a goal of 1 to 4,000 characters, a task id of at most 200)") from None


def _recall_hints(st: CliState, screen: Observation, inj: Injection, task: str | None) -> None:
    """Say on stderr why a recall may have found nothing: an empty screen, or no ``--task``."""
    if not screen.elements:
        st.err.print("[yellow]warning:[/] the observation has no elements, and memory matches a screen by its "
                     "elements (docs/formats.md, 'Observations')", soft_wrap=True)
    if task is None and not inj.items:
        st.err.print(f"[yellow]nothing recalled for task {ADHOC_TASK!r}:[/] no --task was given, and knowledge is "
                     "kept per task; give --task with the id of the task it was learned from", soft_wrap=True)
    if inj.unfit:
        st.err.print(f"[yellow]{plural(len(inj.unfit), 'item')} withheld as unfit[/] for this goal or screen: learned "
                     "for another verb, with other field values, or on another task and unable to act here "
                     "(its placeholders need --param values, or its targets are not on the screen)", soft_wrap=True)


@memory_app.command("stats", cls=Command)
def stats_cmd(ctx: typer.Context, store: str = STORE, method: str | None = FIND, json_output: bool = JSON) -> None:
    """Item counts by kind and status; without --method, of the store's only memory, else the memories it holds."""
    st = state(ctx, json_output)
    if method is None:
        try:
            found = held(store)
        except GuimemError as exc:
            raise fail(ctx, exc) from None
        if len(found) != 1 or found[0].method is None:
            _out(st, json_output, [*found], lambda: print_held(st, store, found))
            return
    with _service(ctx, store, method) as svc:
        s = svc.stats()
    _out(st, json_output, s, lambda: st.console.print(
        f"{s.method} ({s.namespace}): {plural(s.events, 'event')}" + _rounds(s) + "\n" +
        "\n".join(f"  {k}: {v}" for k, v in s.items.items())))


def _rounds(s: Stats) -> str:
    """Rounds counted from 1, as everywhere: the last committed one, and boundaries the lifecycle passed."""
    parts = [f"learned through round {s.committed_round_index + 1}"] if s.committed_round_index >= 0 else []
    if s.boundaries_applied is not None:
        parts.append(f"{plural(s.boundaries_applied, 'round boundary', 'round boundaries')} applied")
    return f" ({', '.join(parts)})" if parts else ""


@memory_app.command("list", cls=Command)
def list_cmd(ctx: typer.Context, store: str = STORE, method: str | None = FIND,
             kind: str | None = typer.Option(None, "--kind", help="node, edge, skill, knowledge, procedure or "
                                             "warning (skill and edge list a stack's too)."),
             status: str | None = typer.Option(None, "--status", help="e.g. admitted, candidate, verified."),
             json_output: bool = JSON) -> None:
    """Current items."""
    st = state(ctx, json_output)
    with _service(ctx, store, method) as svc:
        items, name = svc.list_items(kind, status), svc.memory.name

    def render() -> None:
        table = Table(title=f"{name}: {len(items)} {'item' if len(items) == 1 else 'items'}")
        for col in ("id", "kind", "status", "v", "summary"):
            table.add_column(col)
        for i in items:
            what = i.kind if i.what in ("", i.kind) else f"{i.what} ({i.kind})"  # a stack's skill: skill (knowledge)
            table.add_row(i.id, what, i.status + (" (by hand)" if i.manual else ""), str(i.version), i.summary)
        st.console.print(table)

    _out(st, json_output, [*items], render)


@memory_app.command("show", cls=Command)
def show_cmd(ctx: typer.Context, item: str = typer.Argument(..., help="Item id."), store: str = STORE,
             method: str | None = FIND, json_output: bool = JSON) -> None:
    """One item in full (a skill with its code)."""
    st = state(ctx, json_output)
    with _service(ctx, store, method) as svc:
        detail = svc.show(item)
    _out(st, json_output, detail, lambda: st.console.print(
        f"{detail.id} {detail.what or detail.kind} [{detail.status}] v{detail.version}\n" +
        (detail.code + "\n" if detail.code else "") + json.dumps(detail.body, indent=2), markup=False))


@memory_app.command("history", cls=Command)
def history_cmd(ctx: typer.Context, item: str = typer.Argument(..., help="Item id."), store: str = STORE,
                method: str | None = FIND, json_output: bool = JSON) -> None:
    """An item's events with their evidence."""
    st = state(ctx, json_output)
    with _service(ctx, store, method) as svc:
        events = svc.history(item)
    _out(st, json_output, [*events], lambda: st.console.print(
        "\n".join(f"{e.seq:>6} {e.type:<10} {json.dumps(e.payload)}" for e in events), markup=False))


@memory_app.command("export", cls=Command)
def export_cmd(ctx: typer.Context, path: Path = typer.Argument(..., help="Output JSONL."), store: str = STORE,
               method: str | None = FIND, json_output: bool = JSON) -> None:
    """Every version and event of the memory as JSONL."""
    st = state(ctx, json_output)
    with _service(ctx, store, method) as svc:
        reply = svc.export(path)
    _out(st, json_output, reply, lambda: st.console.print(
        f"exported {reply.records} record versions and {reply.events} events to {reply.path}"))


@memory_app.command("import", cls=Command)
def import_cmd(ctx: typer.Context, path: Path = typer.Argument(..., help="An export JSONL."), store: str = STORE,
               method: str | None = typer.Option(None, "--method", "-m", help="The memory to load it into: a method, "
                                                 "a namespace or a memory's own name. Default: the store's only "
                                                 "memory; in a new store, the export's own."),
               json_output: bool = JSON) -> None:
    """Load an export (validated first; one transaction)."""
    st = state(ctx, json_output)
    try:
        method = _import_target(path, store, method)
    except GuimemError as exc:
        raise fail(ctx, exc) from None
    with _service(ctx, store, method, create=True) as svc:
        reply = svc.import_(path)
    _out(st, json_output, reply, lambda: st.console.print(
        f"imported {reply.records} record versions and {reply.events} events from {reply.path}"))


def _import_target(path: Path, store: str, method: str | None) -> str | None:
    """The memory an import goes into, the export checked whole first (so that a bad file makes no store): the
    one ``method`` names, else the store's only one, else (a new or empty store) the export's own.

    Raises:
        DataError: A line of the export is not valid, or it is another shipped method's export.
    """
    header, _, _ = parse_export(path, None)
    shipped = set(default_registry().names("memory"))
    try:
        holds = bool(held(store))
    except GuimemError:
        holds = False  # no store yet: the import makes it
    if method is None and not holds and header.method in shipped:
        return header.method
    if method in shipped and header.method in shipped and method != header.method and not holds:
        raise DataError(f"an export of a {header.method} memory cannot be imported into a {method} memory",
                        path=path.name, field="method", suggestion=f"import it with --method {header.method}")
    return method


def _curate(ctx: typer.Context, item: str, store: str, method: str | None, status: str, reason: str,
            as_json: bool) -> None:
    st = state(ctx, as_json)
    with _service(ctx, store, method) as svc:
        summary = svc.set_status(item, status, reason)
    _out(st, as_json, summary, lambda: st.console.print(f"{summary.id} is now {summary.status}"))


@memory_app.command("admit", cls=Command)
def admit_cmd(ctx: typer.Context, item: str = typer.Argument(...), store: str = STORE, method: str | None = FIND,
              reason: str = typer.Option("manual", "--reason"), json_output: bool = JSON) -> None:
    """Admit an item in trial (manual curation, logged)."""
    _curate(ctx, item, store, method, "admitted", reason, json_output)


@memory_app.command("retire", cls=Command)
def retire_cmd(ctx: typer.Context, item: str = typer.Argument(...), store: str = STORE, method: str | None = FIND,
               reason: str = typer.Option("manual", "--reason"), json_output: bool = JSON) -> None:
    """Retire an admitted item (manual curation, logged)."""
    _curate(ctx, item, store, method, "retired", reason, json_output)


@memory_app.command("end-round", cls=Command)
def end_round_cmd(ctx: typer.Context, store: str = STORE, method: str | None = FIND, json_output: bool = JSON) -> None:
    """Apply a round boundary: merges, admissions, rejections."""
    st = state(ctx, json_output)
    with _service(ctx, store, method) as svc:
        s = svc.end_round()
    _out(st, json_output, s, lambda: st.console.print(f"boundary applied{_rounds(s)}: {s.items}"))
