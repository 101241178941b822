"""Subgoal Memory Graph: UI states as nodes, subgoals (successful and failed) as edges.

Learning segments each trajectory into subgoals, annotates them, maps the screens before and after
each subgoal to nodes (merging a screen into an existing node when its embedding's cosine is at
least τ), and adds the subgoal as an edge unless an equivalent edge is already there. Recall embeds
the current screen, takes the nearest node, and returns *all* its outgoing edges.

Ablations (the paper's factorial table): granularity ``action | subgoal | task`` × structure
``graph | flat`` (flat: the top-k edges by similarity of their source screen, no nodes at recall).
"""

from __future__ import annotations

import logging
from typing import Literal

import numpy as np
from pydantic import BaseModel

from guimem.embeddings import cosine
from guimem.memory.base import LearnReport, RecallQuery, RoundBuffer, RoundLog, StoredRounds
from guimem.memory.generalise import state_text
from guimem.memory.kit import MemoryKit
from guimem.memory.ranking import tau_for
from guimem.memory.settings import GraphSettings, Structure
from guimem.memory.subgoals import (
    Annotation,
    Annotator,
    Granularity,
    LLMAnnotator,
    LLMSegmenter,
    OfflineAnnotator,
    OfflineSegmenter,
    Segmenter,
)
from guimem.memory.table import EventType, ItemTable
from guimem.storage import new_id
from guimem.storage.base import pack_vector
from guimem.types import Behaviour, InjectedItem, Injection, ItemKind, Observation, Task, Trajectory
from guimem.vectors import VectorIndex, create_index

log = logging.getLogger(__name__)

class NodeBody(BaseModel):
    """A UI state."""

    signature: str
    app: str
    visits: int = 1
    first_task: str = ""


class EdgeBody(BaseModel):
    """A subgoal from one state to another."""

    source: str
    target: str
    text: str
    effect: str
    behaviour: Behaviour
    success: Literal["yes", "no", "uncertain"]
    task: str
    episode_id: str
    granularity: Granularity = Granularity.SUBGOAL


class GraphMemory(StoredRounds):
    """The ``graph`` memory method.

    Args:
        kit: Store, embedder, counter, namespace.
        settings: Thresholds and ablation options.
    """

    def __init__(self, kit: MemoryKit, settings: GraphSettings | None = None) -> None:
        self.kit = kit
        self.settings = settings or GraphSettings()
        self.tau = self.settings.tau if self.settings.tau is not None else tau_for(kit.embedder.name)
        self.segmenter: Segmenter
        self.annotator: Annotator
        if self.settings.extractor == "llm":
            if kit.llm is None:
                from guimem.errors import ConfigError

                raise ConfigError("the llm extractor needs an LLM endpoint", suggestion="set GUIMEM_LLM__BASE_URL")
            self.segmenter, self.annotator = LLMSegmenter(kit.llm), LLMAnnotator(kit.llm)
        else:
            self.segmenter, self.annotator = OfflineSegmenter(self.settings.granularity), OfflineAnnotator()
        self._nodes: VectorIndex = create_index(kit.vector_index, kit.embedder.dim)
        self._edge_sources: VectorIndex = create_index(kit.vector_index, kit.embedder.dim)
        self._edges: dict[str, EdgeBody] = {}
        self._out: dict[str, list[str]] = {}
        self.rounds = RoundLog(kit.store, kit.namespace)
        self.buffer = RoundBuffer()
        self.nodes = ItemTable(kit, ItemKind.NODE, NodeBody)
        self.edges = ItemTable(kit, ItemKind.EDGE, EdgeBody)
        self._load()

    @property
    def name(self) -> str:
        """``graph``."""
        return "graph"

    def _load(self) -> None:
        for rec, _ in self.nodes.load():
            vec = rec.vector_array()
            if vec is not None:
                self._nodes.add([rec.id], vec[None, :])
        for rec, edge in self.edges.load(["active"]):
            self._index_edge(rec.id, edge, rec.vector_array())

    def _index_edge(self, edge_id: str, body: EdgeBody, source_vec: np.ndarray | None) -> None:
        self._edges[edge_id] = body
        self._out.setdefault(body.source, []).append(edge_id)
        if source_vec is not None:
            self._edge_sources.add([edge_id], source_vec[None, :])

    def _node_for(self, obs: Observation, task: Task, vec: np.ndarray) -> str:
        hits = self._nodes.search(vec, 1)
        if hits and hits[0].score >= self.tau:
            return hits[0].id
        node_id = new_id("n-")
        body = NodeBody(signature=state_text(obs, task), app=obs.app, first_task=task.id)
        self.nodes.put(node_id, body, "active", EventType.CREATED, {"kind": "node"}, pack_vector(vec))
        self._nodes.add([node_id], vec[None, :])
        return node_id

    def _duplicate_of(self, source: str, target: str, ann: Annotation) -> str | None:
        intent = self.kit.embed_text(ann.text)
        for edge_id in self._out.get(source, []):
            edge = self._edges[edge_id]
            if edge.target == target and edge.success == ann.success and \
                    cosine(self.kit.embed_text(edge.text), intent) > self.settings.theta:
                return edge_id
        return None

    def learn(self, trajectory: Trajectory) -> LearnReport:
        """Keep the episode; its subgoals become edges at the round boundary."""
        return self.buffer.add(trajectory)

    def _apply(self, trajectory: Trajectory) -> LearnReport:
        """Add the trajectory's subgoals as edges (one transaction: all or nothing)."""
        report = LearnReport()
        segments = self.segmenter.segment(trajectory)
        with self.kit.store.transaction():
            for i, seg in enumerate(segments):
                ann = self.annotator.annotate(seg, trajectory, is_last=i == len(segments) - 1)
                before_vec = self.kit.embed_state(seg.before, trajectory.task)
                source = self._node_for(seg.before, trajectory.task, before_vec)
                target = self._node_for(seg.after, trajectory.task, self.kit.embed_state(seg.after, trajectory.task))
                dup = self._duplicate_of(source, target, ann)
                if dup is not None:
                    report.dropped += 1
                    continue
                body = EdgeBody(source=source, target=target, text=ann.text, effect=ann.effect,
                                behaviour=ann.behaviour, success=ann.success, task=trajectory.task.id,
                                episode_id=trajectory.episode_id, granularity=self.settings.granularity)
                edge_id = new_id("e-")
                self.edges.put(edge_id, body, "active", EventType.CREATED,
                               {"kind": "edge", "episode": trajectory.episode_id}, pack_vector(before_vec))
                self._index_edge(edge_id, body, before_vec)
                report.added += 1
        return report

    def _edge_item(self, edge_id: str, score: float) -> InjectedItem:
        edge = self._edges[edge_id]
        mark = {"yes": "worked", "no": "FAILED", "uncertain": "unclear"}[edge.success]
        success = {"yes": True, "no": False, "uncertain": None}[edge.success]
        return InjectedItem(id=edge_id, kind=ItemKind.EDGE, text=f"[{mark}] {edge.text} -> {edge.effect}",
                            behaviour=edge.behaviour, score=score, success=success)

    def recall(self, query: RecallQuery) -> Injection:
        """Nearest node's outgoing edges (graph), or the top-k edges by source screen (flat)."""
        if not self._edges:
            return Injection(method=self.name)
        vec = self.kit.embed_state(query.observation, query.task)
        if self.settings.structure is Structure.FLAT:
            hits = self._edge_sources.search(vec, self.settings.flat_k + (len(self._edges)
                                                                         if self.settings.exclude_source_task else 0))
            items = [self._edge_item(h.id, h.score) for h in hits
                     if self._recallable(h.id, query.task)][: self.settings.flat_k]
        else:
            nearest = self._nodes.search(vec, 1)
            if not nearest:
                return Injection(method=self.name)
            edge_ids = [e for e in self._out.get(nearest[0].id, []) if self._recallable(e, query.task)]
            items = [self._edge_item(e, nearest[0].score) for e in edge_ids[-self.settings.max_edges:]]
        return self.kit.injection(self.name, "Memory of this screen (what was tried from here before):", items)

    def _recallable(self, edge_id: str, task: Task) -> bool:
        return not (self.settings.exclude_source_task and self._edges[edge_id].task == task.id)

    def end_round(self) -> None:
        """Add the round's episodes to the graph, in the order they were learned."""
        with self.kit.store.transaction():
            for trajectory in self.buffer.drain():
                self._apply(trajectory)

    def stats(self) -> dict[str, int]:
        """Nodes and edges by success label."""
        out = {"nodes": len(self._nodes)}
        for edge in self._edges.values():
            out[f"edges_{edge.success}"] = out.get(f"edges_{edge.success}", 0) + 1
        return out

