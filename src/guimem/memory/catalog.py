"""The counts of a stored memory by kind and status: the one count that every surface shows.

The CLI (``guimem memory stats``, ``guimem memory memories``), the HTTP API and the inspector (through
`MemoryService.stats`) and the report all count through `counts`, so they cannot disagree. A kind is the
stored record's kind (``node``, ``edge``, ``skill``, ``knowledge``: `guimem.types.ItemKind`); what a
knowledge item is inside (a procedure, a warning, a stack's edge or skill) is its detail, not its count.
"""

from __future__ import annotations

from guimem.storage import Store


def count_key(kind: str, status: str) -> str:
    """The key of a count: ``kind:status`` (``knowledge:trial``)."""
    return f"{kind}:{status}"


def counts(store: Store, namespace: str) -> dict[str, int]:
    """The current items of the memory in ``namespace`` by ``kind:status``, sorted by key: one grouped count
    in the store, no item read."""
    by = store.stats(namespace).by_kind_status
    return {count_key(kind, status): n for (kind, status), n in sorted(by.items())}
