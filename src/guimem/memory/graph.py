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
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from guimem.embeddings import cosine
from guimem.memory.ahead import RecallAhead
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
    effect_lines,
    shown_at,
)
from guimem.memory.table import EventType, ItemTable
from guimem.memory.view import ItemView
from guimem.storage import new_id
from guimem.storage.base import Change, pack_vector
from guimem.types import (
    Behaviour,
    InjectedItem,
    Injection,
    ItemKind,
    ItemStatus,
    Observation,
    Origin,
    Task,
    Trajectory,
)
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
    tasks: tuple[str, ...] = ()
    """Other tasks whose episodes gave this same subgoal (dropped as duplicates): its sources too."""
    imported: bool = False
    """Brought in from an export: its words are the export's, shown as such and screened whole."""

    def learned_from(self, task_id: str) -> bool:
        """Did an episode of ``task_id`` give this edge (the first, or a dropped duplicate)?"""
        return task_id == self.task or task_id in self.tasks


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
        self._out: dict[str, list[str]] = {}  # edges added since the cached adjacency (or all, without one)
        self._adjacency: tuple[NDArray[Any], NDArray[Any], NDArray[Any]] | None = None
        self._counts: dict[str, int] = {}
        self._dirty = False
        self.rounds = RoundLog(kit.store, kit.namespace, screen=kit.defences.quarantine)
        self.buffer = RoundBuffer()
        self.nodes = ItemTable(kit, ItemKind.NODE, NodeBody)
        self.edges = ItemView(kit, ItemKind.EDGE, EdgeBody, bound=self.settings.body_cache)  # bodies read on demand
        self.cache = self.edges.cache
        self._ahead: RecallAhead = RecallAhead()  # while the env settles (`speculate`)
        self._load()

    @property
    def name(self) -> str:
        """``graph``."""
        return "graph"

    def _load(self) -> None:
        """Open from the index cache when it matches the store (vectors memory-mapped, adjacency as
        arrays, edge bodies read on demand); otherwise read the store and write the cache."""
        flat = self.settings.structure is Structure.FLAT  # only the flat ablation searches edges by source
        indexes = [("nodes", self._nodes), *([("edge-sources", self._edge_sources)] if flat else [])]
        found = self.edges.open_entry("nodes", indexes, counts=False)  # its counts are by success label
        if found is not None:
            folder, extras = found
            try:
                adj_nodes, adj_offsets, adj_edges = self.cache.mapped_arrays(  # read at random
                    folder, ("adj_nodes", "adj_offsets", "adj_edges"))
                self._adjacency = (adj_nodes, adj_offsets, adj_edges)
            except (OSError, ValueError) as exc:  # unreadable: rebuilt from the store, as any unusable entry
                log.warning("index cache %s unreadable (%s); rebuilding", folder, exc)
                self.kit.let_go_warmups()  # the accepted indexes are dropped: nothing searches what they page in
            else:
                self._counts = {str(k): int(v) for k, v in extras.get("counts", {}).items()}
                return
        self._nodes = create_index(self.kit.vector_index, self.kit.embedder.dim)
        self._edge_sources = create_index(self.kit.vector_index, self.kit.embedder.dim)
        for nodes in self.nodes.stream():  # a chunk at a time: no call holds every body
            vectors = [(rec.id, vec) for rec, _ in nodes if (vec := rec.vector_array()) is not None]
            if vectors:
                self._nodes.add([i for i, _ in vectors], np.stack([v for _, v in vectors]))
        for edges in self.edges.stream([ItemStatus.ACTIVE]):
            sources = []
            for rec, edge in edges:
                self._index_edge(rec.id, edge)
                vec = rec.vector_array() if flat else None
                if vec is not None:
                    sources.append((rec.id, vec))
            if sources:
                self._edge_sources.add([i for i, _ in sources], np.stack([v for _, v in sources]))
        self._dirty = True
        self._save_cache()

    def refresh(self) -> bool:
        """Catch up with the store: nodes are written once and an edge changes only in the tasks it was learned
        from, so what was written since is new nodes and edges, added to the index and the adjacency, and
        edges with another source task, whose bodies are replaced (anything else: False, reopen)."""
        with self._ahead.changing():  # no recall reads the graph meanwhile (one ahead may be in flight)
            return self._refresh()

    def _refresh(self) -> bool:
        found = self.edges.changes()
        if found is None:
            return False
        changed, position = found
        flat = self.settings.structure is Structure.FLAT
        if any(not self._catchable(c) for c in changed):
            return False  # checked before anything is applied: a half-applied view must never reach the cache
        for change in changed:
            rec = change.record
            vec = rec.vector_array()
            if rec.kind == ItemKind.EDGE.value and not change.new:
                self.edges.apply(change)
            elif rec.kind == ItemKind.NODE.value and rec.id not in self._nodes:
                self._nodes.add([rec.id], vec[None, :])  # type: ignore[index]
            elif rec.kind == ItemKind.EDGE.value and rec.status == ItemStatus.ACTIVE:
                body = EdgeBody.model_validate_json(rec.body)
                if rec.id in self._out_of(body.source):
                    continue  # this process's own (its rounds' writes are changes to its view too): indexed once
                self._index_edge(rec.id, body, vec if flat else None)
            self._dirty = True
        self.edges.caught_up(position)
        return True

    @staticmethod
    def _catchable(change: Change) -> bool:
        rec = change.record
        if rec.kind == ItemKind.NODE.value:
            return change.new and rec.version == 1 and rec.vector is not None
        return change.new or (rec.kind == ItemKind.EDGE.value and rec.status == ItemStatus.ACTIVE)

    def _after_commit(self) -> None:
        """Refresh the index cache after a committed round (outside its transaction: the committed store)."""
        with self._ahead.changing():  # a viewed index is viewed from the new file once saved
            self._save_cache()

    def _before_close(self) -> None:
        """Refresh the index cache if this process changed the memory since it was saved."""
        self._save_cache()

    def _save_cache(self) -> None:
        """Write the cache when something changed since it was read (outside any open transaction)."""
        if not self._dirty or not self.cache.enabled:
            return
        adjacency: dict[str, list[str]] = {}
        if self._adjacency is not None:
            nodes, offsets, edges = self._adjacency
            for i, node in enumerate(nodes.tolist()):
                adjacency[node] = edges[int(offsets[i]):int(offsets[i + 1])].tolist()
        for node, extra in self._out.items():
            adjacency.setdefault(node, []).extend(extra)
        order = sorted(adjacency)
        offsets_list = np.cumsum([0] + [len(adjacency[n]) for n in order]).astype(np.int64)
        flat = [e for n in order for e in adjacency[n]]
        arrays = {"adj_nodes": np.asarray(order, dtype=str) if order else np.zeros(0, dtype="<U1"),
                  "adj_offsets": offsets_list,
                  "adj_edges": np.asarray(flat, dtype=str) if flat else np.zeros(0, dtype="<U1")}
        if self.settings.structure is Structure.FLAT:
            self.edges.save_entry("edge-sources", {}, self._edge_sources)
        self.edges.save_entry("nodes", arrays, self._nodes, extras={"counts": self._counts})
        self._dirty = False

    def _index_edge(self, edge_id: str, body: EdgeBody, source_vec: np.ndarray | None = None) -> None:
        self.edges.remember(edge_id, body, ItemStatus.ACTIVE)
        self._out.setdefault(body.source, []).append(edge_id)
        self._counts[body.success] = self._counts.get(body.success, 0) + 1
        if source_vec is not None and self.settings.structure is Structure.FLAT:
            self._edge_sources.add([edge_id], source_vec[None, :])

    def _edge(self, edge_id: str) -> EdgeBody:
        """An edge's body (kept in the view's bounded cache, else read from the store)."""
        return self.edges.get(edge_id)

    def _out_of(self, node_id: str) -> list[str]:
        """Outgoing edge ids of a node, oldest first."""
        found: list[str] = []
        if self._adjacency is not None:
            nodes, offsets, edges = self._adjacency
            i = int(np.searchsorted(nodes, node_id))
            if i < len(nodes) and nodes[i] == node_id:
                found = edges[int(offsets[i]):int(offsets[i + 1])].tolist()
        return found + self._out.get(node_id, [])

    @property
    def edge_count(self) -> int:
        """Active edges."""
        return sum(self._counts.values())

    def _node_for(self, obs: Observation, task: Task, vec: np.ndarray) -> str:
        hits = self._nodes.search(vec, 1)
        if hits and hits[0].score >= self.tau:
            return hits[0].id
        node_id = new_id("n-")
        body = NodeBody(signature=state_text(obs, task), app=obs.app, first_task=task.id)
        self.nodes.put(node_id, body, ItemStatus.ACTIVE, EventType.CREATED, {"kind": "node"}, pack_vector(vec))
        self._nodes.add([node_id], vec[None, :])
        self._dirty = True
        return node_id

    def _duplicate_of(self, source: str, target: str, ann: Annotation, shown: set[str]) -> str | None:
        """The edge this subgoal duplicates, one of those in ``shown`` first (if it duplicates several)."""
        intent = self.kit.embed_text(ann.text)
        out = self._out_of(source)
        for edge_id in [e for e in out if e in shown] + [e for e in out if e not in shown]:
            edge = self._edge(edge_id)
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
                shown = shown_at(seg, trajectory)
                dup = self._duplicate_of(source, target, ann, shown)
                if dup is not None:
                    # a subgoal that worked where memory showed it as worked followed memory: a use, not a source
                    # (a failure repeated where memory warned of it is the task's own evidence)
                    if not (dup in shown and ann.success == "yes"):
                        self._add_source_task(dup, trajectory.task.id)
                    report.dropped += 1
                    continue
                body = EdgeBody(source=source, target=target, text=ann.text, effect=ann.effect,
                                behaviour=ann.behaviour, success=ann.success, task=trajectory.task.id,
                                episode_id=trajectory.episode_id, granularity=self.settings.granularity)
                edge_id = new_id("e-")
                self.edges.put(edge_id, body, ItemStatus.ACTIVE, EventType.CREATED,
                               {"kind": "edge", "episode": trajectory.episode_id}, pack_vector(before_vec))
                self._index_edge(edge_id, body, before_vec)
                self._dirty = True
                report.added += 1
        return report

    def _add_source_task(self, edge_id: str, task_id: str) -> None:
        """A duplicate from another task is dropped, but its task is kept as a source of the edge it
        duplicates, so leave-one-task-out still hides the edge from that task. Not when the task did it where
        memory showed that edge: it followed memory (a use), and hiding the edge from it then would withdraw
        memory that transferred for having worked."""
        body = self._edge(edge_id)
        if body.learned_from(task_id):
            return
        rec = self.edges.record(edge_id)[0]
        body = body.model_copy(update={"tasks": (*body.tasks, task_id)})
        self.edges.put(edge_id, body, rec.status, EventType.MERGED, {"task": task_id}, rec.vector)

    def _edge_item(self, edge_id: str, score: float) -> InjectedItem:
        edge = self._edge(edge_id)
        mark = {"yes": "worked", "no": "FAILED", "uncertain": "unclear"}[edge.success]
        success = {"yes": True, "no": False, "uncertain": None}[edge.success]
        return InjectedItem(id=edge_id, kind=ItemKind.EDGE, text=f"[{mark}] {edge.text} -> {edge.effect}",
                            behaviour=edge.behaviour, score=score, success=success,
                            sources=(edge.task, *edge.tasks), page=effect_lines(edge.effect),
                            origin=Origin.IMPORT if edge.imported else Origin.MODEL if self.settings.extractor == "llm"
                            else Origin.ACTION)

    def speculate(self, task: Task, observation: Observation) -> None:
        """Start embedding a screen recall may be asked about (`Speculating`), and recall on it in the background
        (`RecallAhead`): a recall on the same screen takes the answer; nothing when there is no edge."""
        if self.edge_count:
            self.kit.speculate_state(observation, task)
            # not with an embedder that cannot embed ahead (asked twice on another screen), nor the flat ablation's
            # search of every edge (not worth doing twice)
            if self.kit.embeds_ahead and not (self.settings.structure is Structure.FLAT
                                              and self.settings.exclude_source_task):
                self._ahead.recall_ahead(task, observation, lambda: self._recall(task, observation))

    def recall(self, query: RecallQuery) -> Injection:
        """Nearest node's outgoing edges (graph), or the top-k edges by source screen (flat)."""
        return self._ahead.recalled(query.task, query.observation, lambda: self._recall(query.task, query.observation))

    def _recall(self, task: Task, observation: Observation) -> Injection:
        """The recall for ``task`` on ``observation``: a function of them and the graph, so it may run ahead."""
        if not self.edge_count:
            return Injection(method=self.name)
        vec = self.kit.embed_state(observation, task)
        if self.settings.structure is Structure.FLAT:
            hits = self._edge_sources.search(vec, self.settings.flat_k + (self.edge_count
                                                                         if self.settings.exclude_source_task else 0))
            items = [self._edge_item(h.id, h.score) for h in hits
                     if self._recallable(h.id, task)][: self.settings.flat_k]
        else:
            nearest = self._nodes.search(vec, 1)
            if not nearest:
                return Injection(method=self.name)
            edge_ids = [e for e in self._out_of(nearest[0].id) if self._recallable(e, task)]
            items = [self._edge_item(e, nearest[0].score) for e in edge_ids[-self.settings.max_edges:]]
        return self.kit.injection(self.name, "Memory of this screen (what was tried from here before):", items,
                                  observation=observation, task=task)

    def _recallable(self, edge_id: str, task: Task) -> bool:
        return not (self.settings.exclude_source_task and self._edge(edge_id).learned_from(task.id))

    def end_round(self) -> None:
        """Add the round's episodes to the graph, in the order they were learned (no recall runs meanwhile: the
        ahead lock is taken before the store's, as `commit_round` does)."""
        with self._ahead.changing(), self.kit.store.transaction():
            for trajectory in self.buffer.drain():
                self._apply(trajectory)

    def stats(self) -> dict[str, int]:
        """Nodes and edges by success label."""
        out = {"nodes": len(self._nodes)}
        for label, count in self._counts.items():
            out[f"edges_{label}"] = count
        return out

