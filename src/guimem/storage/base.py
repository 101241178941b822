"""The `Store` protocol: versioned records (supersede, never edit) and an append-only event log.

Every memory method persists through this one protocol. A change to an item is a new version of it
plus an event, written in the same transaction; the previous version stays readable in its history.
"""

from __future__ import annotations

import re
import stat
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from guimem.errors import DataError
from guimem.registry import Registry, default_registry


def new_id(prefix: str = "") -> str:
    """A fresh unique id, optionally prefixed (``n-``, ``e-``, ``sk-``, ...)."""
    return f"{prefix}{uuid.uuid4().hex[:20]}"


@dataclass(frozen=True)
class Record:
    """One version of one item.

    Attributes:
        id: The item's stable id (all versions share it).
        kind: What it is (``node``, ``edge``, ``skill``, ``knowledge``, ...).
        namespace: Which memory it belongs to (one store can hold several methods' memories).
        status: Lifecycle status (``active``, ``candidate``, ``admitted``, ``deleted``, ...).
        body: The item as JSON text; the owning module parses it with its own model.
        vector: An optional float32 embedding.
        version: 1 for the first version; assigned by the store.
        created_at: Unix time the version was written; assigned by the store.
    """

    id: str
    kind: str
    namespace: str
    status: str
    body: str
    vector: bytes | None = None
    version: int = 0
    created_at: float = 0.0

    def vector_array(self) -> NDArray[np.float32] | None:
        """The embedding as an array, or None."""
        return None if self.vector is None else np.frombuffer(self.vector, dtype=np.float32)


def pack_vector(vector: NDArray[np.floating] | None) -> bytes | None:
    """Serialise an embedding for a `Record`."""
    return None if vector is None else np.asarray(vector, dtype=np.float32).tobytes()


@dataclass(frozen=True)
class Event:
    """One entry of the append-only log.

    Attributes:
        seq: Position in the log (monotonic per store).
        type: What happened (``created``, ``superseded``, ``admitted``, ``trial``, ...).
        item_id: The item concerned, if any.
        namespace: The memory it belongs to.
        payload: JSON text with the details (evidence, reasons).
        created_at: Unix time.
    """

    seq: int
    type: str
    item_id: str | None
    namespace: str
    payload: str
    created_at: float


@dataclass(frozen=True)
class EventDraft:
    """An event to append (the store assigns ``seq`` and time)."""

    type: str
    item_id: str | None
    namespace: str
    payload: str = "{}"


@dataclass
class StoreStats:
    """Counts for ``guimem memory stats``."""

    by_kind_status: dict[tuple[str, str], int] = field(default_factory=dict)
    events: int = 0


@runtime_checkable
class Store(Protocol):
    """Versioned records plus an append-only event log, with transactions."""

    @property
    def url(self) -> str:
        """Where the store is (a path or a database URL, without secrets)."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """All writes inside commit together or not at all; transactions nest."""
        ...

    def put(self, record: Record, event: EventDraft | None = None) -> Record:
        """Write a new version of ``record.id`` (superseding the current one) and its event."""
        ...

    def append_event(self, event: EventDraft) -> Event:
        """Append one event."""
        ...

    def lock(self, name: str) -> None:
        """Inside a transaction: hold an exclusive lock on ``name`` until it ends (other processes, on
        any machine, wait for it), e.g. so one round boundary of a namespace runs at a time."""
        ...

    def get(self, item_id: str) -> Record:
        """The current version of an item; raises `NotFoundError`."""
        ...

    def history(self, item_id: str) -> list[Record]:
        """Every version of an item, oldest first."""
        ...

    def query(
        self, namespace: str, kind: str | None = None, statuses: Sequence[str] | None = None
    ) -> list[Record]:
        """Current versions in ``namespace``, optionally filtered, in creation order."""
        ...

    def events(self, *, item_id: str | None = None, namespace: str | None = None, since: int = 0) -> list[Event]:
        """Events after ``since``, in log order."""
        ...

    def namespaces(self) -> list[str]:
        """Every namespace that holds items or events."""
        ...

    def stats(self, namespace: str | None = None) -> StoreStats:
        """Counts of current items by kind and status, and of events."""
        ...

    def meta_get(self, key: str) -> str | None:
        """A store-level setting (e.g. the embedder a memory was built with)."""
        ...

    def meta_set(self, key: str, value: str) -> None:
        """Set a store-level setting."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


_SECRET = re.compile(r"(://[^:/@]+:)[^@]+@")
_SECRET_PARAM = re.compile(r"(?i)(password=)[^&\s]+")


def mask_url(url: str) -> str:
    """``url`` with any password masked (in the user part or a ``password=`` parameter): safe to log or save."""
    return _SECRET_PARAM.sub(r"\1***", _SECRET.sub(r"\1***@", url))


def is_shared_url(url: str) -> bool:
    """Whether ``url`` names a database server (shared by processes on many machines), not a SQLite file."""
    return url.startswith(("postgresql://", "postgres://"))


@dataclass(frozen=True)
class Change:
    """An item written since a reader's position: its current version, and whether it is new since then."""

    record: Record
    new: bool


@runtime_checkable
class Scanning(Protocol):
    """A store that can hand out a namespace's current items a chunk at a time (the SQL stores can), so a
    memory of a million items is read without holding every record at once."""

    def scan(self, namespace: str, kind: str | None = None, statuses: Sequence[str] | None = None,
             chunk: int = 1000) -> Iterator[list[Record]]:
        """What `Store.query` returns, in the same order, in lists of at most ``chunk`` records."""
        ...


@runtime_checkable
class Batching(Protocol):
    """A store that can read many items' current versions in a few statements (the SQL stores can), so a pass
    over many ids (indexing a transfer pool) is not one round trip per item."""

    def get_many(self, item_ids: Sequence[str]) -> dict[str, Record]:
        """The current version of each of ``item_ids`` that exists (an unknown id is left out)."""
        ...


@runtime_checkable
class Versioned(Protocol):
    """A store that can say what changed in a namespace since a reader last looked (the SQL stores can)."""

    def position(self, namespace: str) -> int:
        """Where the namespace's writes have reached."""
        ...

    def changes(self, namespace: str, since: int, until: int) -> list[Change]:
        """Current versions of the items written after ``since`` up to ``until``, in creation order."""
        ...


def create_store(url: str, registry: Registry | None = None, *, create: bool = True) -> Store:
    """Open a store from a URL: ``postgresql://...`` or a SQLite path (``sqlite:///path`` or ``path``).

    Args:
        url: Where the store is.
        registry: Backends by name.
        create: When false (read-only commands), a SQLite file that does not exist, or is empty,
            is refused instead of being created.

    Raises:
        DataError: ``create`` is false and the SQLite file is missing or empty.
    """
    reg = registry or default_registry()
    if is_shared_url(url):
        store: Store = reg.create("store", "postgres", dsn=url)
        return store
    path = url.removeprefix("sqlite:///").removeprefix("sqlite://")
    if path != ":memory:":
        _check_path(Path(path), must_exist=not create)
    store = reg.create("store", "sqlite", path=path)
    return store


def _check_path(path: Path, must_exist: bool) -> None:
    """A store path that SQLite can open as a store: a regular file (or, when ``must_exist`` is false, nothing yet).

    Raises:
        DataError: No file (when it must exist), a folder, a device, FIFO or socket, an empty file, or a path the
            system refuses (too long, not a folder on the way).
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        if must_exist:
            raise DataError("no memory store at this path", path=str(path), suggestion="check --store (a store is "
                            "created by `guimem learn` or `guimem eval`)") from None
        return
    except OSError as exc:
        raise DataError(f"cannot use this path: {exc.strerror or exc}", path=str(path)[:300],
                        suggestion="give a shorter path to a store file in a folder that exists") from None
    if stat.S_ISDIR(st.st_mode):
        raise DataError("is a folder, not a memory store", path=str(path),
                        suggestion="give the store file, e.g. runs/eval/memory/steer.sqlite")
    if not stat.S_ISREG(st.st_mode):
        raise DataError("is a device, FIFO or socket, not a memory store", path=str(path),
                        suggestion="give a store file, e.g. memory.sqlite")
    if must_exist and st.st_size == 0:
        raise DataError("is an empty file (0 bytes), not a memory store", path=str(path),
                        suggestion="give a store written by guimem, or remove the empty file")
