"""The ``steer`` memory: verified knowledge, admitted only after trials against matched controls.

Round semantics: every episode of a round reads the same snapshot. ``learn`` only records evidence
and proposals; merges, new candidates and admission decisions take effect in ``end_round``, so an
item admitted at the end of round r is first injected in round r + 1.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from guimem.errors import ConfigError, DataError, NotFoundError
from guimem.memory.base import LearnReport, RecallQuery, RoundLog
from guimem.memory.generalise import state_text
from guimem.memory.kit import MemoryKit
from guimem.memory.steer.contract import (
    ContractParser,
    LLMContractParser,
    OfflineContractParser,
    TaskContract,
    conflicts,
)
from guimem.memory.steer.items import UNDER_TEST, ItemStatus, KnowledgeItem, Scope, TrialRecord, check_transition
from guimem.memory.steer.propose import LLMProposer, OfflineProposer, Proposer
from guimem.memory.steer.trials import GateSettings, assign, gate, record
from guimem.storage import Record
from guimem.storage.base import EventDraft
from guimem.types import InjectedItem, Injection, ItemKind, Task, Trajectory

log = logging.getLogger(__name__)


class SteerSettings(BaseModel):
    """STEER options."""

    gate: GateSettings = Field(default_factory=GateSettings)
    exclude_source_task: bool = False
    extractor: Literal["offline", "llm"] = "offline"


def build_extractors(kit: MemoryKit, extractor: str) -> tuple[ContractParser, Proposer]:
    """The contract parser and proposer for ``offline`` or ``llm`` extraction."""
    if extractor == "llm":
        if kit.llm is None:
            raise ConfigError("the llm extractor needs an LLM endpoint", suggestion="set GUIMEM_LLM__BASE_URL")
        parser: ContractParser = LLMContractParser(kit.llm)
        return parser, LLMProposer(kit.llm, parser)
    parser = OfflineContractParser()
    return parser, OfflineProposer(parser)


class CachedContracts:
    """Parses each distinct task goal once."""

    def __init__(self, parser: ContractParser) -> None:
        self.parser = parser
        self._cache: dict[tuple[str, str], TaskContract] = {}

    def __call__(self, task: Task) -> TaskContract:
        key = (task.id, task.goal)
        if key not in self._cache:
            self._cache[key] = self.parser.parse(task)
        return self._cache[key]


def compatible(item: KnowledgeItem, task: Task, contract: TaskContract, state: str, exclude_source: bool,
               check_state: bool = True) -> bool:
    """Does ``item`` fit this task (scope, leave-one-task-out, contract, and for warnings the screen)?"""
    app = item.applicability
    if item.scope is Scope.TASK and app.task != task.id:
        return False
    if item.scope is Scope.APP and app.app != task.app:
        return False
    if exclude_source and task.id in item.provenance.tasks:
        return False
    if conflicts(app.contract, contract):
        return False
    return not (check_state and item.kind == "warning" and app.state and app.state != state)


VIEW_KINDS = {"procedure": ItemKind.PROCEDURE, "warning": ItemKind.WARNING, "edge": ItemKind.EDGE,
              "skill": ItemKind.SKILL}


def item_view(item_id: str, item: KnowledgeItem, score: float = 1.0) -> InjectedItem:
    """How an item is shown to the agent."""
    text = item.program.render(item.name).replace("\n", "\n  ") if item.program is not None else item.content
    return InjectedItem(id=item_id, kind=VIEW_KINDS[item.kind], text=text, behaviour=item.behaviour, score=score,
                        success=None if item.kind == "warning" else True, name=item.name or None)


def item_id_for(key: str) -> str:
    """A stable id from an item's content key: the same proposal gets the same id in every run, so
    trial/control assignment (which hashes the id) is reproducible."""
    return "k-" + hashlib.sha1(key.encode()).hexdigest()[:20]


def _rank(entry: tuple[str, KnowledgeItem]) -> tuple[int, int, str]:
    item_id, item = entry
    return (-len(item.provenance.episodes), item.created_round, item_id)


class SteerMemory:
    """The ``steer`` memory method."""

    def __init__(self, kit: MemoryKit, settings: SteerSettings | None = None) -> None:
        self.kit = kit
        self.settings = settings or SteerSettings()
        parser, self.proposer = build_extractors(kit, self.settings.extractor)
        self.contract = CachedContracts(parser)
        self.round = int(kit.store.meta_get(f"{kit.namespace}.round") or 0)
        self._items: dict[str, tuple[KnowledgeItem, ItemStatus]] = {}
        self._proposals: list[KnowledgeItem] = []
        self._evidence: dict[str, list[TrialRecord]] = {}
        self.rounds = RoundLog(kit.store, kit.namespace)
        self._load()

    @property
    def name(self) -> str:
        """``steer``."""
        return "steer"

    def commit_round(self, round_index: int, trajectories: Sequence[Trajectory]) -> None:
        """Learn the round's episodes, consolidate and mark the round, in one transaction."""
        self.rounds.commit(self, round_index, trajectories)

    def committed_round(self) -> int:
        """The last committed round (-1 when none)."""
        return self.rounds.committed()

    def close(self) -> None:
        """Close the store (idempotent)."""
        self.rounds.close()

    def _load(self) -> None:
        self._items = {rec.id: (KnowledgeItem.model_validate_json(rec.body), ItemStatus(rec.status))
                       for rec in self.kit.store.query(self.kit.namespace, "knowledge")}

    def items(self) -> dict[str, tuple[KnowledgeItem, ItemStatus]]:
        """The current snapshot: id → (item, status)."""
        return dict(self._items)

    def recall(self, query: RecallQuery) -> Injection:
        """At most one procedure and one warning that fit; nothing (recorded) when nothing fits."""
        contract = self.contract(query.task)
        state = state_text(query.observation, query.task)
        fitting = [(i, it, st) for i, (it, st) in self._items.items()
                   if st in (ItemStatus.ADMITTED, *UNDER_TEST)
                   and compatible(it, query.task, contract, state, self.settings.exclude_source_task)]
        chosen: list[InjectedItem] = []
        withheld: list[str] = []
        for kind in ("procedure", "warning"):
            admitted = sorted(((i, it) for i, it, st in fitting if it.kind == kind and st is ItemStatus.ADMITTED),
                              key=_rank)
            testing = sorted(((i, it) for i, it, st in fitting if it.kind == kind and st in UNDER_TEST), key=_rank)
            if admitted:
                chosen.append(item_view(*admitted[0]))
                continue
            trial = [(i, it) for i, it in testing if assign(i, self.round, query.slot) == "trial"]
            withheld += [i for i, it in testing if assign(i, self.round, query.slot) == "control"]
            if trial:
                chosen.append(item_view(*trial[0]))
        if not chosen:
            note = "no compatible knowledge" if self._items else "memory is empty"
            return Injection(method=self.name, abstained=bool(self._items), note=note, withheld=tuple(withheld))
        return self.kit.injection(self.name, "Verified knowledge for this task:", chosen, withheld=tuple(withheld))

    def learn(self, trajectory: Trajectory) -> LearnReport:
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
                self.kit.store.append_event(EventDraft(arm, item_id, self.kit.namespace, rec.model_dump_json()))
            proposals = self.proposer.propose(trajectory, self.round)
            for p in proposals:
                self.kit.store.append_event(EventDraft("proposed", None, self.kit.namespace, json.dumps(
                    {"key": p.key, "kind": p.kind, "episode": trajectory.episode_id})))
        self._proposals += proposals
        return LearnReport(added=len(proposals))

    def _put(self, item_id: str, item: KnowledgeItem, status: ItemStatus, event: str, payload: dict[str, object]
             ) -> None:
        self.kit.store.put(Record(item_id, "knowledge", self.kit.namespace, status.value, item.model_dump_json()),
                           EventDraft(event, item_id, self.kit.namespace, json.dumps(payload)))

    def _merge_proposals(self) -> None:
        by_key = {it.key: i for i, (it, st) in self._items.items()}
        for prop in self._proposals:
            existing = by_key.get(prop.key)
            if existing is None:
                item_id = item_id_for(prop.key)
                self._put(item_id, prop, ItemStatus.CANDIDATE, "created", {"round": self.round})
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
            self._put(existing, merged, status, "merged", {"episodes": prop.provenance.episodes})
            self._items[existing] = (merged, status)
        self._proposals = []

    def _apply_gate(self) -> None:
        for item_id, records in self._evidence.items():
            item, status = self._items[item_id]
            evidence = item.evidence.model_copy(update={"records": item.evidence.records + records})
            item = item.model_copy(update={"evidence": evidence})
            decision = gate(evidence, status, self.settings.gate)
            if decision.status is not status:
                check_transition(item_id, status, decision.status)
            payload = {"round": self.round, "trials": len(evidence.arm("trial")),
                       "controls": len(evidence.arm("control")), "difference": evidence.score_difference,
                       "effective_uses": evidence.effective_uses, "harms": evidence.harms,
                       "held_back": list(decision.reasons)}
            event = decision.status.value if decision.status is not status else "evidence"
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
        self._put(item_id, item, target, target.value, {"manual": True, "reason": reason})
        self._items[item_id] = (item, target)

    def stats(self) -> dict[str, int]:
        """Items by status."""
        out: dict[str, int] = {}
        for _, status in self._items.values():
            out[status.value] = out.get(status.value, 0) + 1
        return out
