"""Scope earned, not assumed: an item of one task is tried on the other tasks of its app, and its scope
widens to the app only on their evidence — and narrows again where it harms.

The stack's rule (`AdmissionRules.transfer`): a skill, a procedure or a successful subgoal learned on task S, still
task-scoped, is offered to an episode of another task T of the same app when T's contract does not
conflict with the item's (the verb, the object, the roles), the item fits T's screen, and T is not one
it harmed. There it is a trial against matched controls of T (balanced per task, round and slot, as
STEER's), never shown as verified. Its evidence on tasks other than its own is kept apart
(`KnowledgeItem.transfer`): with the gate's thresholds met on it (trials and controls on other tasks,
trial − control > 0, effective uses, no harm) and trials on at least two other tasks, its scope becomes the
app; a trial on T that fails where
a matched control of T (the same round, or the same seed before) succeeded is a harm, after which T is
refused and an app-scoped item goes back to its task.
"""

from __future__ import annotations

import zlib

from guimem.memory.settings import GateSettings
from guimem.memory.steer.contract import TaskContract, conflicts
from guimem.memory.steer.items import Evidence, ItemStatus, KnowledgeItem, Scope, TrialRecord, is_failure
from guimem.memory.steer.trials import Arm, gate
from guimem.types import Task

MIN_TASKS = 2
"""Other tasks an item must have been tried on before its scope widens (one sibling, or a twin, is not an app)."""


def transferable(item: KnowledgeItem) -> bool:
    """A task-scoped skill, procedure or successful subgoal (what can act on another task's screen)."""
    return item.scope is Scope.TASK and (item.kind in ("skill", "procedure") or
                                         (item.kind == "edge" and not is_failure(item)))


def own_tasks(item: KnowledgeItem) -> set[str]:
    """The tasks an item was learned from."""
    return {item.applicability.task, *item.provenance.tasks}


def offerable(item: KnowledgeItem, task: Task, contract: TaskContract, exclude_source: bool) -> bool:
    """May the task-scoped ``item`` be tried on ``task`` (another task of its app)?"""
    return (transferable(item) and item.applicability.app == task.app and task.id not in own_tasks(item)
            and task.id not in item.refused and not (exclude_source and task.id in item.provenance.tasks)
            and not conflicts(item.applicability.contract, contract))


def transfer_arm(item: KnowledgeItem, task_id: str, round_index: int, slot: int) -> Arm:
    """Trial or control for ``item`` in the ``slot``-th episode of ``task_id`` this round (balanced within the
    task, flipped each round, decorrelated across items and tasks)."""
    parity = (slot + round_index + zlib.crc32(f"{item.key}\x00{task_id}".encode())) % 2
    return "trial" if parity == 0 else "control"


def split(item: KnowledgeItem, records: list[TrialRecord]) -> tuple[list[TrialRecord], list[TrialRecord]]:
    """The round's records on the item's own tasks, and on others."""
    mine = own_tasks(item)
    return [r for r in records if r.task in mine], [r for r in records if r.task not in mine]


def harmed_tasks(transfer: Evidence, history: dict[str, list[TrialRecord]]) -> set[str]:
    """Tasks where a trial failed and a matched control succeeded: the same round, or the same seed in an
    episode of the task from before its first trial of the item (the task's history)."""
    out = set()
    trials = transfer.arm("trial")
    first: dict[str, int] = {}
    for r in trials:
        first[r.task] = min(first.get(r.task, r.round), r.round)
    trial_episodes = {r.episode for r in trials}
    for t in trials:
        if t.score > 0:
            continue
        past = [h for h in history.get(t.task, []) if h.round < first[t.task] and h.episode not in trial_episodes]
        matched = [c for c in transfer.arm("control") if c.task == t.task and c.round == t.round]
        matched += [h for h in past if h.seed == t.seed]
        if any(c.score > t.score for c in matched):
            out.add(t.task)
    return out


def earn_scope(item: KnowledgeItem, records: list[TrialRecord], history: dict[str, list[TrialRecord]],
               settings: GateSettings) -> tuple[KnowledgeItem, dict[str, object] | None]:
    """Take in a round's records on other tasks: refuse the tasks it harmed (an app-scoped item narrows to its
    task), or widen its scope to the app once the gate passes on them. Returns the item and, when its scope
    or refusals changed, what changed (for the event log)."""
    transfer = item.transfer.model_copy(update={"records": item.transfer.records + records})
    harmed = harmed_tasks(transfer, history) - set(item.refused)
    update: dict[str, object] = {"transfer": transfer}
    change: dict[str, object] | None = None
    if harmed:
        update["refused"] = sorted({*item.refused, *harmed})
        update["scope"] = Scope.TASK
        change = {"narrowed": sorted(harmed), "scope": Scope.TASK.value}
    elif item.scope is Scope.TASK and len({r.task for r in transfer.arm("trial")}) >= MIN_TASKS and \
            gate(Evidence(records=[r for r in transfer.records if r.task not in item.refused]), ItemStatus.TRIAL,
                 settings).status is ItemStatus.ADMITTED:
        update["scope"] = Scope.APP
        change = {"widened": Scope.APP.value, "tasks": sorted({r.task for r in transfer.records})}
    return item.model_copy(update=update), change
