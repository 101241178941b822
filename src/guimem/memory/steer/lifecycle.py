"""STEER's admission lifecycle as a part: items, trial evidence, the gate, merges and status changes.

`SteerMemory` and `StackMemory` each hold one (with their own proposer); neither inherits from the
other nor reads the other's state. Round semantics: ``observe`` records evidence and queues
proposals; ``end_round`` applies the gate, merges the proposals and moves to the next round, so an
item admitted at the end of round r is first injected in round r + 1.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from types import MappingProxyType

from guimem.errors import DataError, NotFoundError
from guimem.memory.base import LearnReport
from guimem.memory.kit import MemoryKit
from guimem.memory.settings import GateSettings
from guimem.memory.steer.items import UNDER_TEST, ItemStatus, KnowledgeItem, TrialRecord, check_transition
from guimem.memory.steer.propose import Proposer
from guimem.memory.steer.trials import gate, record
from guimem.memory.table import EventType, ItemTable
from guimem.types import ItemKind, Trajectory

Entry = tuple[KnowledgeItem, ItemStatus]


def item_id_for(key: str) -> str:
    """A stable id from an item's content key: the same proposal gets the same id in every run, so
    trial/control assignment (which hashes the id) is reproducible."""
    return "k-" + hashlib.sha1(key.encode()).hexdigest()[:20]


class Admission:
    """Knowledge items that earn admission through trials against matched controls.

    Args:
        kit: Store, namespace (items are ``knowledge`` records; the round is ``<namespace>.round``).
        gate_settings: When evidence admits or rejects an item.
        proposer: Turns an episode into candidate items.
    """

    def __init__(self, kit: MemoryKit, gate_settings: GateSettings, proposer: Proposer) -> None:
        self.kit = kit
        self.gate_settings = gate_settings
        self.proposer = proposer
        self.round = int(kit.store.meta_get(f"{kit.namespace}.round") or 0)
        self._items: dict[str, Entry] = {}
        self._proposals: list[KnowledgeItem] = []
        self._evidence: dict[str, list[TrialRecord]] = {}
        self.table = ItemTable(kit, ItemKind.KNOWLEDGE, KnowledgeItem)
        self._load()

    @property
    def entries(self) -> Mapping[str, Entry]:
        """The round's snapshot, id → (item, status), read-only and not copied."""
        return MappingProxyType(self._items)

    def _load(self) -> None:
        self._items = {rec.id: (item, ItemStatus(rec.status)) for rec, item in self.table.load()}

    def observe(self, trajectory: Trajectory) -> LearnReport:
        """Record trial/control evidence from the episode's trace and queue its proposals."""
        injected = {item.id for s in trajectory.steps for item in s.injection.items}
        withheld = {i for s in trajectory.steps for i in s.injection.withheld}
        with self.kit.store.transaction():
            for item_id, arm in [(i, "trial") for i in injected] + [(i, "control") for i in withheld]:
                entry = self._items.get(item_id)
                if entry is None or entry[1] not in UNDER_TEST:
                    continue
                rec = record(entry[0], trajectory, arm, self.round)  # type: ignore[arg-type]
                self._evidence.setdefault(item_id, []).append(rec)
                self.table.log(item_id, EventType(arm), rec)
            proposals = self.proposer.propose(trajectory, self.round)
            for p in proposals:
                self.table.log(None, EventType.PROPOSED, {"key": p.key, "kind": p.kind,
                                                          "episode": trajectory.episode_id})
        self._proposals += proposals
        return LearnReport(added=len(proposals))

    def _put(self, item_id: str, item: KnowledgeItem, status: ItemStatus, event: EventType,
             payload: dict[str, object]) -> None:
        self.table.put(item_id, item, status.value, event, payload)

    def _merge_proposals(self) -> None:
        by_key = {it.key: i for i, (it, st) in self._items.items()}
        for prop in self._proposals:
            existing = by_key.get(prop.key)
            if existing is None:
                item_id = item_id_for(prop.key)
                self._put(item_id, prop, ItemStatus.CANDIDATE, EventType.CREATED, {"round": self.round})
                self._items[item_id] = (prop, ItemStatus.CANDIDATE)
                by_key[prop.key] = item_id
                continue
            item, status = self._items[existing]
            if status in (ItemStatus.REJECTED, ItemStatus.RETIRED):
                continue
            prov = item.provenance.model_copy(update={
                "episodes": item.provenance.episodes + prop.provenance.episodes,
                "tasks": sorted(set(item.provenance.tasks) | set(prop.provenance.tasks)),
                "outcomes": item.provenance.outcomes + prop.provenance.outcomes})
            merged = item.model_copy(update={"provenance": prov})
            self._put(existing, merged, status, EventType.MERGED, {"episodes": prop.provenance.episodes})
            self._items[existing] = (merged, status)
        self._proposals = []

    def _apply_gate(self) -> None:
        for item_id, records in self._evidence.items():
            item, status = self._items[item_id]
            evidence = item.evidence.model_copy(update={"records": item.evidence.records + records})
            item = item.model_copy(update={"evidence": evidence})
            decision = gate(evidence, status, self.gate_settings)
            if decision.status is not status:
                check_transition(item_id, status, decision.status)
            payload = {"round": self.round, "trials": len(evidence.arm("trial")),
                       "controls": len(evidence.arm("control")), "difference": evidence.score_difference,
                       "effective_uses": evidence.effective_uses, "harms": evidence.harms,
                       "held_back": list(decision.reasons)}
            event = EventType(decision.status.value) if decision.status is not status else EventType.EVIDENCE
            self._put(item_id, item, decision.status, event, payload)
            self._items[item_id] = (item, decision.status)
        self._evidence = {}

    def end_round(self) -> None:
        """Apply the round: gate decisions on its evidence, then merge its proposals into items."""
        with self.kit.store.transaction():
            self._apply_gate()
            self._merge_proposals()
            self.round += 1
            self.kit.store.meta_set(f"{self.kit.namespace}.round", str(self.round))
        self._load()

    def set_status(self, item_id: str, status: str, reason: str) -> None:
        """Manual curation (admit/retire), checked against the transition table and logged."""
        try:
            target = ItemStatus(status)
        except ValueError:
            raise DataError(f"unknown status {status!r}", field="status",
                            suggestion=f"one of {', '.join(s.value for s in ItemStatus)}") from None
        if item_id not in self._items:
            raise NotFoundError("knowledge item", item_id)
        item, status = self._items[item_id]
        check_transition(item_id, status, target)
        self._put(item_id, item, target, EventType(target.value), {"manual": True, "reason": reason})
        self._items[item_id] = (item, target)

    def stats(self) -> dict[str, int]:
        """Items by status."""
        out: dict[str, int] = {}
        for _, status in self._items.values():
            out[status.value] = out.get(status.value, 0) + 1
        return out


class AdmissionMembers:
    """The contract members a method that holds an `Admission` as ``lifecycle`` gets from it (steer, stack)."""

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
