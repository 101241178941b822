"""The ``skills`` memory: induce, verify, store; recall at every step by relevance + MMR; run on request.

Recall score (SGDR): ``α·sim(state, d) + (1−α)·sim(goal, d)``. Because both terms are dot products
with the description vector ``d``, the score is one search with the query ``α·s + (1−α)·g``; the
top ``max(3K, 20)`` form the pool, and MMR (λ = 0.7) picks K = 5 of them.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from guimem.embeddings import EmbedRole
from guimem.envs.base import Env, Transition
from guimem.memory.ahead import SearchAhead
from guimem.memory.base import LearnReport, RecallQuery, RoundBuffer, RoundLog, StoredRounds
from guimem.memory.indexcache import IndexCache
from guimem.memory.kit import MemoryKit
from guimem.memory.program import SkillProgram, can_start, execute, record_use
from guimem.memory.ranking import mmr
from guimem.memory.settings import SkillSettings
from guimem.memory.skills.induce import SkillSource, induce
from guimem.memory.skills.verify import verify
from guimem.memory.table import EventType, status_event
from guimem.memory.view import ItemView
from guimem.storage import new_id
from guimem.storage.base import pack_vector
from guimem.types import (
    Action,
    ActionError,
    ActionErrorCode,
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
SkillStatus = Literal[ItemStatus.VERIFIED, ItemStatus.UNVERIFIED, ItemStatus.REJECTED]


class SkillBody(BaseModel):
    """A stored skill."""

    name: str
    description: str
    program: SkillProgram
    source: SkillSource
    key: str
    support: int = 1
    verdict: str = ""
    tasks: tuple[str, ...] = ()
    """Other tasks whose episodes gave the same program (merged into this skill): its sources too."""
    imported: bool = False
    """Brought in from an export: its words are the export's, shown as such and screened whole."""

    def learned_from(self, task_id: str) -> bool:
        """Did an episode of ``task_id`` give this skill?"""
        return task_id == self.source.task or task_id in self.tasks


def merged_program(kept: SkillProgram, again: SkillProgram) -> SkillProgram:
    """``kept`` after another episode gave the same program ``again``: a program also seen as a step on the way
    finishes no goal of its own (`SkillProgram.unplaced` None), else it may leave undone what any of its
    episodes left."""
    left = None if kept.unplaced is None or again.unplaced is None else max(kept.unplaced, again.unplaced)
    return kept if left == kept.unplaced else kept.model_copy(update={"unplaced": left})


_DIGEST = 32


def _utf8(texts: list[str]) -> np.ndarray:
    """``texts`` as one array of UTF-8 bytes (read back with `_texts`)."""
    return np.asarray([t.encode("utf-8", "surrogatepass") for t in texts], dtype=bytes) if texts \
        else np.zeros(0, dtype="S1")


def _texts(values: list[Any]) -> Iterator[str]:
    """The strings of a cache array: UTF-8 bytes (`_utf8`), or str as entries written before it held bytes."""
    for v in values:
        if not isinstance(v, bytes):
            yield str(v)
            continue
        try:
            yield v.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:  # not what `_utf8` wrote: a name no skill has (the id it maps is never used)
            yield v.decode("utf-8", "replace")


def _digest(key: str) -> str:
    """An induction key as 32 hex digits of its SHA-256: what `SkillMemory` keeps of it to find the skill a
    candidate repeats (a key spells out a whole program; a million of them do not belong in memory or a cache)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]


class SkillMemory(StoredRounds):
    """The ``skills`` memory method.

    Args:
        kit: Store, embedder, counter, namespace.
        settings: SGDR parameters.
        env_factory: Gives an env to verify new skills by replay; without one they stay unverified.
    """

    def __init__(self, kit: MemoryKit, settings: SkillSettings | None = None,
                 env_factory: Callable[[], Env] | None = None) -> None:
        self.kit = kit
        self.settings = settings or SkillSettings()
        self.env_factory = env_factory
        self._index: VectorIndex = create_index(kit.vector_index, kit.embedder.dim)
        self._ahead: SearchAhead = SearchAhead(lambda: self._index)  # while the env settles (`speculate`)
        self._skills: dict[str, tuple[str, SkillBody, str]] = {}  # name -> skill, when every skill was read
        self._by_key: dict[str, str] = {}  # digest of an induction key (`_digest`) -> skill id
        self._shown: dict[str, int] = {}
        self.rounds = RoundLog(kit.store, kit.namespace, screen=kit.defences.quarantine)
        self.buffer = RoundBuffer()
        self.view = ItemView(kit, ItemKind.SKILL, SkillBody)  # bodies and vectors read on demand, counts
        self.cache = self.view.cache
        self._names: dict[str, str] | None = None  # name -> id, when opened from the index cache
        self._dirty = False
        if not self._open_cached():
            self._open_light()

    def _open_light(self) -> None:
        """Open without a cache: read every skill once, keep only what recall needs (the recallable
        skills' vectors in the index, names, counts) and write the cache; bodies are read on demand, as
        after a cached open (a million skills' parsed bodies do not fit in memory; their names do)."""
        names: dict[str, str] = {}
        keys: dict[str, str] = {}
        counts: dict[str, int] = {}
        with self._ahead.changing():
            self._index = create_index(self.kit.vector_index, self.kit.embedder.dim)
        for part in self.view.stream():  # a chunk at a time: validated (a store is hostile), not kept
            ids, vecs = [], []
            for rec, skill in part:
                names[skill.name] = rec.id
                keys[_digest(skill.key)] = rec.id
                counts[rec.status] = counts.get(rec.status, 0) + 1
                vec = rec.vector_array()
                if vec is not None and self._recallable(rec.status):
                    ids.append(rec.id)
                    vecs.append(vec)
            if ids:
                with self._ahead.changing():
                    self._index.add(ids, np.stack(vecs))
        self._names, self._by_key = names, keys
        self.view.set_counts(counts)
        self._write_cache(names, counts)

    def _open_cached(self) -> bool:
        """Open from the index cache: the recallable skills' vectors and their names; bodies are read
        from the store when recall or a run needs them."""
        with self._ahead.changing():
            return self._open_cached_entry()

    def _open_cached_entry(self) -> bool:
        found = self.view.open_entry(self._entry, [("skills", self._index)])  # and the counts it was saved with
        if found is None:
            self._index = create_index(self.kit.vector_index, self.kit.embedder.dim)
            return False
        try:  # an entry written before it kept the keys, or one removed since: read the store once more
            names = IndexCache.array(found[0], "names").tolist()
            ids = IndexCache.array(found[0], "ids").tolist()
            keys = IndexCache.array(found[0], "keys").tolist()
            key_ids = IndexCache.array(found[0], "key_ids").tolist()
        except (OSError, ValueError):
            self.kit.let_go_warmups()  # the accepted index is dropped: nothing searches what it pages in
            self._index = create_index(self.kit.vector_index, self.kit.embedder.dim)
            return False
        self._names = dict(zip(_texts(names), _texts(ids), strict=True))
        self._by_key = dict(zip(_texts(keys), _texts(key_ids), strict=True))
        return True

    def _after_commit(self) -> None:
        """Refresh the index cache after a committed round (outside its transaction: the committed store)."""
        self._save_cache()

    def _before_close(self) -> None:
        """Refresh the index cache if this process changed the memory since it was saved."""
        self._save_cache()

    def _save_cache(self) -> None:
        """Write the ``skills`` entry when skills changed since it was written."""
        if not self._dirty or not self.cache.enabled:
            return
        names = self._names if self._names is not None else {name: e[0] for name, e in self._skills.items()}
        self._write_cache(names, self.stats())
        self._dirty = False

    def _write_cache(self, names: dict[str, str], counts: dict[str, int]) -> None:
        """The index, the names and the induction keys (sorted, with their ids) and the counts, as the ``skills``
        cache entry: what a round's learning needs (`_apply` merges by key) without reading every skill."""
        arrays: dict[str, np.ndarray] = {}
        for label, table in (("names", "ids"), ("keys", "key_ids")):
            held = names if label == "names" else self._by_key
            order = sorted(held)
            # as UTF-8 bytes: numpy's str arrays take 4 bytes a character, as long as the longest (a million
            # skills' names and ids took 0.4 GB more at the end of a first open)
            arrays[label] = _utf8(order)
            arrays[table] = _utf8([held[n] for n in order])
            del order
        with self._ahead.changing():  # a viewed graph is viewed from the new file once saved
            self.view.save_entry(self._entry, arrays, self._index, counts)

    def refresh(self) -> bool:
        """Catch up with the store: new and changed skills (merged support, status) update the index and
        the names (the counts are recounted in the store when asked); nothing else is read."""
        with self._ahead.changing():  # no recall reads the view meanwhile (one ahead may be in flight)
            return self._refresh()

    def _refresh(self) -> bool:
        found = self.view.changes()
        if found is None:
            return False
        changed, position = found
        for change in changed:
            if change.record.kind != ItemKind.SKILL.value:
                continue
            rec, body = change.record, self.view.apply(change)  # kept; the counts are asked of the store next
            if self._names is not None:  # opened from the cache: keep its names current
                self._names[body.name] = rec.id
            self._remember(rec.id, body, rec.status, rec.vector_array())
        self.view.caught_up(position)
        return True

    def _body(self, skill_id: str) -> SkillBody:
        return self.view.get(skill_id)

    def _vector(self, skill_id: str) -> NDArray[np.float32]:
        vec = self.view.vector(skill_id)
        assert vec is not None, f"skill {skill_id} is in the index without a vector"
        return vec

    def _skill(self, name: str) -> tuple[str, SkillBody, str] | None:
        entry = self._skills.get(name)
        if entry is None and self._names is not None and name in self._names:
            skill_id = self._names[name]
            rec, body = self.view.record(skill_id)
            entry = (skill_id, body, rec.status)
        return entry

    @property
    def searched_ahead(self) -> int:
        """Recalls that found their search done ahead, while the env settled (`speculate`)."""
        return self._ahead.taken

    @property
    def name(self) -> str:
        """``skills``."""
        return "skills"

    @property
    def _entry(self) -> str:
        """The index cache entry: its index holds the recallable skills, so a memory that recalls unverified ones
        keeps another (opened from the other, it would miss them or show them)."""
        return "skills+unverified" if self.settings.recall_unverified else "skills"

    def _recallable(self, status: str) -> bool:
        return status == "verified" or (status == "unverified" and self.settings.recall_unverified)

    def _remember(self, skill_id: str, body: SkillBody, status: str, vec: NDArray[np.float32] | None) -> None:
        self._skills[body.name] = (skill_id, body, status)
        if self._names is not None:  # opened without reading every skill: its names stay current
            self._names[body.name] = skill_id
        self.view.remember(skill_id, body, status, vec)
        self._by_key[_digest(body.key)] = skill_id
        if vec is not None:
            with self._ahead.changing():
                if self._recallable(status):
                    self._index.add([skill_id], vec[None, :])
                else:
                    self._index.remove([skill_id])

    def _status_for(self, body: SkillBody) -> tuple[SkillStatus, str]:
        if not self.settings.verify or self.env_factory is None:
            return ItemStatus.UNVERIFIED, "no environment to replay in"
        verdict = verify(self.env_factory(), body.program, body.source)
        return (ItemStatus.VERIFIED if verdict.ok else ItemStatus.REJECTED), verdict.reason

    def learn(self, trajectory: Trajectory) -> LearnReport:
        """Keep the episode; its skills are induced at the round boundary."""
        return self.buffer.add(trajectory)

    def _apply(self, trajectory: Trajectory) -> LearnReport:
        """Induce skills from a successful trajectory; merge identical programs; verify new ones."""
        report = LearnReport()
        for cand in induce(trajectory, self.settings.lengths):
            existing = self._by_key.get(_digest(cand.key))
            if existing is not None and cand.replay:
                continue  # a run of a routine held here: logged as a use, not a new source (`induce`)
            if existing is not None:
                rec, body = self.view.record(existing)
                tasks = body.tasks if body.learned_from(trajectory.task.id) else (*body.tasks, trajectory.task.id)
                body = body.model_copy(update={"support": body.support + 1, "tasks": tasks,
                                               "program": merged_program(body.program, cand.program)})
                self.view.put(existing, body, rec.status, EventType.MERGED, {"episode": trajectory.episode_id},
                               rec.vector)
                self._remember(existing, body, rec.status, rec.vector_array())
                report.merged += 1
                continue
            body = SkillBody(name=cand.name, description=cand.description, program=cand.program,
                             source=cand.source, key=cand.key)
            status, reason = self._status_for(body)
            body = body.model_copy(update={"verdict": reason})
            vec = self.kit.embed_text(body.description, EmbedRole.PASSAGE)
            skill_id = new_id("sk-")
            self.view.put(skill_id, body, status, status_event(status), {"reason": reason}, pack_vector(vec))
            self._remember(skill_id, body, status, vec)
            report.added += 1
        return report

    def speculate(self, task: Task, observation: Observation) -> None:
        """Start embedding a screen recall may be asked about (`Speculating`), and recall on it in the background
        (`SearchAhead.recall_ahead`): a recall on the same screen takes the answer; nothing when there is no
        skill."""
        if len(self._index):
            self.kit.speculate_state(observation, task)
            # not with a pool of the whole index (not worth searching twice), nor an embedder that cannot embed ahead
            if self.kit.embeds_ahead and not self.settings.exclude_source_task:
                self._ahead.recall_ahead(task, observation, lambda: self._recall(task, observation))

    def recall(self, query: RecallQuery) -> Injection:
        """Top-K skills by SGDR relevance, diversified by MMR."""
        injection, picked = self._ahead.recalled(query.task, query.observation,
                                                  lambda: self._recall(query.task, query.observation))
        for skill_id in picked:  # every skill MMR picked, shown or then withheld by the defences
            self._shown[skill_id] = self._shown.get(skill_id, 0) + 1
        return injection

    def _recall(self, task: Task, observation: Observation) -> tuple[Injection, tuple[str, ...]]:
        """The recall for ``task`` on ``observation`` and the skills MMR picked, without its side effects (they
        are counted as shown by `recall`): a function of them and the skills held, so it may run ahead
        (`speculate`)."""
        if len(self._index) == 0:
            return Injection(method=self.name), ()
        combined = self._query(observation, task)
        pool = self._ahead.search(combined, self._pool_size())
        if self.settings.exclude_source_task:
            pool = [h for h in pool if not self._body(h.id).learned_from(task.id)]
            pool = pool[: max(3 * self.settings.k, self.settings.pool_min)]
            if not pool:
                return Injection(method=self.name), ()
        self.view.read_many([h.id for h in pool])  # in one store read: each is asked for next
        if self.settings.match_state:
            pool = [h for h in pool if self._starts_here(self._body(h.id), task, observation)]
            if not pool:
                return Injection(method=self.name, note="no skill starts on this screen"), ()
        vectors = np.stack([self._vector(h.id) for h in pool])
        scores = np.array([h.score for h in pool], dtype=np.float32)
        picked = mmr(scores, vectors, self.settings.k, self.settings.mmr_lambda)
        items = [self._item(pool[i].id, self._body(pool[i].id), float(scores[i])) for i in picked]
        return self.kit.injection(self.name, "Skills you can call with run_skill(name, args):", items,
                                  observation=observation, task=task), tuple(item.id for item in items)

    def _query(self, observation: Observation, task: Task) -> NDArray[np.float32]:
        """The search vector of a screen of a task: ``α·s + (1−α)·g``."""
        s = self.kit.embed_state(observation, task)
        g = self.kit.embed_text(task.goal)
        alpha = self.settings.alpha
        return (alpha * s + (1 - alpha) * g).astype(np.float32)

    def _pool_size(self) -> int:
        return max(3 * self.settings.k, self.settings.pool_min) + (
            len(self._index) if self.settings.exclude_source_task else 0)

    def _starts_here(self, body: SkillBody, task: Task, observation: Observation) -> bool:
        """Does the skill start on this screen: its arguments are the task's, and its first step finds
        its element here."""
        return can_start(body.program, body.program.args_for(task), observation, task)

    def _item(self, skill_id: str, body: SkillBody, score: float) -> InjectedItem:
        code = body.program.render(body.name)
        return InjectedItem(id=skill_id, kind=ItemKind.SKILL, name=body.name, text=code.replace("\n", "\n  "),
                            behaviour=body.program.behaviour, score=score,
                            success=True,
                            sources=(body.source.task, *body.tasks),
                            origin=Origin.IMPORT if body.imported else Origin.ACTION)

    def run_skill(self, env: Env, action: Action, task: Task, observation: Observation
                  ) -> tuple[Transition, tuple[Action, ...]]:
        """Execute a recalled skill (the harness's skill runner); each run is logged as a use."""
        with self._ahead.holding():  # its read of the store is kept in the view, as a recall ahead's are
            entry = self._skill(action.skill or "")
        if entry is None:
            err = ActionError(code=ActionErrorCode.SKILL_FAILED, message=f"no skill named {action.skill!r}",
                              action=action.describe())
            return Transition(observation, err), ()
        skill_id, body, _ = entry
        run = execute(env, body.program, {**body.program.args_for(task), **action.args}, observation, name=body.name)
        record_use(self.kit, skill_id, task, run)
        return Transition(run.observation, run.error, run.done), run.performed

    def usage(self, skill_id: str) -> dict[str, int]:
        """How often a skill was shown (recalled), ran, succeeded and failed (from the event log and
        the shows not yet flushed). Shown and used are separate: only a run counts as a use."""
        events = self.kit.store.events(item_id=skill_id)
        runs = [json.loads(e.payload) for e in events if e.type == "used"]
        shown = sum(int(json.loads(e.payload)["count"]) for e in events if e.type == "shown")
        ok = sum(1 for r in runs if r.get("success"))
        return {"shown": shown + self._shown.get(skill_id, 0), "uses": len(runs), "successes": ok,
                "failures": len(runs) - ok}

    def end_round(self) -> None:
        """Induce skills from the round's episodes, then log how often each skill was shown this round. Nothing
        else is read: a candidate meets the skill it merges with through its induction key (`_by_key`), after
        catching up with what other writers added to the store (`refresh`; a store that cannot say is read
        again, a chunk at a time). No recall runs meanwhile: the ahead lock is taken before the store's, as
        `commit_round` does."""
        with self._ahead.changing():
            if not self.refresh():
                self._open_light()
            self._dirty = True
            with self.kit.store.transaction():
                for trajectory in self.buffer.drain():
                    self._apply(trajectory)
                for skill_id, count in sorted(self._shown.items()):
                    self.view.log(skill_id, EventType.SHOWN, {"count": count})
            self._shown = {}

    def stats(self) -> dict[str, int]:
        """Skills by status."""
        if self._names is not None:  # not every skill was read: the cache's counts, or the store's
            return self.view.counts()
        out: dict[str, int] = {}
        for _, _, status in self._skills.values():
            out[status] = out.get(status, 0) + 1
        return out

