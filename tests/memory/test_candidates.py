"""Steer's and the stack's candidates come from buckets by scope (task, app, global), not a scan of every
item — and the bucketed candidates are exactly the live items a scan would consider, in the same order."""

from __future__ import annotations

import random

from guimem.memory.settings import GateSettings
from guimem.memory.steer.contract import TaskContract
from guimem.memory.steer.items import Applicability, ItemStatus, KnowledgeItem, Provenance, Scope
from guimem.memory.steer.lifecycle import Admission
from guimem.memory.steer.propose import OfflineProposer
from guimem.types import Behaviour, Task


def _item(i: int, scope: Scope, task: str, app: str) -> KnowledgeItem:
    return KnowledgeItem(kind="procedure", applicability=Applicability(app=app, task=task, contract=TaskContract()),
                         completion="", scope=scope, content=f"item {i}", behaviour=Behaviour(),
                         provenance=Provenance(), key=f"k{i}")


def test_bucketed_candidates_equal_a_scan(kit):
    from guimem.memory.steer.contract import OfflineContractParser

    lifecycle = Admission(kit, GateSettings(), OfflineProposer(OfflineContractParser()))
    rng = random.Random(7)
    statuses = list(ItemStatus)
    items = {}
    for i in range(400):
        scope = rng.choice(list(Scope))
        items[f"id{i}"] = (_item(i, scope, f"t{rng.randrange(6)}", f"app{rng.randrange(2)}"), rng.choice(statuses))
    lifecycle._loaded = items
    lifecycle._buckets = None
    for t in range(6):
        for a in range(2):
            task = Task(id=f"t{t}", goal="", app=f"app{a}")
            scan = [(i, it, st) for i, (it, st) in items.items()
                    if st in (ItemStatus.ADMITTED, ItemStatus.CANDIDATE, ItemStatus.TRIAL)
                    and not (it.scope is Scope.TASK and it.applicability.task != task.id)
                    and not (it.scope is Scope.APP and it.applicability.app != task.app)]
            assert lifecycle.live_for(task) == scan
