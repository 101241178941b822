"""Typed persistence for memory methods: one item table per kind, with a body model and typed events.

Every method writes through an `ItemTable`: bodies are pydantic models (never JSON built by hand),
event names come from `EventType`, and every change is a new version with its event in the same
transaction (the store supersedes, never overwrites).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from enum import StrEnum
from typing import Generic, TypeVar

from pydantic import BaseModel

from guimem.errors import NotFoundError
from guimem.memory.kit import MemoryKit
from guimem.storage import Record
from guimem.storage.base import Batching, EventDraft, Scanning
from guimem.types import ItemKind, ItemStatus

Body = TypeVar("Body", bound=BaseModel)


class EventType(StrEnum):
    """Every event a shipped method logs."""

    CREATED = "created"
    MERGED = "merged"
    PROPOSED = "proposed"
    TRIAL = "trial"
    CONTROL = "control"
    EVIDENCE = "evidence"
    USED = "used"
    SHOWN = "shown"
    CANDIDATE = "candidate"
    ADMITTED = "admitted"
    REJECTED = "rejected"
    RETIRED = "retired"
    VERIFIED = "verified"
    UNVERIFIED = "unverified"
    SCOPE = "scope"
    QUARANTINED = "quarantined"


STATUS_EVENTS: dict[ItemStatus, EventType] = {
    ItemStatus.CANDIDATE: EventType.CANDIDATE, ItemStatus.TRIAL: EventType.TRIAL,
    ItemStatus.ADMITTED: EventType.ADMITTED, ItemStatus.REJECTED: EventType.REJECTED,
    ItemStatus.RETIRED: EventType.RETIRED, ItemStatus.QUARANTINED: EventType.QUARANTINED,
    ItemStatus.VERIFIED: EventType.VERIFIED, ItemStatus.UNVERIFIED: EventType.UNVERIFIED,
    ItemStatus.ACTIVE: EventType.CREATED,
}
"""The event that logs an item's move to a status (written out: a status and an event that share a name are
two words, not one)."""


def status_event(status: ItemStatus) -> EventType:
    """The event logged when an item moves to ``status``."""
    return STATUS_EVENTS[status]


Payload = BaseModel | Mapping[str, object]


def payload_json(payload: Payload) -> str:
    """An event payload as JSON text."""
    return payload.model_dump_json() if isinstance(payload, BaseModel) else json.dumps(payload)


class ItemTable(Generic[Body]):
    """The records of one kind in one memory's namespace, read and written as ``Body`` models.

    Args:
        kit: The memory's store and namespace.
        kind: The record kind.
        body: The body model.
    """

    def __init__(self, kit: MemoryKit, kind: ItemKind, body: type[Body]) -> None:
        self.kit = kit
        self.kind = kind
        self.body = body

    def load(self, statuses: Sequence[str] | None = None) -> list[tuple[Record, Body]]:
        """Current versions, in creation order, with their parsed bodies."""
        return [(rec, self.body.model_validate_json(rec.body))
                for rec in self.kit.store.query(self.kit.namespace, self.kind.value, statuses)]

    def stream(self, statuses: Sequence[str] | None = None, chunk: int = 500
               ) -> Iterator[list[tuple[Record, Body]]]:
        """`load`, ``chunk`` items at a time, so a first open of a million items holds one chunk of bodies at a
        time (a store that cannot scan is read whole, then handed out in chunks)."""
        store, namespace, kind = self.kit.store, self.kit.namespace, self.kind.value
        chunks = store.scan(namespace, kind, statuses, chunk) if isinstance(store, Scanning) else \
            (part for records in [store.query(namespace, kind, statuses)]
             for part in (records[i:i + chunk] for i in range(0, len(records), chunk)))
        for records in chunks:
            yield [(rec, self.body.model_validate_json(rec.body)) for rec in records]

    def get_many(self, item_ids: Sequence[str]) -> Iterator[tuple[Record, Body]]:
        """The current versions of ``item_ids`` that exist, parsed one at a time as they are taken (a few statements
        on a store that batches reads, one read per id on one that does not). Parsed bodies are handed out, not
        gathered: a caller that keeps only what it needs of each lets it go young (512 bodies held at once were
        read 5× slower than one at a time, all in the garbage collector)."""
        store = self.kit.store
        if isinstance(store, Batching):
            records = list(store.get_many(item_ids).values())
        else:
            records = []
            for item_id in item_ids:
                try:
                    records.append(store.get(item_id))
                except NotFoundError:
                    continue
        for rec in records:
            if rec.namespace == self.kit.namespace and rec.kind == self.kind.value:
                yield rec, self.body.model_validate_json(rec.body)

    def get(self, item_id: str) -> tuple[Record, Body]:
        """One item's current version (raises `NotFoundError`)."""
        rec = self.kit.store.get(item_id)
        return rec, self.body.model_validate_json(rec.body)

    def put(self, item_id: str, body: Body, status: str, event: EventType, payload: Payload,
            vector: bytes | None = None) -> Record:
        """Write a new version of an item, with its event."""
        return self.kit.store.put(Record(item_id, self.kind.value, self.kit.namespace, status, body.model_dump_json(),
                                         vector),
                                  EventDraft(event.value, item_id, self.kit.namespace, payload_json(payload)))

    def log(self, item_id: str | None, event: EventType, payload: Payload) -> None:
        """Append an event about an item (or about the memory, with no item)."""
        self.kit.store.append_event(EventDraft(event.value, item_id, self.kit.namespace, payload_json(payload)))
