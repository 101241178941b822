"""Every key a memory keeps in its store's meta table, and the one round clock.

A memory lives in a namespace of its store; what it keeps beside its items (which round it committed,
how many boundaries it applied, the embedder it was built with, the method it was opened with) sits in the
store's meta table under ``<namespace>.<key>``. Those keys are written here and nowhere else, so a key
cannot be spelt two ways, and the round clock — the last committed round *and* the count of boundaries
applied — is one part (`RoundClock`), moved only by the one boundary (`guimem.memory.base.RoundLog.commit`),
read by every surface (the admission lifecycle's trial slots, the service's stats and export).
"""

from __future__ import annotations

from enum import StrEnum

from guimem.storage import Store


class MetaKey(StrEnum):
    """A key of one memory's meta entries (stored as ``<namespace>.<value>``)."""

    BOUNDARY = "boundary"
    """The last committed round index (0-based; absent: none)."""
    APPLIED = "round"
    """How many round boundaries were applied (the admission lifecycle's trial clock; exported)."""
    VERSION = "version"
    """Bumped by a service on every write (replicas reopen when it moves)."""
    HISTORY = "history"
    """The stack's per-task outcomes from before its items existed (their first controls)."""
    EMBEDDER = "embedder"
    """The embedder the memory's vectors were made with (another one is refused)."""
    METHOD = "method"
    """The method it was opened with (registered name or import path)."""
    NAME = "name"
    """That method's own ``name``."""


MEMORIES_KEY = "memories"
"""Store-wide key: the namespaces memories were opened under, as a JSON list."""
LEGACY_BOUNDARY_KEY = "boundary"
"""Store-wide key of run folders written before boundaries were namespaced (read, never written)."""
QUEUE_SUFFIX = ".queue"
"""Namespace suffix of the episodes a service keeps for the next boundary (beside the memory)."""


def meta_key(namespace: str, key: MetaKey) -> str:
    """The store's meta key of ``key`` for the memory in ``namespace``."""
    return f"{namespace}.{key.value}"


def queue_namespace(namespace: str) -> str:
    """Where a service queues episodes for the memory in ``namespace``."""
    return namespace + QUEUE_SUFFIX


class RoundClock:
    """A memory's round clock in its store: the last committed round and the boundaries applied.

    Args:
        store: The memory's store.
        namespace: The memory's namespace in it.
    """

    def __init__(self, store: Store, namespace: str) -> None:
        self.store = store
        self.namespace = namespace

    def _get(self, key: MetaKey) -> str | None:
        return self.store.meta_get(meta_key(self.namespace, key))

    def committed(self) -> int:
        """The last committed round (-1 when none)."""
        value = self._get(MetaKey.BOUNDARY) or self.store.meta_get(LEGACY_BOUNDARY_KEY)
        return int(value) if value is not None else -1

    def applied(self) -> int:
        """How many boundaries were applied. A store written before every method kept the count (only the
        admission lifecycle did): the rounds up to the last committed one."""
        value = self._get(MetaKey.APPLIED)
        return int(value) if value is not None else self.committed() + 1

    def mark(self, round_index: int) -> None:
        """One boundary applied, ending round ``round_index`` (in the caller's transaction)."""
        applied = self.applied() + 1
        self.store.meta_set(meta_key(self.namespace, MetaKey.BOUNDARY), str(round_index))
        self.store.meta_set(meta_key(self.namespace, MetaKey.APPLIED), str(applied))

    def restart(self) -> None:
        """Count rounds from the first again (a memory learned on one suite, then used on another); the
        boundaries applied are kept (trial slots go on)."""
        applied = self.applied()
        self.store.meta_set(meta_key(self.namespace, MetaKey.APPLIED), str(applied))
        self.store.meta_set(meta_key(self.namespace, MetaKey.BOUNDARY), "-1")

    def carry(self, applied: int | None) -> None:
        """Keep an export's count of boundaries when it is ahead of this memory's (an import)."""
        if applied is not None and applied > self.applied():
            self.store.meta_set(meta_key(self.namespace, MetaKey.APPLIED), str(applied))
