"""Which memory a command means: ``--method`` as a method, a namespace or a method's own name, or the
store's only memory when it is not given (the commands that read a memory share this)."""

from __future__ import annotations

from pathlib import Path

import typer

from guimem.cli.output import CliState
from guimem.errors import ConfigError, GuimemError
from guimem.memory.names import StoredMemory, find_memory, held_summary, namespace_of, stored_memories
from guimem.storage import create_store
from guimem.storage.base import is_shared_url

FIND = typer.Option(None, "--method", "-m", help="The memory: a method (steer, my_pkg.mod:MyMemory), the namespace "
                    "it is kept under, or its own name. Default: the store's only memory.")
DEFAULT_METHOD = "steer"
LEARN_FIRST = "learn into it first: guimem learn <episodes.jsonl> --store <store> --method <method>"


def held(store: str) -> list[StoredMemory]:
    """The memories ``store`` holds.

    Raises:
        DataError: No store at that path.
    """
    opened = create_store(store, create=False)
    try:
        return stored_memories(opened)
    finally:
        opened.close()


def is_new_store(store: str) -> bool:
    """Whether ``store`` names a SQLite file that is not there yet (opening it would make it)."""
    if is_shared_url(store):
        return False
    path = store.removeprefix("sqlite:///").removeprefix("sqlite://")
    return path != ":memory:" and not Path(path).exists()


def resolve_memory(store: str, method: str | None, adds: bool = False) -> tuple[str, str]:
    """(method, namespace) of the memory ``method`` names in ``store``; without ``method``, the store's only one.

    Only a command that adds memory (``adds``: ``learn``, ``import``) may name a memory the store does not
    hold yet; any other is refused, so that reading a store never writes a new memory into it. A store that
    does not exist yet holds the method under its usual namespace; opening it then says whether it may be
    created.

    Raises:
        ConfigError: ``method`` names no memory there (or one the store does not hold, when not ``adds``),
            or none is given and the store holds several (or none, when not ``adds``).
    """
    try:
        opened = create_store(store, create=False)
    except GuimemError:
        chosen = method or DEFAULT_METHOD
        return chosen, namespace_of(chosen)
    try:
        found = stored_memories(opened)
        named = find_memory(opened, method) if method is not None else None
    finally:
        opened.close()
    if named is not None:
        if not adds and named[1] not in {m.namespace for m in found}:
            raise ConfigError(f"the store holds no {method} memory" if found else "the store holds no memory yet",
                              suggestion=f"give --method one it holds: {held_summary(found)}" if found else LEARN_FIRST)
        return named
    if not found:
        if not adds:
            raise ConfigError("the store holds no memory yet", suggestion=LEARN_FIRST)
        return DEFAULT_METHOD, DEFAULT_METHOD
    if len(found) == 1 and found[0].method:
        return found[0].method, found[0].namespace
    raise ConfigError("the store holds more than one memory (or one whose method is not recorded)",
                      suggestion=f"give --method; {held_summary(found)}")


def print_held(st: CliState, store: str, found: list[StoredMemory]) -> None:
    """The memories of a store, one per line, for ``guimem memory stats`` without ``--method``."""
    st.console.print(f"{store} holds {len(found)} {'memory' if len(found) == 1 else 'memories'}"
                     + (" (give --method to see one)" if found else ""), markup=False)
    for m in found:
        name = f"{m.name} ({m.method})" if m.name and m.method else (m.method or "method not recorded")
        items = ", ".join(f"{k}: {v}" for k, v in m.items.items())
        st.console.print(f"  {m.namespace}: {name}, {m.events} {'event' if m.events == 1 else 'events'}"
                         + (f"; {items}" if items else ""), markup=False)
