"""A memory method of your own: it tallies which screens led to success, and says so on the same screen.

(The `SucceededBefore` method in tests/memory/test_contract.py spells out the same contract without helpers.)

Open it by its import path, e.g. ``guimem eval --methods examples.extending.tally_memory:TallyMemory``.
"""

from __future__ import annotations

import json

from guimem.memory.base import LearnReport, RecallQuery, RoundBuffer, RoundLog, StoredRounds
from guimem.memory.kit import MemoryKit
from guimem.memory.settings import MemorySpec
from guimem.storage.base import EventDraft
from guimem.types import InjectedItem, Injection, ItemKind, Trajectory, screen_signature


class TallyMemory(StoredRounds):  # StoredRounds: commit_round, committed_round, close
    """Counts successes per (task, screen); recalls the count when the agent is on that screen again."""

    def __init__(self, kit: MemoryKit, spec: MemorySpec, env_factory: object = None) -> None:
        self.kit, self.spec = kit, spec
        self.rounds = RoundLog(kit.store, kit.namespace)  # round boundaries, in the memory's own store
        self.buffer = RoundBuffer()  # what a round teaches is recalled from the next round on
        self.tally: dict[tuple[str, str], int] = {}
        for event in kit.store.events(namespace=kit.namespace):
            key = json.loads(event.payload)
            self.tally[(key["task"], key["screen"])] = self.tally.get((key["task"], key["screen"]), 0) + 1

    @property
    def name(self) -> str:
        return "tally"

    def recall(self, query: RecallQuery) -> Injection:
        if self.spec.exclude_source_task:  # every tally comes from the task itself
            return Injection(method=self.name)
        wins = self.tally.get((query.task.id, screen_signature(query.observation)), 0)
        if not wins:
            return Injection(method=self.name)
        item = InjectedItem(id=f"tally-{query.task.id}", kind=ItemKind.EPISODE,
                            text=f"From this screen, the task succeeded {wins} times before.")
        return self.kit.injection(self.name, "Memory:", [item])

    def learn(self, trajectory: Trajectory) -> LearnReport:
        return self.buffer.add(trajectory)

    def end_round(self) -> None:
        for t in self.buffer.drain():
            if t.outcome.success and t.steps:
                screen = screen_signature(t.steps[0].observation)
                payload = json.dumps({"task": t.task.id, "screen": screen})
                self.kit.store.append_event(EventDraft("created", None, self.kit.namespace, payload))
                self.tally[(t.task.id, screen)] = self.tally.get((t.task.id, screen), 0) + 1

    def stats(self) -> dict[str, int]:
        return {"screens": len(self.tally)}

