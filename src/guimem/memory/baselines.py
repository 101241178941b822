"""AppendAll baselines: every proposal kept, no admission.

- ``append_all_similarity``: the top-k items by goal similarity, whatever the task.
- ``append_all_operational``: the top-k items compatible under TaskContract.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from guimem.embeddings import EmbedRole
from guimem.memory.base import LearnReport, RecallQuery, RoundBuffer, RoundLog, StoredRounds
from guimem.memory.generalise import state_text
from guimem.memory.kit import MemoryKit
from guimem.memory.steer.items import KnowledgeItem
from guimem.memory.steer.memory import CachedContracts, build_extractors, compatible, item_view
from guimem.memory.steer.scope import own_tasks
from guimem.memory.table import EventType, ItemTable
from guimem.storage import new_id
from guimem.storage.base import pack_vector
from guimem.types import Injection, ItemKind, ItemStatus, Trajectory
from guimem.vectors import VectorIndex, create_index


class AppendAllMemory(StoredRounds):
    """Keeps every extracted item; recalls the top ``k`` by similarity (optionally contract-filtered).

    Args:
        kit: Store, embedder, counter, namespace.
        variant: ``similarity`` or ``operational``.
        k: Items per step.
    """

    def __init__(self, kit: MemoryKit, variant: Literal["similarity", "operational"] = "similarity", k: int = 5,
                 extractor: str = "offline", exclude_source_task: bool = False) -> None:
        self.kit = kit
        self.variant = variant
        self.k = k
        self.exclude_source_task = exclude_source_task
        parser, self.proposer = build_extractors(kit, extractor)
        self.contract = CachedContracts(parser)
        self._items: dict[str, KnowledgeItem] = {}
        self._index: VectorIndex = create_index(kit.vector_index, kit.embedder.dim)
        self.rounds = RoundLog(kit.store, kit.namespace, screen=kit.defences.quarantine)
        self.buffer = RoundBuffer()
        self.table = ItemTable(kit, ItemKind.KNOWLEDGE, KnowledgeItem)
        for rec, item in self.table.load():
            self._items[rec.id] = item
            vec = rec.vector_array()
            if vec is not None:
                self._index.add([rec.id], vec[None, :])

    @property
    def name(self) -> str:
        """``append_all_similarity`` or ``append_all_operational``."""
        return f"append_all_{self.variant}"

    def learn(self, trajectory: Trajectory) -> LearnReport:
        """Keep the episode; its proposals are stored at the round boundary."""
        return self.buffer.add(trajectory)

    def _apply(self, trajectory: Trajectory) -> LearnReport:
        """Store every proposal as it comes (duplicates included)."""
        proposals = self.proposer.propose(trajectory, 0)
        with self.kit.store.transaction():
            for item in proposals:
                vec = self.kit.embed_text(item.content, EmbedRole.PASSAGE)
                item_id = new_id("k-")
                self.table.put(item_id, item, ItemStatus.ACTIVE, EventType.CREATED, {"episode": trajectory.episode_id},
                               pack_vector(vec))
                self._items[item_id] = item
                self._index.add([item_id], vec[None, :])
        return LearnReport(added=len(proposals))

    def recall(self, query: RecallQuery) -> Injection:
        """Top-k by goal similarity (after the contract filter for the operational variant)."""
        if not self._items:
            return Injection(method=self.name)
        goal = self.kit.embed_text(query.task.goal).astype(np.float32)
        if self.variant == "similarity" and not self.exclude_source_task:
            hits = self._index.search(goal, self.k)
        elif self.variant == "similarity":
            hits = [h for h in self._index.search(goal, len(self._items))
                    if query.task.id not in own_tasks(self._items[h.id])][: self.k]
        else:
            contract = self.contract(query.task)
            state = state_text(query.observation, query.task)
            hits = [h for h in self._index.search(goal, len(self._items))
                    if compatible(self._items[h.id], query.task, contract, state, self.exclude_source_task,
                                  check_state=False)][: self.k]
        items = [item_view(h.id, self._items[h.id], h.score) for h in hits]
        return self.kit.injection(self.name, "Knowledge from earlier episodes:", items,
                                  observation=query.observation, task=query.task)

    def end_round(self) -> None:
        """Store the round's proposals; nothing is consolidated: that is the point of the baseline."""
        with self.kit.store.transaction():
            for trajectory in self.buffer.drain():
                self._apply(trajectory)

    def stats(self) -> dict[str, int]:
        """Items kept."""
        return {ItemStatus.ACTIVE.value: len(self._items)}

