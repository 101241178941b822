"""A memory method the offline explorer can use: it remembers how each goal's failed episodes went, and
warns against repeating their last action from the same point (an item's ``behaviour``, not only text).

Open it by its import path, e.g. ``guimem eval --methods examples.extending.failures_memory:FailuresMemory``.
"""

from __future__ import annotations

import json

from guimem.memory.base import LearnReport, RecallQuery, RoundBuffer, RoundLog, StoredRounds
from guimem.memory.kit import MemoryKit
from guimem.memory.settings import MemorySpec
from guimem.storage.base import EventDraft
from guimem.types import Action, Behaviour, InjectedItem, Injection, ItemKind, Trajectory


class FailuresMemory(StoredRounds):  # StoredRounds: commit_round, committed_round, close
    """Keeps the actions of every failed episode per goal; recalls them as failures (``success=False``)."""

    def __init__(self, kit: MemoryKit, spec: MemorySpec, env_factory: object = None) -> None:
        self.kit, self.spec = kit, spec
        self.rounds = RoundLog(kit.store, kit.namespace)
        self.buffer = RoundBuffer()
        self.failed: dict[str, list[tuple[Action, ...]]] = {}
        for event in kit.store.events(namespace=kit.namespace):
            kept = json.loads(event.payload)
            self._keep(kept["goal"], tuple(Action.model_validate(a) for a in kept["actions"]))

    @property
    def name(self) -> str:
        return "failures"

    def _keep(self, goal: str, actions: tuple[Action, ...]) -> None:
        if actions not in self.failed.setdefault(goal, []):
            self.failed[goal].append(actions)

    def recall(self, query: RecallQuery) -> Injection:
        if self.spec.exclude_source_task:  # every failure comes from the task itself
            return Injection(method=self.name)
        items = [InjectedItem(id=f"failed-{i}", kind=ItemKind.EPISODE, success=False,
                              text="This failed before: " + ", then ".join(a.describe() for a in actions),
                              behaviour=Behaviour(actions=actions))
                 for i, actions in enumerate(self.failed.get(query.task.goal, []))]
        return self.kit.injection(self.name, "Memory:", items) if items else Injection(method=self.name)

    def learn(self, trajectory: Trajectory) -> LearnReport:
        return self.buffer.add(trajectory)

    def end_round(self) -> None:
        for t in self.buffer.drain():
            actions = tuple(s.action.model_copy(update={"ref": None}) for s in t.steps if s.action.selector)
            if t.outcome.success or not actions:
                continue
            payload = json.dumps({"goal": t.task.goal, "actions": [a.model_dump(mode="json") for a in actions]})
            self.kit.store.append_event(EventDraft("created", None, self.kit.namespace, payload))
            self._keep(t.task.goal, actions)

    def stats(self) -> dict[str, int]:
        return {"failures": sum(len(v) for v in self.failed.values())}
