"""The ``steer`` memory: verified knowledge, admitted only after trials against matched controls.

Round semantics (kept by its `Admission` lifecycle): every episode of a round reads the same
snapshot; an item admitted at the end of round r is first injected in round r + 1.
"""

from __future__ import annotations

import logging

from guimem.errors import ConfigError
from guimem.memory.base import RecallQuery, RoundLog, StoredRounds
from guimem.memory.generalise import state_text
from guimem.memory.kit import MemoryKit
from guimem.memory.settings import SteerSettings
from guimem.memory.steer.contract import (
    ContractParser,
    LLMContractParser,
    OfflineContractParser,
    TaskContract,
    conflicts,
)
from guimem.memory.steer.items import UNDER_TEST, ItemStatus, KnowledgeItem, Scope, is_failure
from guimem.memory.steer.lifecycle import Admission, AdmissionMembers, content_id
from guimem.memory.steer.propose import LLMProposer, OfflineProposer, Proposer
from guimem.memory.steer.scope import own_tasks
from guimem.types import InjectedItem, Injection, ItemKind, Origin, Task

log = logging.getLogger(__name__)


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
    if exclude_source and task.id in own_tasks(item):
        return False
    if task.id in item.refused:
        return False
    if conflicts(app.contract, contract):
        return False
    return not (check_state and item.kind == "warning" and app.state and app.state != state)


VIEW_KINDS = {"procedure": ItemKind.PROCEDURE, "warning": ItemKind.WARNING, "edge": ItemKind.EDGE,
              "skill": ItemKind.SKILL}


def item_view(item_id: str, item: KnowledgeItem, score: float = 1.0, trial: bool = False) -> InjectedItem:
    """How an item is shown to the agent (``trial``: it is shown inside a trial, not yet verified)."""
    text = item.program.render(item.name).replace("\n", "\n  ") if item.program is not None else item.content
    success = None if item.kind == "warning" else not is_failure(item)
    return InjectedItem(id=item_id, kind=VIEW_KINDS[item.kind], text=text, behaviour=item.behaviour, score=score,
                        success=success, name=item.name or None, trial=trial, manual=item.manual,
                        sources=tuple(dict.fromkeys(item.provenance.tasks)),
                        origin=Origin.IMPORT if item.imported and item.origin is Origin.ACTION else item.origin,
                        page=tuple(item.page), quarantine=item.quarantine)


def _rank(entry: tuple[str, KnowledgeItem]) -> tuple[int, int, str]:
    _, item = entry  # ties by content, not by id: the order is the same in every namespace
    return (-len(item.provenance.episodes), item.created_round, content_id(item.key))


class SteerMemory(AdmissionMembers, StoredRounds):
    """The ``steer`` memory method: at most one procedure and one warning per step, from an `Admission`
    lifecycle (items admitted after trials against matched controls)."""

    def __init__(self, kit: MemoryKit, settings: SteerSettings | None = None) -> None:
        self.kit = kit
        self.settings = settings or SteerSettings()
        parser, proposer = build_extractors(kit, self.settings.extractor)
        self.contract = CachedContracts(parser)
        self.lifecycle = Admission(kit, self.settings.gate, proposer)
        self.rounds = RoundLog(kit.store, kit.namespace, screen=kit.defences.quarantine)

    @property
    def name(self) -> str:
        """``steer``."""
        return "steer"

    def _after_commit(self) -> None:
        """Refresh the admission lifecycle's index cache after a committed round."""
        self.lifecycle.save_cache()


    def recall(self, query: RecallQuery) -> Injection:
        """At most one procedure and one warning that fit; nothing (recorded) when nothing fits."""
        contract = self.contract(query.task)
        state = state_text(query.observation, query.task)
        fitting = [(i, it, st) for i, it, st in self.lifecycle.live_for(query.task)
                   if compatible(it, query.task, contract, state, self.settings.exclude_source_task)]
        chosen: list[InjectedItem] = []
        withheld: list[str] = []
        for kind in ("procedure", "warning"):
            admitted = sorted(((i, it) for i, it, st in fitting if it.kind == kind and st is ItemStatus.ADMITTED),
                              key=_rank)
            testing = sorted(((i, it) for i, it, st in fitting if it.kind == kind and st in UNDER_TEST), key=_rank)
            status = {i: st for i, _, st in fitting}
            if admitted:
                chosen.append(item_view(*admitted[0]))
                continue
            arms = {i: self.lifecycle.arm(i, it, status[i], query.slot) for i, it in testing}
            trial = [(i, it) for i, it in testing if arms[i] == "trial"]
            withheld += [i for i, it in testing if arms[i] == "control"]
            if trial:
                chosen.append(item_view(*trial[0], trial=True))
        if not chosen:
            has_items = self.lifecycle.has_items
            note = "no compatible knowledge" if has_items else "memory is empty"
            return Injection(method=self.name, abstained=has_items, note=note, withheld=tuple(withheld))
        return self.kit.injection(self.name, "Verified knowledge for this task:", chosen, withheld=tuple(withheld),
                                  observation=query.observation, task=query.task)


