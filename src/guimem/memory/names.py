"""Which memory a name means: the namespace a method is kept under, and the memories a store holds.

A memory is kept under a namespace of its store. For a registered method it is the method's name
(``steer``); for your own method, given by import path (``my_pkg.last_success:LastSuccessMemory``),
it is the class name in lower case (``lastsuccessmemory``), so the folder, the store and the
namespace read alike. `open_memory` records in the store which method a namespace was opened with
and the method's own ``name``, so the memory is found again by any of the three.
"""

from __future__ import annotations

import difflib
import json

from pydantic import BaseModel, Field

from guimem.errors import ConfigError
from guimem.memory.catalog import counts
from guimem.memory.keys import MEMORIES_KEY, QUEUE_SUFFIX, MetaKey, meta_key
from guimem.registry import Registry, default_registry, is_target
from guimem.storage import Store


def namespace_of(method: str) -> str:
    """The namespace ``method`` is kept under in its own store (a shared store prefixes the run)."""
    return method.rsplit(":", 1)[-1].rsplit(".", 1)[-1].lower() if is_target(method) else method


class StoredMemory(BaseModel):
    """One memory a store holds.

    Attributes:
        namespace: Where it is kept in the store.
        method: What opens it (a registered name or an import path); None when the store predates
            the record (then the method's import path must be given).
        name: The method's own ``name``, when recorded.
        events: Events logged in it.
        items: Current items by ``kind:status``.
    """

    namespace: str
    method: str | None = None
    name: str | None = None
    events: int = 0
    items: dict[str, int] = Field(default_factory=dict)


def record_method(store: Store, namespace: str, method: str, name: str) -> None:
    """Note in the store which method ``namespace`` holds and its own name (written only when they change)."""
    for suffix, value in ((MetaKey.METHOD, method), (MetaKey.NAME, name)):
        if store.meta_get(meta_key(namespace, suffix)) != value:
            store.meta_set(meta_key(namespace, suffix), value)
    known = _recorded(store)
    if namespace not in known:
        store.meta_set(MEMORIES_KEY, json.dumps(sorted({*known, namespace})))


def recorded_name(store: Store, namespace: str) -> str | None:
    """The own ``name`` of the method ``namespace`` was opened with, when recorded."""
    return store.meta_get(meta_key(namespace, MetaKey.NAME))


def _recorded(store: Store) -> list[str]:
    raw = store.meta_get(MEMORIES_KEY)
    try:
        value = json.loads(raw) if raw else []
    except ValueError:
        return []
    return [str(ns) for ns in value] if isinstance(value, list) else []


def stored_memories(store: Store, registry: Registry | None = None) -> list[StoredMemory]:
    """Every memory the store holds items or events of, with the method each was opened with (a store
    written before methods were recorded: a shipped method's namespace is its name)."""
    registered = set((registry or default_registry()).names("memory"))
    out = []
    for ns in sorted({*store.namespaces(), *_recorded(store)}):
        if ns.endswith(QUEUE_SUFFIX):
            continue
        raw = store.stats(ns)
        shipped = ns.rsplit("/", 1)[-1]
        method = store.meta_get(meta_key(ns, MetaKey.METHOD)) or (shipped if shipped in registered else None)
        out.append(StoredMemory(namespace=ns, method=method,
                                name=recorded_name(store, ns), events=raw.events,
                                items=counts(store, ns)))
    return out


def find_memory(store: Store, given: str, registry: Registry | None = None) -> tuple[str, str]:
    """(method, namespace) of the memory ``given`` names in ``store``: a method (registered or import path),
    a namespace the store holds, or a stored method's own ``name``.

    A method the store does not hold yet is kept under `namespace_of` it (a memory written before the
    namespace was the class name is found under the import path itself).

    Raises:
        ConfigError: ``given`` names no memory in the store; the error lists those it holds.
    """
    reg = registry or default_registry()
    held = stored_memories(store, reg)
    namespaces = {m.namespace for m in held}
    if is_target(given) or given in reg.names("memory"):
        return given, (given if given in namespaces and namespace_of(given) not in namespaces else namespace_of(given))
    for m in held:
        if given in (m.namespace, m.name) and m.method is not None:
            return m.method, m.namespace
        if given == m.namespace:
            raise ConfigError(f"the store holds {given!r} but not which method wrote it",
                              suggestion="give --method with the method's import path (my_pkg.module:Class)")
    known = list(dict.fromkeys([*reg.names("memory"), *namespaces, *(m.name for m in held if m.name)]))
    close = difflib.get_close_matches(given, known, n=3, cutoff=0.5)
    raise ConfigError(f"unknown memory {given!r}: not a method, and the store holds no memory of that name",
                      suggestion=f"did you mean {', '.join(repr(c) for c in close)}?" if close else held_summary(held))


def held_summary(held: list[StoredMemory]) -> str:
    """One line naming the memories a store holds (for an error's suggestion)."""
    if not held:
        return "the store holds no memory yet"
    return "it holds " + ", ".join(f"{m.namespace} ({m.method or 'method not recorded'})" for m in held)
