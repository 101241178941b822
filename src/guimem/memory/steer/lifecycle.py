"""STEER's admission lifecycle as a part: items, trial evidence, the gate, merges and status changes.

`SteerMemory` and `StackMemory` each hold one (with their own proposer); neither inherits from the
other nor reads the other's state. Round semantics: ``observe`` records evidence and queues
proposals; ``end_round`` applies the gate, merges the proposals and moves to the next round, so an
item admitted at the end of round r is first injected in round r + 1.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
from pydantic import TypeAdapter, ValidationError

from guimem.errors import DataError, NotFoundError
from guimem.memory.base import LearnReport
from guimem.memory.hostile import screen_item
from guimem.memory.indexcache import IndexCache
from guimem.memory.keys import MetaKey, RoundClock, meta_key
from guimem.memory.kit import MemoryKit
from guimem.memory.settings import AdmissionRules, GateSettings
from guimem.memory.steer.items import (
    ALLOWED,
    UNDER_TEST,
    Evidence,
    ItemStatus,
    KnowledgeItem,
    Scope,
    TrialRecord,
    check_transition,
    is_screen_avoid,
)
from guimem.memory.steer.propose import Proposer
from guimem.memory.steer.scope import earn_scope, split, transferable
from guimem.memory.steer.trials import Arm, assign, gate, record
from guimem.memory.table import EventType, status_event
from guimem.memory.view import ItemView
from guimem.storage.base import Change
from guimem.types import ItemKind, Origin, Task, Trajectory

Entry = tuple[KnowledgeItem, ItemStatus]
Buckets = dict[tuple[str, str], list[tuple[int, str]]]
OnScan = Callable[[Sequence[tuple[str, KnowledgeItem]]], None]
"""Told each chunk of live items a first open reads (the stack embeds their texts there)."""
LIVE = tuple(s.value for s in (ItemStatus.ADMITTED, *UNDER_TEST))
_HISTORY = TypeAdapter(dict[str, list[TrialRecord]])


def content_id(key: str) -> str:
    """A stable name of an item's content key, the same in every store and namespace: trial/control
    assignment hashes it, so the same run gives the same arms wherever its memory is kept (it was the
    item id itself before ids were scoped by namespace, so older stores keep their assignments)."""
    return "k-" + hashlib.sha1(key.encode()).hexdigest()[:20]


def item_id_for(key: str, namespace: str) -> str:
    """A stable id from an item's content key within its namespace (ids are unique in a store: two
    memories in one store, e.g. two runs' steer memories in one PostgreSQL database, never share one)."""
    return "k-" + hashlib.sha1(f"{namespace}\x00{key}".encode()).hexdigest()[:20]


def _key_digest(key: str) -> bytes:
    """A content key as 16 bytes of its SHA-256: what is kept of every item's key to find the item a proposal
    merges into (a key spells out a whole behaviour; a million of them do not belong in memory)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[:16]


def _pool(item: KnowledgeItem) -> str:
    """``+`` and the app whose other tasks may try ``item`` (`transferable`; the app may be ""), or ""."""
    return "+" + item.applicability.app if transferable(item) else ""


def _bucket(item: KnowledgeItem) -> tuple[str, str]:
    if item.scope is Scope.TASK:
        return ("task", item.applicability.task)
    if item.scope is Scope.APP:
        return ("app", item.applicability.app)
    return ("global", "")


class Admission:
    """Knowledge items that earn admission through trials against matched controls.

    Args:
        kit: Store, namespace (items are ``knowledge`` records; the round is the memory's `RoundClock`).
        gate_settings: When evidence admits or rejects an item.
        proposer: Turns an episode into candidate items.
        rules: The stack's rules beyond matched controls (`AdmissionRules`); None keeps STEER's: every
            pending item is shown only in its trial arm, admitted items are never re-judged.
        on_scan: Told each chunk of live items when the memory opens without its index cache (the items
            are read a chunk at a time and not kept: a first open holds one chunk of bodies at a time), and
            the live items a `refresh` reads while the items are not all held (so that what recall needs of
            them, their vectors, is ready before an episode asks).
    """

    def __init__(self, kit: MemoryKit, gate_settings: GateSettings, proposer: Proposer,
                 rules: AdmissionRules | None = None, on_scan: OnScan | None = None) -> None:
        self.kit = kit
        self.gate_settings = gate_settings
        self.proposer = proposer
        self.rules = rules
        self._on_scan = on_scan
        self.clock = RoundClock(kit.store, kit.namespace)
        self.round = self.clock.applied()
        self._loaded: dict[str, Entry] | None = None  # every item; None until something needs them all
        # items read one by one for recall while _loaded is None, their counts, the store position and the cache
        self.view = ItemView(kit, ItemKind.KNOWLEDGE, KnowledgeItem)
        self.cache = self.view.cache
        self._proposals: list[KnowledgeItem] = []
        self._evidence: dict[str, list[TrialRecord]] = {}
        self._outcomes: list[TrialRecord] = []
        self.history: dict[str, list[TrialRecord]] = self._load_history() if rules else {}
        # live items by scope bucket, and the transferable ones by app (`pool`), with their entry positions
        self._buckets: Buckets | None = None
        self._pools: Buckets | None = None
        # every item's content key (its digest) → id, while not every item is held: a round's proposals merge
        # into the item of their key (`_merge_proposals`); the cache's sorted arrays, and those written since
        self._key_digests: np.ndarray = np.zeros(0, dtype="S16")
        self._key_ids: np.ndarray = np.zeros(0, dtype="S1")
        self._keys_since: dict[bytes, str] = {}
        self._dirty = False  # the buckets or keys changed since the cache was written
        if not self._open_cached():
            self._scan(on_scan)

    @property
    def _history_key(self) -> str:
        return meta_key(self.kit.namespace, MetaKey.HISTORY)

    def _load_history(self) -> dict[str, list[TrialRecord]]:
        raw = self.kit.store.meta_get(self._history_key)
        if not raw:
            return {}
        try:
            return _HISTORY.validate_json(raw)
        except ValidationError as exc:
            raise DataError(f"task history in the store is unreadable: {exc.errors()[0]['msg']}",
                            field=self._history_key) from None

    def arm(self, item_id: str, item: KnowledgeItem, status: ItemStatus, slot: int) -> Arm:
        """Which arm this episode is for an item under test (admitted items are always shown).

        STEER's rule: balanced alternation (`assign`). The stack's rules show a screen-specific avoid
        item to every episode of its task, and an item that already has its controls (from the task's
        history) to every episode it fits."""
        rules = self.rules
        if status is ItemStatus.ADMITTED or (rules is not None and (
                (rules.fast_avoid and is_screen_avoid(item)) or
                (rules.history_controls and len(item.evidence.arm("control")) >= self.gate_settings.min_controls))):
            return "trial"
        return assign(content_id(item.key), self.round, slot)

    @property
    def entries(self) -> Mapping[str, Entry]:
        """The round's snapshot, id → (item, status), read-only and not copied."""
        return MappingProxyType(self._items)

    @property
    def loaded(self) -> bool:
        """Whether every item is in memory (False after an open from the index cache, until needed)."""
        return self._loaded is not None

    @property
    def has_items(self) -> bool:
        """Whether the memory holds any item (of any status), without reading them all."""
        if self._loaded is None:
            known = self.view.known_counts()  # None: changed since they were read
            return known is None or sum(known.values()) > 0  # items are never deleted
        return bool(self._loaded)

    @property
    def _items(self) -> dict[str, Entry]:
        """Every item (read from the store on first need)."""
        if self._loaded is None:
            self._load()
        assert self._loaded is not None
        return self._loaded

    def _load(self) -> None:
        self._loaded = None  # the old snapshot goes before the new one is read (a million items, not two)
        self._loaded = {rec.id: (item, ItemStatus(rec.status)) for rec, item in self.view.load()}
        self._buckets = self._pools = None

    def _set(self, item_id: str, entry: Entry) -> None:
        """Keep a changed item in the snapshot when every item is held (the view keeps it otherwise: `_put`)."""
        if self._loaded is not None:
            self._loaded[item_id] = entry

    def _with_key(self, key: str) -> str | None:
        """The id of the last item in creation order whose content key is ``key`` (imports keep their ids, so two
        may share one), without reading every item, or None (while not every item is held)."""
        digest = _key_digest(key)
        found = self._keys_since.get(digest)  # created since the arrays were made: later than any in them
        if found is not None:
            return found
        at = int(np.searchsorted(self._key_digests, digest, side="right")) - 1  # stable sort: the last of equals
        # numpy drops an ``S16`` value's trailing NUL bytes when it is read back: pad it again
        if at >= 0 and bytes(self._key_digests[at]).ljust(16, b"\0") == digest:
            return bytes(self._key_ids[at]).decode("utf-8", "surrogatepass")
        return None

    def _catch_up(self) -> None:
        """While not every item is held, file what was written since this view last read the store (by this
        process or another): move the items in or out of their buckets and pools (`_apply_to_buckets`, which keeps
        them current in the view and tells ``on_scan`` the live ones), read nothing else; an item that comes back
        to being shown is filed by a fresh scan, a chunk at a time."""
        found = self.view.changes()
        if found is None:
            self._scan(self._on_scan)
            return
        changed, position = found
        records = [c for c in changed if c.record.kind == ItemKind.KNOWLEDGE.value]
        if not self._apply_to_buckets(records):
            self._scan(self._on_scan)
        self.view.caught_up(position)

    def _index(self, live: Sequence[tuple[int, str, KnowledgeItem]]) -> None:
        """Buckets and pools of live items (position in entry order, id, item)."""
        self._buckets, self._pools = {}, {}
        for position, item_id, item in live:
            self._file(position, item_id, item)

    def _file(self, position: int, item_id: str, item: KnowledgeItem) -> tuple[tuple[str, str], str]:
        """Put one live item in its scope bucket and its app's transfer pool; the bucket and ``_pool``."""
        assert self._buckets is not None and self._pools is not None
        bucket, pool = _bucket(item), _pool(item)
        self._buckets.setdefault(bucket, []).append((position, item_id))
        if pool:
            self._pools.setdefault(("app", pool[1:]), []).append((position, item_id))
        return bucket, pool

    def _scan(self, on_scan: OnScan | None) -> None:
        """A first open: read every item a chunk at a time (none kept), index the live ones, keep every content
        key's digest (`_with_key`) and write the cache."""
        self._buckets, self._pools = {}, {}
        stamp = self.cache.stamp()  # before the first read: a write made while this reads is not claimed
        ids: list[str] = []
        keys: list[str] = []
        pools: list[str] = []
        digests = bytearray()
        every: list[bytes] = []
        for part in self.view.stream():
            live = [(rec, item) for rec, item in part if rec.status in LIVE]
            for rec, item in part:
                digests += _key_digest(item.key)
                every.append(rec.id.encode("utf-8", "surrogatepass"))
            for rec, item in live:
                (kind, value), pool = self._file(len(ids), rec.id, item)
                ids.append(rec.id)
                keys.append(f"{kind}\x00{value}")
                pools.append(pool)
            if on_scan is not None and live:
                on_scan([(rec.id, item) for rec, item in live])
        self._keys_from(np.frombuffer(bytes(digests), dtype="S16"), np.asarray(every, dtype=bytes) if every
                        else np.zeros(0, dtype="S1"))
        del digests, every
        self.view.recount()
        self.view.set_counts(self.view.counts())  # every status, one grouped count: `has_items` knows
        self._save_live(ids, keys, pools, stamp)

    def _keys_from(self, digests: np.ndarray, ids: np.ndarray) -> None:
        """Every item's content key digest and id, sorted by digest for `_with_key` (the written-since map empty)."""
        order = np.argsort(digests, kind="stable")
        self._key_digests, self._key_ids = digests[order], ids[order]
        self._keys_since = {}

    def _key_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """`_keys_from`'s arrays with the keys written since merged in (what the cache saves)."""
        if self._loaded is not None:
            digests = np.asarray([_key_digest(it.key) for it, _ in self._loaded.values()], dtype="S16")
            ids = np.asarray([i.encode("utf-8", "surrogatepass") for i in self._loaded], dtype=bytes)
        elif self._keys_since:
            digests = np.concatenate([self._key_digests, np.asarray(list(self._keys_since), dtype="S16")])
            ids = np.concatenate([self._key_ids.astype(bytes), np.asarray(
                [i.encode("utf-8", "surrogatepass") for i in self._keys_since.values()], dtype=bytes)])
        else:
            return self._key_digests, self._key_ids
        order = np.argsort(digests, kind="stable")
        return digests[order], ids[order]

    def _open_cached(self) -> bool:
        """Open from the index cache (which items may be shown and their scope buckets), reading no item
        body until recall needs it; False when the cache does not match the store."""
        found = self.view.open_entry("knowledge")  # and the counts it was saved with
        if found is None:
            return False
        folder = found[0]
        try:
            ids = IndexCache.array(folder, "live_ids").tolist()
            keys = IndexCache.array(folder, "live_keys").tolist()
            pools = IndexCache.array(folder, "live_pools").tolist()
            key_digests = IndexCache.array(folder, "key_digests")
            key_ids = IndexCache.array(folder, "key_ids")
        except (OSError, ValueError):  # unreadable, or an entry written before it kept the content keys
            return False
        if len(key_digests) != len(key_ids):
            return False
        self._key_digests, self._key_ids, self._keys_since = key_digests, key_ids, {}
        if not len(ids) == len(keys) == len(pools):
            return False
        self._buckets, self._pools = {}, {}
        for position, (item_id, key, app) in enumerate(zip(ids, keys, pools, strict=True)):
            kind, _, value = str(key).partition("\x00")
            self._buckets.setdefault((kind, value), []).append((position, str(item_id)))
            if app:
                self._pools.setdefault(("app", str(app)[1:]), []).append((position, str(item_id)))
        return True

    def save_cache(self) -> None:
        """Write the cache of live items and their buckets (after a committed round, or at open): from every item
        when they are held, else from the buckets and pools (a round's changes were filed there)."""
        if not self.cache.enabled:
            return
        if self._loaded is not None:
            live = [(i, it) for i, (it, st) in self._loaded.items() if st in (ItemStatus.ADMITTED, *UNDER_TEST)]
            self._save_live([i for i, _ in live], ["\x00".join(_bucket(it)) for _, it in live],
                            [_pool(it) for _, it in live])
            return
        if not self._dirty or self._buckets is None or self._pools is None:
            return  # opened from a valid cache and nothing changed since: it is still valid
        filed = sorted((pos, item_id, "\x00".join(key)) for key, entries in self._buckets.items()
                       for pos, item_id in entries)
        pooled = {item_id: "+" + app for (_, app), entries in self._pools.items() for _, item_id in entries}
        self._save_live([i for _, i, _ in filed], [k for _, _, k in filed], [pooled.get(i, "") for _, i, _ in filed])

    def _save_live(self, ids: list[str], keys: list[str], pools: list[str],
                   stamp: dict[str, Any] | None = None) -> None:
        if not self.cache.enabled:
            return

        def column(values: list[str]) -> np.ndarray:
            return np.asarray(values, dtype=str) if values else np.zeros(0, dtype="<U1")
        key_digests, key_ids = self._key_arrays()
        self.view.save_entry("knowledge", {"live_ids": column(ids), "live_keys": column(keys),
                                           "live_pools": column(pools), "key_digests": key_digests,
                                           "key_ids": key_ids}, counts=self.stats(), stamp=stamp)
        if self._loaded is None:  # what was written since is in the arrays now
            self._key_digests, self._key_ids, self._keys_since = key_digests, key_ids, {}
        self._dirty = False

    def refresh(self) -> bool:
        """Catch up with the store (a worker between rounds): the round, the task history, and the items
        written since — their status, scope bucket and counts; nothing else is read. False when an item
        comes back to being shown after leaving (its place in entry order is not known here: reopen)."""
        found = self.view.changes()
        if found is None or self._evidence or self._proposals:  # a process that learns does not refresh
            return False
        changed, position = found
        records = [c for c in changed if c.record.kind == ItemKind.KNOWLEDGE.value]
        if self._loaded is not None:
            for rec in (c.record for c in records):  # new ids go last, in creation order, as a fresh read gives
                self._loaded[rec.id] = (KnowledgeItem.model_validate_json(rec.body), ItemStatus(rec.status))
            self._buckets = self._pools = None
        elif not self._apply_to_buckets(records):
            return False
        self.round = self.clock.applied()
        self.history = self._load_history() if self.rules else {}
        self.view.caught_up(position)
        return True

    def _apply_to_buckets(self, records: list[Change]) -> bool:
        """Opened from the cache: move changed items in or out of their buckets; keep their entries."""
        buckets = self._buckets if self._buckets is not None else {}
        pools = self._pools if self._pools is not None else {}
        where = {item_id: (key, pos) for key, entries in buckets.items() for pos, item_id in entries}
        pooled = {item_id: key for key, entries in pools.items() for _, item_id in entries}
        last = max((pos for _, pos in where.values()), default=-1)
        read: list[tuple[str, KnowledgeItem]] = []
        for change in records:
            rec = change.record
            item, status = self.view.apply(change), ItemStatus(rec.status)  # kept; counts asked of the store next
            if change.new:  # an item's key never changes: only a new one is not known by its key yet
                self._keys_since[_key_digest(item.key)] = rec.id
            self._dirty = True
            live = status in (ItemStatus.ADMITTED, *UNDER_TEST)
            if rec.id in pooled:
                key = pooled.pop(rec.id)
                pools[key] = [e for e in pools[key] if e[1] != rec.id]
            if rec.id in where:
                key, pos = where.pop(rec.id)
                buckets[key] = [e for e in buckets[key] if e[1] != rec.id]
            elif live:
                if not change.new:
                    return False
                last += 1
                pos = last
            if live:
                read.append((rec.id, item))
                adds = [(buckets, _bucket(item))] + ([(pools, ("app", _pool(item)[1:]))] if _pool(item) else [])
                for found, key in adds:
                    found.setdefault(key, []).append((pos, rec.id))
                    found[key].sort()
        self._buckets, self._pools = buckets, pools
        if read and self._on_scan is not None:
            self._on_scan(read)
        return True

    def _entry(self, item_id: str) -> Entry | None:
        """One item (without reading them all when the memory opened from the cache)."""
        if self._loaded is not None:
            return self._loaded.get(item_id)
        try:
            item, status, _ = self.view.entry(item_id)
        except NotFoundError:
            return None
        return item, ItemStatus(status)

    def _indexed(self) -> tuple[Buckets, Buckets]:
        """The buckets and pools (built from every item when they were dropped by a change)."""
        if self._buckets is None or self._pools is None:
            self._index([(pos, i, it) for pos, (i, (it, st)) in enumerate(self._items.items())
                         if st in (ItemStatus.ADMITTED, *UNDER_TEST)])
        assert self._buckets is not None and self._pools is not None
        return self._buckets, self._pools

    def entry(self, item_id: str) -> Entry | None:
        """One item and its status (read on demand when the memory opened from the cache), or None."""
        return self._entry(item_id)

    def peek_many(self, item_ids: Sequence[str]) -> Iterator[tuple[str, Entry]]:
        """Many items and their statuses, one at a time, read in a few store reads without keeping them
        (`ItemView.peek_many`): for a pass over many items. An unknown id is left out."""
        if self._loaded is not None:
            yield from ((i, found) for i in item_ids if (found := self._loaded.get(i)) is not None)
            return
        for item_id, item, status in self.view.peek_many(item_ids):
            yield item_id, (item, ItemStatus(status))

    def every_item(self) -> Iterator[tuple[str, KnowledgeItem]]:
        """Every item in entry order: the ones held, else read from the store a chunk at a time (none kept)."""
        if self._loaded is not None:
            yield from ((i, it) for i, (it, _) in self._loaded.items())
            return
        for part in self.view.stream():
            yield from ((rec.id, item) for rec, item in part)

    def pool(self, app: str) -> list[str]:
        """Live task-scoped items that may act on another task of ``app`` (`transferable`), in entry order,
        without reading every item."""
        return [item_id for _, item_id in self.pool_entries(app)]

    def pool_entries(self, app: str) -> Sequence[tuple[int, str]]:
        """``pool(app)`` as (position, id) pairs: the list held, not a copy (a change replaces or grows it)."""
        return self._indexed()[1].get(("app", app), [])

    def live_for(self, task: Task) -> list[tuple[str, KnowledgeItem, ItemStatus]]:
        """Items that may be shown (admitted or under test) and whose scope can fit ``task``, in entry
        order: the candidates of the task's, the app's and the global bucket, not a scan of every item
        (`compatible` still decides)."""
        buckets = self._indexed()[0]
        found = sorted([*buckets.get(("task", task.id), ()), *buckets.get(("app", task.app), ()),
                        *buckets.get(("global", ""), ())])
        out = []
        for _, item_id in found:
            entry = self._entry(item_id)
            if entry is not None:
                out.append((item_id, *entry))
        return out

    def observe(self, trajectory: Trajectory) -> LearnReport:
        """Record trial/control evidence from the episode's trace and queue its proposals."""
        injected = {item.id for s in trajectory.steps for item in s.injection.items}
        withheld = {i for s in trajectory.steps for i in s.injection.withheld}
        judged = UNDER_TEST | ({ItemStatus.ADMITTED} if self.rules and self.rules.retire_harmful else set())
        if self.rules is not None:
            self._outcomes.append(TrialRecord(episode=trajectory.episode_id, task=trajectory.task.id,
                                              seed=trajectory.task.seed, round=self.round, arm="control",
                                              score=1.0 if trajectory.outcome.success else 0.0, historical=True))
        with self.kit.store.transaction():
            for item_id, arm in [(i, "trial") for i in injected] + [(i, "control") for i in withheld]:
                entry = self._entry(item_id)
                if entry is None or entry[1] not in judged:
                    continue
                rec = record(entry[0], trajectory, arm, self.round)  # type: ignore[arg-type]
                self._evidence.setdefault(item_id, []).append(rec)
                self.view.log(item_id, EventType.TRIAL if arm == "trial" else EventType.CONTROL, rec)
            proposals = self.proposer.propose(trajectory, self.round)
            for p in proposals:
                self.view.log(None, EventType.PROPOSED, {"key": p.key, "kind": p.kind,
                                                          "episode": trajectory.episode_id})
        self._proposals += proposals
        return LearnReport(added=len(proposals))

    def _put(self, item_id: str, item: KnowledgeItem, status: ItemStatus, event: EventType,
             payload: dict[str, object]) -> None:
        self.view.put(item_id, item, status.value, event, payload)

    def _merge_proposals(self) -> None:
        # every item's key when all are held (the last of a key wins, as in creation order), else those made here
        by_key = {it.key: i for i, (it, _) in self._loaded.items()} if self._loaded is not None else {}
        for prop in self._proposals:
            existing = by_key.get(prop.key) or (self._with_key(prop.key) if self._loaded is None else None)
            found = self._entry(existing) if existing is not None else None
            if found is None:
                item_id = item_id_for(prop.key, self.kit.namespace)
                status, prop = self._first_status(prop)
                payload: dict[str, object] = {"round": self.round, "controls": len(prop.evidence.records)}
                if prop.quarantine:
                    payload["quarantine"] = prop.quarantine
                self._put(item_id, prop, status, EventType.CREATED, payload)
                self._set(item_id, (prop, status))
                by_key[prop.key] = item_id
                continue
            assert existing is not None
            item, status = found
            if status in (ItemStatus.REJECTED, ItemStatus.RETIRED):
                continue
            prov = item.provenance.model_copy(update={
                "episodes": item.provenance.episodes + prop.provenance.episodes,
                "tasks": sorted(set(item.provenance.tasks) | set(prop.provenance.tasks)),
                "outcomes": item.provenance.outcomes + prop.provenance.outcomes})
            merged = item.model_copy(update={"provenance": prov})
            self._put(existing, merged, status, EventType.MERGED, {"episodes": prop.provenance.episodes})
            self._set(existing, (merged, status))
        self._proposals = []

    def _unhelpful(self, item: KnowledgeItem, evidence: Evidence) -> bool:
        """A screen-specific avoid item shown `fast_trials` times (no control arm) with no success."""
        rules = self.rules
        if rules is None or not rules.fast_avoid or not is_screen_avoid(item):
            return False
        trials = evidence.arm("trial")
        return len(trials) >= rules.fast_trials and not any(t.score > 0 for t in trials)

    def _first_status(self, item: KnowledgeItem) -> tuple[ItemStatus, KnowledgeItem]:
        """A new item's status and evidence: one that carries page text addressing the agent is
        quarantined (held for a person, never shown or tried); with the stack's rules, its task's past
        episodes are its first controls, and a screen-specific avoid item goes straight to trial."""
        if self.kit.defences.quarantine:
            found = screen_item(item.content, item.behaviour, page=item.page, written=item.origin is not Origin.ACTION)
            if found is not None:
                return ItemStatus.QUARANTINED, item.model_copy(update={"quarantine": str(found)})
        if self.rules is None:
            return ItemStatus.CANDIDATE, item
        if self.rules.history_controls:
            past = self.history.get(item.applicability.task, [])
            item = item.model_copy(update={"evidence": item.evidence.model_copy(update={"records": list(past)})})
        fast = self.rules.fast_avoid and is_screen_avoid(item)
        return (ItemStatus.TRIAL if fast else ItemStatus.CANDIDATE), item

    def _record_outcomes(self) -> None:
        if self.rules is None or not self._outcomes:
            return
        for rec in self._outcomes:
            kept = self.history.setdefault(rec.task, [])
            kept.append(rec)
            del kept[:-self.rules.history_per_task]
        self._outcomes = []
        self.kit.store.meta_set(self._history_key, json.dumps(_HISTORY.dump_python(self.history, mode="json")))

    def _earn_scope(self, item_id: str, item: KnowledgeItem, records: list[TrialRecord]
                    ) -> tuple[KnowledgeItem, list[TrialRecord]]:
        """The stack's rule: records on other tasks decide the item's scope (`scope.earn_scope`); the
        records on its own tasks are returned for the gate."""
        own, cross = split(item, records)
        if not cross or self.rules is None or not self.rules.transfer:
            return item, records
        item, change = earn_scope(item, cross, self.history, self.gate_settings)
        if change is not None:
            self.view.log(item_id, EventType.SCOPE, {"round": self.round, **change})
        return item, own

    def _apply_gate(self) -> None:
        for item_id, records in self._evidence.items():
            found = self._entry(item_id)
            if found is None:
                continue
            item, status = found
            if status is ItemStatus.QUARANTINED:
                continue  # never shown, never judged: only a person moves it
            item, records = self._earn_scope(item_id, item, records)
            evidence = item.evidence.model_copy(update={"records": item.evidence.records + records})
            item = item.model_copy(update={"evidence": evidence})
            decision = gate(evidence, status, self.gate_settings)
            if decision.status is ItemStatus.TRIAL and self._unhelpful(item, evidence):
                decision = type(decision)(ItemStatus.REJECTED, (f"shown in {len(evidence.arm('trial'))} episodes "
                                                                "without a control, none succeeded",))
            if status is ItemStatus.ADMITTED and self.rules is not None and self.rules.retire_harmful and \
                    evidence.harms > self.gate_settings.max_harms:
                decision = type(decision)(ItemStatus.RETIRED, (f"{evidence.harms} harm(s) observed after admission",))
            if status is ItemStatus.CANDIDATE and decision.status is ItemStatus.ADMITTED:
                # enough evidence within its first round (shown to every episode): it passed through trial
                self._put(item_id, item, ItemStatus.TRIAL, EventType.TRIAL, {"round": self.round, "passing": True})
                status = ItemStatus.TRIAL
            if decision.status is not status:
                check_transition(item_id, status, decision.status)
            payload = {"round": self.round, "trials": len(evidence.arm("trial")),
                       "controls": len(evidence.arm("control")), "difference": evidence.score_difference,
                       "effective_uses": evidence.effective_uses, "harms": evidence.harms,
                       "held_back": list(decision.reasons)}
            event = status_event(decision.status) if decision.status is not status else EventType.EVIDENCE
            self._put(item_id, item, decision.status, event, payload)
            self._set(item_id, (item, decision.status))
        self._evidence = {}

    def end_round(self) -> None:
        """Apply the round: gate decisions on its evidence, then merge its proposals into items. With not every item
        held, nothing else is read: what other processes wrote since is caught up with first (inside the round's
        transaction: the items judged and merged into are current), and what the round wrote is filed after."""
        with self.kit.store.transaction():
            if self._loaded is None:
                self._catch_up()
            self._apply_gate()
            self._record_outcomes()
            self._merge_proposals()
            self.round += 1  # the clock is moved by the boundary that called this (`RoundLog.commit`)
        if self._loaded is not None:
            self._load()  # every item read again (others' writes too), as before
        else:  # a million items are not read to apply a round: what it wrote is filed (and its live texts told)
            self._catch_up()

    def set_status(self, item_id: str, status: str, reason: str) -> None:
        """Manual curation (admit/retire), checked against the transition table and logged."""
        if status not in ALLOWED:  # the lifecycle's statuses, not a skill's or an edge's
            raise DataError(f"unknown status {status!r}", field="status",
                            suggestion=f"one of {', '.join(s.value for s in ALLOWED)}") from None
        target = ItemStatus(status)
        with self.kit.store.transaction():
            if self._loaded is None:
                self._catch_up()  # the item as it is now (another process may have changed it)
            found = self._entry(item_id)
            if found is None:
                raise NotFoundError("knowledge item", item_id)
            item, status = found
            check_transition(item_id, status, target)
            if target in (ItemStatus.ADMITTED, ItemStatus.RETIRED):
                item = item.model_copy(update={"manual": True})
            self._put(item_id, item, target, status_event(target), {"manual": True, "reason": reason})
        if self._loaded is not None:
            self._loaded[item_id] = (item, target)
            self._buckets = self._pools = None
        else:
            self._catch_up()

    def stats(self) -> dict[str, int]:
        """Items by status."""
        if self._loaded is None:  # not every item was read: the cache's counts, or the store's
            return self.view.counts()
        out: dict[str, int] = {}
        for _, status in self._items.values():
            out[status.value] = out.get(status.value, 0) + 1
        return out


class AdmissionMembers:
    """The contract members a method that holds an `Admission` as ``lifecycle`` gets from it (steer, stack):
    plain delegations; the round boundary is `StoredRounds`'s."""

    lifecycle: Admission

    @property
    def round(self) -> int:
        """The current round (its items are the snapshot every episode of it reads)."""
        return self.lifecycle.round

    def items(self) -> dict[str, Entry]:
        """The current snapshot: id → (item, status)."""
        return dict(self.lifecycle.entries)

    def learn(self, trajectory: Trajectory) -> LearnReport:
        """Record trial/control evidence from the episode's trace and queue its proposals."""
        return self.lifecycle.observe(trajectory)

    def end_round(self) -> None:
        """Gate decisions, merges, the next round."""
        self.lifecycle.end_round()

    def set_status(self, item_id: str, status: str, reason: str) -> None:
        """Manual curation (admit/retire), checked against the transition table and logged."""
        self.lifecycle.set_status(item_id, status, reason)

    def stats(self) -> dict[str, int]:
        """Items by status."""
        return self.lifecycle.stats()

    def refresh(self) -> bool:
        """Catch up with the store without reopening (see `Admission.refresh`)."""
        return self.lifecycle.refresh()
