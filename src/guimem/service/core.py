"""`MemoryService`: every memory operation, once, for the CLI, the HTTP API and the MCP server."""

from __future__ import annotations

import difflib
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ValidationError

from guimem.embeddings import CachedEmbedder, create_embedder
from guimem.envs.base import Env
from guimem.errors import (
    ConfigError,
    DataError,
    EpisodeRefusedError,
    FileConflictError,
    LifecycleError,
    NotFoundError,
)
from guimem.memory.base import Curator, Memory, RecallQuery, Refused, RoundReport
from guimem.memory.catalog import INNER_KINDS, counts, describe
from guimem.memory.exchange import ExportHeader, export_header, export_lines, export_target, parse_export, write_import
from guimem.memory.factory import check_method, load_models, open_memory
from guimem.memory.keys import MetaKey, RoundClock, meta_key
from guimem.memory.names import namespace_of
from guimem.memory.settings import MemorySpec
from guimem.service.models import (
    EventView,
    ItemDetail,
    ItemSummary,
    LearnReply,
    RecallReply,
    RecallRequest,
    Stats,
    TransferReply,
)
from guimem.service.queue import EntryStatus, EpisodeQueue
from guimem.settings import GuimemSettings
from guimem.storage import Record, Store, create_store
from guimem.types import ItemKind, ItemStatus, Task, Trajectory, read_trajectories, shorten, write_atomic


class _Tried(Exception):  # noqa: N818 - rolls a trial boundary back; never leaves this module
    """A trial boundary went through (and is rolled back)."""


def _first_line(exc: Exception) -> str:
    text = exc.message if isinstance(exc, DataError) else str(exc)
    return (text.splitlines() or [type(exc).__name__])[0][:300]


class ServiceSettings(BaseModel):
    """What a service instance serves."""

    store: str
    method: str = "steer"
    namespace: str | None = None
    data_dir: Path | None = None
    spec: MemorySpec = MemorySpec()
    create: bool = True


CURATION = {"admitted": "admit it", "retired": "retire it"}
"""The transitions a person makes (``guimem memory admit|retire``, ``POST /v1/items/{id}/admit|retire``)."""


def _known(what: str, given: str | None, known: list[str]) -> None:
    """Refuse a filter value that nothing is, or could be, filed under (a typo would otherwise list nothing)."""
    names = sorted({str(k) for k in known})
    if given is not None and given not in names:
        close = difflib.get_close_matches(given, names, n=3, cutoff=0.6)
        raise ConfigError(f"unknown {what} {given!r}", suggestion=f"did you mean {', '.join(map(repr, close))}?"
                          if close else f"one of {', '.join(names)}")


def _item_summary(rec: Record) -> ItemSummary:
    return ItemSummary(**describe(rec).model_dump())


class MemoryService:
    """One memory (a method in a namespace of a store) and every operation on it.

    Thread-safe: operations are serialised by a lock (the store itself is safe across processes).

    Args:
        settings: Store URL, method, namespace, data directory (paths for export/import must lie in it).
        process: Process settings (embedder, token encoding).
        env_factory: For verifying skills by replay during ``learn`` (optional).
    """

    def __init__(self, settings: ServiceSettings, process: GuimemSettings | None = None,
                 env_factory: Callable[[], Env] | None = None, embedder: CachedEmbedder | None = None) -> None:
        check_method(settings.method)
        self.settings = settings
        self.process = process or GuimemSettings()
        self.namespace = settings.namespace or namespace_of(settings.method)  # where `guimem eval` keeps it too
        self.store: Store = create_store(settings.store, create=settings.create)
        self._embedder = embedder or create_embedder(self.process.embedder)
        self._env_factory = env_factory
        try:
            self.memory: Memory = self._open()
        except BaseException:
            self.store.close()
            raise
        self._lock = threading.RLock()
        self._seen = self._marker()
        self.queue = EpisodeQueue(self.store, self.namespace)

    def _open(self) -> Memory:
        return open_memory(self.settings.method, self.store, self.process, spec=self.settings.spec,
                           namespace=self.namespace, embedder=self._embedder, env_factory=self._env_factory)

    def warm(self) -> str:
        """Load memory's embedding model and token encoding now (`load_models`): `guimem serve` calls it before it
        listens, so that the first recall does not wait for them; what was loaded.

        Raises:
            GuimemError: The embedder or the token encoding cannot work."""
        return load_models(self._embedder, self.process)

    def close(self) -> None:
        """Close the memory and its store (idempotent), and stop the embedder's embed-ahead thread."""
        self.memory.close()
        self.store.close()
        self._embedder.close()

    def _marker(self) -> tuple[str | None, str | None]:
        """What changes when any process commits to this memory: a round boundary, a curation, an import."""
        return (self.store.meta_get(meta_key(self.namespace, MetaKey.BOUNDARY)),
                self.store.meta_get(meta_key(self.namespace, MetaKey.VERSION)))

    def _changed(self) -> None:
        """Tell other processes on this store (replicas) that the memory changed (inside the write's transaction)."""
        key = meta_key(self.namespace, MetaKey.VERSION)
        self.store.meta_set(key, str(int(self.store.meta_get(key) or 0) + 1))

    def _fresh(self) -> None:
        """Reopen the memory when another process committed to it since this one last looked (two
        ``guimem serve`` replicas on one store: what one commits at a boundary, the other recalls next)."""
        marker = self._marker()
        if marker != self._seen:
            self.memory = self._open()
            self._seen = marker

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A change to the memory, one at a time across processes: in one transaction under the store's lock
        on this memory, from the latest committed state, telling the others when it commits. When it fails
        the store rolls back, and so does this process's view: the memory is reopened from the store."""
        try:
            with self.store.transaction():
                self.store.lock(meta_key(self.namespace, MetaKey.BOUNDARY))
                self._fresh()
                yield
                self._changed()
                self._seen = self._marker()
        except BaseException:
            self.memory = self._open()
            self._seen = self._marker()
            raise

    def recall(self, request: RecallRequest) -> RecallReply:
        """What memory shows the agent for this step."""
        task = Task(id=request.task_id, goal=request.goal, app=request.app or request.observation.app,
                    params=request.params)
        with self._lock:
            self._fresh()
            injection = self.memory.recall(RecallQuery(task=task, observation=request.observation, step=request.step,
                                                       slot=request.slot))
        return RecallReply(method=self.memory.name, injection=injection)

    def learn(self, trajectories: list[Trajectory], end_round: bool = False) -> LearnReply:
        """Keep episodes in the store for the next round boundary, all in one transaction (all or nothing);
        with ``end_round``, apply the boundary in the same transaction. Kept in the store, not in this
        process: any replica's boundary learns them, and a process that stops before the boundary loses none.
        An episode this memory already holds (same episode id: a retry) is not learned again (``repeated``)."""
        with self._lock, self.store.transaction():
            repeated = self.queue.add(trajectories)
            reply = LearnReply(episodes=len(trajectories), added=0, merged=0, dropped=0,
                               queued=len(trajectories) - repeated, repeated=repeated)
            if end_round:
                report = self._boundary()
                reply.added, reply.merged, reply.dropped = (report.learned.added, report.learned.merged,
                                                            report.learned.dropped)
                reply.queued, reply.quarantined = 0, len(report.refused)
        return reply

    def learn_file(self, path: Path, end_round: bool = False) -> LearnReply:
        """Learn from a trajectory file; a malformed line fails the whole file and stores nothing."""
        return self.learn(read_trajectories(self._path(path, must_exist=True)), end_round)

    def end_round(self) -> Stats:
        """Learn the queued episodes, consolidate (merges, admissions) and return the counts."""
        self._boundary()
        return self.stats()

    def _boundary(self) -> RoundReport:
        """The memory's one boundary (`Memory.commit_round`) over the queue, one at a time per memory across
        processes. An entry the memory cannot learn is quarantined (kept, with its reason) and the boundary
        is tried again without it; each try either commits whole or leaves nothing of itself."""
        aside: list[Refused] = []
        with self._lock:
            while True:  # bounded: every try that does not commit sets one queued entry aside
                report = self._commit_queue(aside)
                if report is not None:
                    report.refused[:0] = aside
                    return report

    def _commit_queue(self, aside: list[Refused]) -> RoundReport | None:
        """One try at the boundary; None when an episode was refused (quarantined, added to ``aside``) and the
        boundary must be tried again without it."""
        entries: list[tuple[Record, Trajectory]] = []
        try:
            with self._writing():
                pending = self.queue.pending()
                entries = pending.entries
                next_round = self.memory.committed_round() + 1
                report = self.memory.commit_round(next_round, [t for _, t in entries])
                if not isinstance(report, RoundReport):  # a user's method may return nothing: it refused nothing
                    report = RoundReport(next_round)
                refused = [*pending.broken, *((entries[r.index][0], r.reason) for r in report.refused)]
                for rec, reason in refused:
                    self.queue.set_aside(rec, reason)
                refused_ids = {rec.id for rec, _ in refused}
                for rec, _ in entries:
                    if rec.id not in refused_ids:
                        self.queue.learned(rec)
                report.refused = [Refused(-1, rec.id, reason) for rec, reason in refused]
                return report
        except EpisodeRefusedError as exc:
            index, reason = exc.index, exc.reason
        except (ValueError, DataError) as exc:  # the memory's consolidation failed on data it did not name
            found = self._culprit(entries) if entries else None
            if found is None:  # not the data's doing: it fails without any episode, or it did not fail again
                raise
            index, reason = found, _first_line(exc)
        rec = entries[index][0]
        with self.store.transaction():
            self.queue.set_aside(rec, reason)
        aside.append(Refused(-1, rec.id, reason))
        return None

    def _culprit(self, entries: list[tuple[Record, Trajectory]]) -> int | None:
        """The entry whose episode makes the boundary fail: the shortest failing prefix of the queue, found by
        bisection, each try rolled back (the memory is reopened after each, as after any failed write); None
        when the boundary fails with no episode at all, or the whole queue no longer fails."""
        if self._fails([]) or not self._fails([t for _, t in entries]):
            return None
        lo, hi = 0, len(entries)  # a boundary over the first lo entries commits, over the first hi it fails
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._fails([t for _, t in entries[:mid]]):
                hi = mid
            else:
                lo = mid
        return hi - 1

    def _fails(self, trajectories: list[Trajectory]) -> bool:
        try:
            with self._writing():
                self.memory.commit_round(self.memory.committed_round() + 1, trajectories)
                raise _Tried
        except _Tried:
            return False
        except (ValueError, DataError):
            return True

    def stats(self) -> Stats:
        """Item counts by kind and status, and the queue: waiting and quarantined episodes."""
        raw = self.store.stats(self.namespace)
        items = counts(self.store, self.namespace)
        quarantined = self.queue.count(EntryStatus.QUARANTINED)
        return Stats(method=self.memory.name, namespace=self.namespace, items=items, events=raw.events,
                     boundaries_applied=RoundClock(self.store, self.namespace).applied(),
                     committed_round_index=self.memory.committed_round(),
                     queued=self.queue.count(EntryStatus.QUEUED), quarantined=quarantined,
                     quarantine=self.queue.quarantine() if quarantined else [])

    def list_items(self, kind: str | None = None, status: str | None = None) -> list[ItemSummary]:
        """Current items, optionally filtered; ``kind`` is what an item is or its stored kind (``skill`` lists a
        stack's skills, kept as knowledge, with the skills library's).

        Raises:
            ConfigError: A kind or status that is neither in guimem's vocabulary nor held by this memory (a typo).
        """
        held = [key.split(":", 1) for key in counts(self.store, self.namespace)]
        _known("kind", kind, [*ItemKind, *(k for k, _ in held)])
        _known("status", status, [*ItemStatus, *(st for _, st in held)])
        statuses = [status] if status else None
        if kind is None or kind not in INNER_KINDS:
            return [_item_summary(r) for r in self.store.query(self.namespace, kind, statuses)]
        records = [*self.store.query(self.namespace, kind, statuses),
                   *self.store.query(self.namespace, ItemKind.KNOWLEDGE.value, statuses)]
        return [i for i in map(_item_summary, records) if kind in (i.kind, i.what)]

    def _record(self, item_id: str) -> Record:
        rec = self.store.get(item_id)
        if rec.namespace != self.namespace:
            raise NotFoundError("item", item_id)
        return rec

    def show(self, item_id: str) -> ItemDetail:
        """One item in full (a skill with its code)."""
        rec = self._record(item_id)
        body = json.loads(rec.body)
        code = None
        if rec.kind == "skill" or body.get("program"):
            from guimem.memory.program import SkillProgram

            code = SkillProgram.model_validate(body["program"]).render(str(body.get("name", "skill")),
                                                                       shorten(str(body.get("description", "")), 200))
        return ItemDetail(**_item_summary(rec).model_dump(), body=body, code=code)

    def history(self, item_id: str) -> list[EventView]:
        """An item's events (with their evidence), oldest first."""
        self._record(item_id)
        return [EventView(seq=e.seq, type=e.type, item_id=e.item_id, payload=json.loads(e.payload or "{}"),
                          created_at=e.created_at) for e in self.store.events(item_id=item_id)]

    def set_status(self, item_id: str, status: str, reason: str) -> ItemSummary:
        """Manual curation (``admitted`` or ``retired``), checked and logged as an event."""
        if not isinstance(self.memory, Curator):
            raise ConfigError(f"{self.memory.name} items have no admission lifecycle",
                              suggestion="curation applies to steer and stack memories")
        try:
            with self._lock, self._writing():
                self.memory.set_status(item_id, status, reason)
        except LifecycleError as exc:  # say what a person can do here: only admit and retire are curation
            doable = [CURATION[s] for s in exc.allowed if s in CURATION]
            left = [s for s in exc.allowed if s not in CURATION]
            exc.suggestion = "; ".join([
                *([f"from {exc.current} it can be curated: {' or '.join(doable)}"] if doable else []),
                *([f"{' or '.join(left)} is decided by its trials at a round boundary, not by hand"] if left else []),
            ]) or exc.suggestion
            raise
        return _item_summary(self._record(item_id))

    def _path(self, path: Path, must_exist: bool = False) -> Path:
        """``path`` resolved (relative to the data directory when one is set) and confined to it.

        Raises:
            ConfigError: The path leaves the data directory (links are followed to tell).
            FileConflictError: It is a folder.
            NotFoundError: ``must_exist`` and there is no such file.
        """
        root = self.settings.data_dir
        try:
            resolved = (root / path if root is not None else path).resolve()
        except (OSError, ValueError) as exc:
            raise DataError(f"unusable path: {exc}", path=str(path)) from None
        if root is not None and not resolved.is_relative_to(root.resolve()):
            raise ConfigError("the path is outside the data directory",
                              suggestion="use a path inside the configured data directory")
        if resolved.is_dir():
            raise FileConflictError("is a folder, not a file", path=str(path), suggestion="name a .jsonl file")
        if must_exist and not resolved.is_file():
            raise NotFoundError("file", str(path))
        return resolved

    def export(self, path: Path) -> TransferReply:
        """Every version of every item, and every event, as JSONL: a new file (or a previous export
        replaced) in the data directory's ``exports/`` folder, see `guimem.memory.exchange`."""
        target = export_target(self.settings.data_dir, path)
        lines, records, events = export_lines(self.store, self._header())
        write_atomic(target, ("\n".join(lines) + "\n").encode("utf-8"))
        return TransferReply(path=self._shown(target), records=records, events=events)

    def _header(self) -> ExportHeader:
        return export_header(self.store, self.namespace, self.memory.name, self._embedder.name)

    def _shown(self, path: Path) -> str:
        """A path as replies show it: relative to the data directory when there is one (never the absolute one)."""
        root = self.settings.data_dir
        return str(path.relative_to(root.resolve())) if root is not None and path.is_relative_to(root.resolve()) \
            else str(path)

    def import_(self, path: Path) -> TransferReply:
        """Load an export into this memory: validated first, written in one transaction.

        Idempotent: versions and events this memory already holds are not written again, so the
        same export imported twice gives the same store; the export's round counter is kept.
        Another method's export, and ids that belong to another namespace of this store, are refused.
        """
        source = self._path(path, must_exist=True)
        header, records, events = parse_export(source, self._header())
        with self._lock, self._writing():
            written, logged = write_import(self.store, self.namespace, source, header, records, events,
                                           untrusted=self.settings.spec.defences.untrusted_imports)
            self.memory = self._reopen(source)
        return TransferReply(path=self._shown(source), records=written, events=logged)

    def _reopen(self, source: Path) -> Memory:
        """The memory rebuilt from the store; items that do not load as this method fail the import (rolled back)."""
        try:
            return self._open()
        except (ValidationError, KeyError, TypeError, ValueError) as exc:
            raise DataError(f"the imported items do not load as a {self.settings.method} memory: "
                            f"{str(exc).splitlines()[0][:200]}", path=source.name) from None
