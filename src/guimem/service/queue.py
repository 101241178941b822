"""The episode queue of a served memory: episodes learned and waiting, in the store, for the next boundary.

Kept in a namespace beside the memory's own (``<namespace>.queue``), so queuing leaves the memory's
revision, and its index cache, alone. An entry is ``queued``, then ``learned`` by a boundary, or
``quarantined`` with the reason when the memory cannot learn it. An entry's id is derived from its
episode id, so the same episode learned again (a client's retry) is recognised and not queued twice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum

from pydantic import ValidationError

from guimem.errors import NotFoundError
from guimem.memory.keys import queue_namespace
from guimem.service.models import QuarantinedEpisode
from guimem.storage import Record, Store
from guimem.storage.base import EventDraft
from guimem.types import Trajectory

KIND = "episode"


class EntryStatus(StrEnum):
    """Where a queued episode stands (also the type of the event that put it there)."""

    QUEUED = "queued"
    LEARNED = "learned"
    QUARANTINED = "quarantined"


@dataclass(frozen=True)
class Pending:
    """The queued entries: those that validate as episodes, and those that do not (with the reason)."""

    entries: list[tuple[Record, Trajectory]]
    broken: list[tuple[Record, str]]


class EpisodeQueue:
    """The queue of one memory in its store (a part the service holds).

    Args:
        store: The memory's store.
        namespace: The memory's namespace (the queue's is ``<namespace>.queue``).
    """

    def __init__(self, store: Store, namespace: str) -> None:
        self.store = store
        self.memory_namespace = namespace
        self.namespace = queue_namespace(namespace)

    def entry_id(self, episode_id: str) -> str:
        """The queue entry of an episode (the same episode always has the same entry)."""
        digest = hashlib.sha256(f"{self.memory_namespace}\x00{episode_id}".encode()).hexdigest()[:32]
        return f"ep-{digest}"

    def add(self, trajectories: list[Trajectory]) -> int:
        """Queue the episodes not seen before (inside the caller's transaction); returns how many were seen."""
        seen = 0
        ids: set[str] = set()
        for t in trajectories:
            item_id = self.entry_id(t.episode_id)
            if item_id in ids or self._exists(item_id):
                seen += 1
                continue
            ids.add(item_id)
            self.store.put(Record(item_id, KIND, self.namespace, EntryStatus.QUEUED, t.model_dump_json()),
                           EventDraft(EntryStatus.QUEUED, item_id, self.namespace,
                                      json.dumps({"episode": t.episode_id})))
        return seen

    def _exists(self, item_id: str) -> bool:
        try:
            self.store.get(item_id)
        except NotFoundError:
            return False
        return True

    def pending(self) -> Pending:
        """The queued entries in the order they were queued."""
        entries: list[tuple[Record, Trajectory]] = []
        broken: list[tuple[Record, str]] = []
        for rec in self.store.query(self.namespace, KIND, [EntryStatus.QUEUED]):
            try:
                entries.append((rec, Trajectory.model_validate_json(rec.body)))
            except ValidationError as exc:
                first = exc.errors()[0]
                broken.append((rec, f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"[:300]))
        return Pending(entries, broken)

    def learned(self, rec: Record) -> None:
        """Mark an entry learned."""
        self.store.put(Record(rec.id, KIND, self.namespace, EntryStatus.LEARNED, rec.body))

    def set_aside(self, rec: Record, reason: str) -> None:
        """Quarantine an entry: kept, never learned, the reason logged as its event."""
        self.store.put(Record(rec.id, KIND, self.namespace, EntryStatus.QUARANTINED, rec.body),
                       EventDraft(EntryStatus.QUARANTINED, rec.id, self.namespace, json.dumps({"reason": reason})))

    def count(self, status: EntryStatus) -> int:
        """How many entries stand at ``status``."""
        return self.store.stats(self.namespace).by_kind_status.get((KIND, status.value), 0)

    def quarantine(self, limit: int = 100) -> list[QuarantinedEpisode]:
        """Quarantined entries with their reasons, newest first (at most ``limit``)."""
        out = []
        for rec in reversed(self.store.query(self.namespace, KIND, [EntryStatus.QUARANTINED])[-limit:]):
            reasons = [json.loads(e.payload or "{}").get("reason") for e in self.store.events(item_id=rec.id)
                       if e.type == EntryStatus.QUARANTINED]
            out.append(QuarantinedEpisode(id=rec.id, episode=_episode_id(rec.body),
                                          reason=str(reasons[-1] if reasons else "")))
        return out


def _episode_id(body: str) -> str:
    try:
        value = json.loads(body)
    except ValueError:
        return ""
    return str(value.get("episode_id", ""))[:200] if isinstance(value, dict) else ""
