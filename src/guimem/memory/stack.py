"""The ``stack``: graph edges, skills and knowledge through one pipeline (ours, beyond the papers).

- One proposal step per episode: STEER procedures and warnings, successful subgoal edges, and the
  longest verified skill window.
- One admission lifecycle for every kind: candidate → trial → admitted | rejected, with the same
  matched-control trials and gate (an `Admission` part, as `steer` holds one).
- One TaskContract filter; edges and warnings must also fit the current screen.
- MMR across kinds on SGDR-style relevance, under one token budget per step, with per-kind caps.
- Abstention (recorded) when nothing fits.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from guimem.embeddings import EmbedRole, cosine
from guimem.envs.base import Env, Transition
from guimem.errors import StoreError
from guimem.llm import LLMClient
from guimem.memory.ahead import RecallAhead
from guimem.memory.base import LearnReport, RecallQuery, RoundLog, StoredRounds
from guimem.memory.generalise import direct_path, state_text, template_key
from guimem.memory.indexcache import IndexCache
from guimem.memory.kit import MemoryKit, acts_here
from guimem.memory.pool import SCAN_UP_TO, PoolSearch
from guimem.memory.program import can_start, execute, record_use
from guimem.memory.ranking import mmr, tau_for
from guimem.memory.settings import MemorySpec
from guimem.memory.skills.induce import induce
from guimem.memory.skills.verify import verify
from guimem.memory.steer.contract import ContractParser, TaskContract
from guimem.memory.steer.items import (
    UNDER_TEST,
    Applicability,
    ItemStatus,
    KnowledgeItem,
    Provenance,
    Scope,
    is_failure,
)
from guimem.memory.steer.lifecycle import Admission, AdmissionMembers, Entry
from guimem.memory.steer.memory import CachedContracts, build_extractors, compatible, item_view
from guimem.memory.steer.propose import Proposer
from guimem.memory.steer.scope import offerable, transfer_arm
from guimem.memory.subgoals import (
    Annotator,
    LLMAnnotator,
    LLMSegmenter,
    OfflineAnnotator,
    OfflineSegmenter,
    Segmenter,
    effect_lines,
)
from guimem.types import (
    Action,
    ActionError,
    ActionErrorCode,
    Behaviour,
    InjectedItem,
    Injection,
    Observation,
    Origin,
    Task,
    Trajectory,
    shorten,
)
from guimem.vectors.table import VectorTable

KIND_CAPS = {"procedure": 1, "warning": 1, "skill": 2, "edge": 2}
log = logging.getLogger(__name__)
CHECKPOINT_TEXTS = 16_384
"""New text vectors before a long embedding saves them (`StackMemory._checkpoint`): about 4 minutes of e5 here."""
CHECKPOINT_S = 900.0
PROGRESS_S = 60.0
"""How often a long embedding of item texts (a first open without the index cache) says how far it got, at INFO
(`guimem -v`): a first open of a million items embeds for hours."""


def failed_text(behaviour: Behaviour, effect: str) -> str:
    """What a failed subgoal tells the agent, briefly: its last action (the one not to repeat after the
    same steps), how many steps led to it, and what it did."""
    *before, last = behaviour.actions
    lead = f" after {len(before)} earlier step{'s' if len(before) > 1 else ''} from this screen" if before else ""
    return f"[FAILED] {last.describe()}{lead} -> {shorten(effect, 80)}"



@functools.lru_cache(maxsize=1 << 16)  # recall asks for the same edges' screens at every step
def text_key(text: str, role: EmbedRole) -> str:
    """A text's key in the stack's vector cache."""
    return hashlib.sha1(f"{role.value}\x00{text}".encode()).hexdigest()[:24]


def _pool_entry(app: str) -> str:
    """The index cache entry of ``app``'s transfer pool index (an app name is page text: hashed, not a path)."""
    return f"pool-{hashlib.sha1(app.encode()).hexdigest()[:16]}"


class _Screen:
    """The current screen's embedding, computed on first use: the vector memory already holds for the same
    text (an edge learned on this very screen), else embedded. A vector is a function of (role, text) alone,
    so which of the two it comes from never changes what recall returns, only whether the agent waits."""

    def __init__(self, kit: MemoryKit, query: RecallQuery, held: VectorTable) -> None:
        self.kit, self.query, self.held = kit, query, held
        self._vec: NDArray[np.float32] | None = None

    def __call__(self) -> NDArray[np.float32]:
        if self._vec is None:
            text = state_text(self.query.observation, self.query.task)
            held = self.held.get(text_key(text, EmbedRole.QUERY))
            self._vec = held if held is not None else self.kit.embed_text(text, EmbedRole.QUERY)
        return self._vec


class _Progress:
    """How far a long embedding of item texts got: items read and texts embedded since the memory opened, said
    every `PROGRESS_S` while texts are being embedded (a first open that finds them all saved says nothing)."""

    def __init__(self, held: int) -> None:
        self.held, self.items = held, 0
        self.began = self.said = time.monotonic()

    def told(self, items: int, held: int) -> None:
        """``items`` more were read; the text vectors now hold ``held``."""
        self.items += items
        now, embedded = time.monotonic(), held - self.held
        if embedded and now - self.said >= PROGRESS_S:
            self.said = now
            log.info("stack: %d items read, %d item texts embedded (%.1f texts/s) since this memory opened; they are "
                     "saved as it goes, so an interrupted open resumes from the last save", self.items, embedded,
                     embedded / max(now - self.began, 1e-9))


class StackProposer:
    """STEER proposals plus successful subgoal edges plus the longest verified skill window."""

    def __init__(self, base: Proposer, parser: ContractParser, env_factory: Callable[[], Env] | None,
                 llm: LLMClient | None = None) -> None:
        self.base = base
        self.parser = parser
        self.env_factory = env_factory
        self.segmenter: Segmenter = LLMSegmenter(llm) if llm is not None else OfflineSegmenter()
        self.annotator: Annotator = LLMAnnotator(llm) if llm is not None else OfflineAnnotator()

    def propose(self, traj: Trajectory, round_index: int) -> list[KnowledgeItem]:
        """All proposals of one episode: from a success, its procedure, subgoals and skill; from a
        failure, its warning and the subgoal that failed (what was tried on this screen)."""
        items = self.base.propose(traj, round_index)
        items += self._edges(traj, round_index)
        if traj.outcome.success:
            items += self._skills(traj, round_index)
        return items

    def _item(self, traj: Trajectory, kind: str, content: str, behaviour: Behaviour, state: str, round_index: int,
              key: str, **extra: Any) -> KnowledgeItem:
        contract = self.parser.parse(traj.task)
        return KnowledgeItem(
            kind=kind, applicability=Applicability(app=traj.task.app, task=traj.task.id, contract=contract,
                                                   state=state),
            completion=contract.completion or "task reward 1", scope=Scope.TASK, content=content,
            behaviour=behaviour, key=key, created_round=round_index,
            provenance=Provenance(episodes=[traj.episode_id], tasks=[traj.task.id], outcomes=[traj.outcome.success]),
            **extra)

    def _edges(self, traj: Trajectory, round_index: int) -> list[KnowledgeItem]:
        """Subgoals: from a success, those that changed the screen (their order is told by the screen
        they start on); from a failure, the subgoals that failed (not to be repeated from that screen)."""
        segments = self.segmenter.segment(traj)
        if traj.outcome.success:
            segments = direct_path(segments, traj.task)  # a detour that worked is no subgoal of the task
        out = []
        for i, seg in enumerate(segments):
            state = state_text(seg.before, traj.task)
            ann = self.annotator.annotate(seg, traj, is_last=i == len(segments) - 1)
            if not traj.outcome.success:
                if ann.success == "no":
                    key = f"edge-failed|{traj.task.id}|{template_key(ann.behaviour.actions)}|{state}"
                    out.append(self._item(traj, "edge", failed_text(ann.behaviour, ann.effect), ann.behaviour,
                                          state, round_index, key, **self._written(ann.effect)))
                continue
            if len(segments) < 2 or state == state_text(seg.after, traj.task) or ann.success != "yes":
                continue  # a step that changed nothing visible is no subgoal: out of its order it misleads
            key = f"edge|{traj.task.id}|{template_key(ann.behaviour.actions)}|{state}"
            out.append(self._item(traj, "edge", f"{ann.text} -> {ann.effect}", ann.behaviour, state, round_index, key,
                                  **self._written(ann.effect)))
        return out

    def _written(self, effect: str) -> dict[str, Any]:
        """Who wrote an edge's words (the offline annotator's template, or a model) and the screen lines
        its effect quotes."""
        origin = Origin.MODEL if isinstance(self.annotator, LLMAnnotator) else Origin.ACTION
        return {"origin": origin, "page": list(effect_lines(effect))}

    def _skills(self, traj: Trajectory, round_index: int) -> list[KnowledgeItem]:
        windows = [w for w in induce(traj) if not w.replay]  # a run of one of its own skills teaches nothing new
        if not windows or self.env_factory is None:
            return []
        longest = max(len(w.program.steps) for w in windows)
        for cand in (w for w in windows if len(w.program.steps) == longest):
            if verify(self.env_factory(), cand.program, cand.source).ok:
                behaviour = cand.program.behaviour
                return [self._item(traj, "skill", cand.description, behaviour, "", round_index, f"skill|{cand.key}",
                                   name=cand.name, program=cand.program)]
        return []


class StackMemory(AdmissionMembers, StoredRounds):
    """The ``stack`` memory method.

    Args:
        kit: Store, embedder, counter, namespace (and the LLM for the ``llm`` extractor).
        spec: Options (STEER gate, SGDR α/λ/K, the per-step token budget).
        env_factory: For verifying skills by replay.
    """

    def __init__(self, kit: MemoryKit, spec: MemorySpec | None = None,
                 env_factory: Callable[[], Env] | None = None) -> None:
        self.kit = kit
        self.spec = spec or MemorySpec()
        parser, proposer = build_extractors(kit, self.spec.extractor)
        self.contract = CachedContracts(parser)
        llm = kit.llm if self.spec.extractor == "llm" else None
        self.tau = tau_for(kit.embedder.name)
        self.cache = IndexCache(kit)
        # vectors of every text embedded (item texts, edges' screens), by a hash of the text (valid whatever
        # the store did since), memory-mapped from the index cache and looked up one by one: the only place
        # an item's vector is held
        self._texts = VectorTable(kit.embedder.dim, spill_dir=self.cache.folder)
        if self.cache.open_index("texts", self._texts, revision=False) is None:
            self._texts = VectorTable(kit.embedder.dim, spill_dir=self.cache.folder)
        self._unsaved = False
        self._saved_texts, self._saved_at = len(self._texts), time.monotonic()
        self._embedding = _Progress(len(self._texts))
        self._skills: dict[str, str] = {}  # name → id of the skills recall has shown (what a policy can run)
        self._ahead: RecallAhead = RecallAhead()  # while the env settles (`speculate`)
        self._slot = 0  # the trial slot of the last recall (the episode's)
        self._searches: dict[str, PoolSearch] = {}  # by app: the large transfer pools' relevance indexes
        # opened without its index cache, the lifecycle reads the items a chunk at a time and the texts of each
        # chunk are embedded there (`_embed_items`); from the cache, nothing is read until recall needs it
        self.lifecycle = Admission(kit, self.spec.steer.gate, StackProposer(proposer, parser, env_factory, llm),
                                   rules=self.spec.admission, on_scan=self._embed_items)
        self.rounds = RoundLog(kit.store, kit.namespace, screen=kit.defences.quarantine)
        self._save_cache()

    def _ensure(self, texts: list[str], role: EmbedRole) -> list[str]:
        """Embed the ``texts`` not in the text vectors yet, in one batch; their keys."""
        keys = [text_key(t, role) for t in texts]
        todo = sorted({(k, t) for k, t in zip(keys, texts, strict=True) if k not in self._texts})
        if todo:
            self._texts.add([k for k, _ in todo], self.kit.embedder.embed([t for _, t in todo], role))
            self._unsaved = True
        return keys

    def _embed(self, texts: list[str], role: EmbedRole) -> list[NDArray[np.float32]]:
        """Vectors of ``texts``: from the text vectors, the rest embedded in one batch."""
        out = [self._texts.get(k) for k in self._ensure(texts, role)]
        return [v for v in out if v is not None]

    def _embed_items(self, items: Sequence[tuple[str, KnowledgeItem]]) -> None:
        """Embed the texts of ``items`` not embedded yet: their content (recall's relevance) and, for edges,
        their screen (`_fits_screen`), in batches, kept in the text vectors, so that recall never embeds an
        item. Called with each chunk of a first open and with every live item after a boundary."""
        self._ensure([it.content for _, it in items], EmbedRole.PASSAGE)
        states = sorted({it.applicability.state for _, it in items if it.kind == "edge" and it.applicability.state})
        if states:
            self._ensure(states, EmbedRole.QUERY)
        self._embedding.told(len(items), len(self._texts))
        self._checkpoint()

    def _checkpoint(self) -> None:
        """Save the text vectors now and then while many are embedded (a first open of a million items embeds for
        hours): an open cut short resumes, the next one embedding only what was not saved. Saved once at least
        `CHECKPOINT_TEXTS` are new and they are as many as those saved before (so all the saves together write
        at most twice what the last one does), or `CHECKPOINT_S` has passed since the last save."""
        new = len(self._texts) - self._saved_texts
        if new >= CHECKPOINT_TEXTS and (new >= self._saved_texts or time.monotonic() - self._saved_at >= CHECKPOINT_S):
            log.info("stack: saving %d text vectors (%d new) so that an interrupted open resumes",
                     len(self._texts), new)
            self._save_cache()
            if self._unsaved:  # not written (a full disk): not tried again until as many more are new
                self._saved_texts, self._saved_at = len(self._texts), time.monotonic()

    def _warm(self) -> None:
        """After a boundary or a refresh of a memory that holds every item: embed the live items' texts."""
        self._embed_items([(i, it) for i, (it, st) in self.lifecycle.entries.items()
                           if st in (ItemStatus.ADMITTED, *UNDER_TEST)])

    def _after_commit(self) -> None:
        """Refresh the index cache after a committed round: the admission lifecycle's, then the text vectors."""
        with self._ahead.changing():  # the text vectors are read back from the new file once saved
            self.lifecycle.save_cache()
            self._save_cache()

    def _before_close(self) -> None:
        """Persist the text vectors embedded since the last save."""
        self._save_cache()
        self._texts.close()

    def _save_cache(self) -> None:
        """Persist the text vectors embedded since the last save, and the pool indexes that changed enough."""
        for app, search in self._searches.items():
            if search.due and self.cache.enabled:
                search.save(self.cache, _pool_entry(app))
        if not self._unsaved or not self.cache.enabled:
            return
        folder = self.cache.save_index("texts", self._texts, revision=False)
        if folder is None:  # not written (a full disk): keep them, and try again at the next save
            return
        self._unsaved = False
        self._saved_texts, self._saved_at = len(self._texts), time.monotonic()
        try:  # read back what was just written, memory-mapped: what was added (held and spilled) is dropped
            self._texts.load(folder / "index")
        except StoreError as exc:  # another process replaced the entry in between: keep what is held
            log.info("stack text vectors not reread (%s)", exc)

    def refresh(self) -> bool:
        """Catch up with the store without reopening; the new items' texts are embedded here, not in a step."""
        with self._ahead.changing():  # no recall reads the items meanwhile (one ahead may be in flight)
            return self._refresh()

    def _refresh(self) -> bool:
        if not self.lifecycle.refresh():
            return False
        if self.lifecycle.loaded:
            self._warm()
        return True

    def learn(self, trajectory: Trajectory) -> LearnReport:
        """Record trial/control evidence from the episode's trace and queue its proposals (no recall reads the
        items meanwhile)."""
        with self._ahead.changing():
            return self.lifecycle.observe(trajectory)

    def set_status(self, item_id: str, status: str, reason: str) -> None:
        """Manual curation (admit/retire), checked against the transition table and logged (no recall reads the
        items meanwhile)."""
        with self._ahead.changing():
            self.lifecycle.set_status(item_id, status, reason)

    def items(self) -> dict[str, Entry]:
        """The current snapshot: id → (item, status) (read beside no recall: it may read every item)."""
        with self._ahead.holding():
            return dict(self.lifecycle.entries)

    def stats(self) -> dict[str, int]:
        """Items by status (read beside no recall: it may read every item)."""
        with self._ahead.holding():
            return self.lifecycle.stats()

    def end_round(self) -> None:
        """Gate decisions, merges, the next round; then embed the new items (no recall runs meanwhile: the ahead
        lock is taken before the store's, as `commit_round` does)."""
        with self._ahead.changing():
            self.lifecycle.end_round()
            if self.lifecycle.loaded:  # else the round's live items were told to `_embed_items` as they were filed
                self._warm()

    @property
    def name(self) -> str:
        """``stack``."""
        return "stack"


    def _vector(self, item: KnowledgeItem) -> NDArray[np.float32]:
        return self._embed([item.content], EmbedRole.PASSAGE)[0]

    def _fits_screen(self, item: KnowledgeItem, query: RecallQuery, state: str, here: _Screen) -> bool:
        """Edges must start on a screen like this one; skills must be able to start here."""
        if item.kind == "skill" and item.program is not None:
            return can_start(item.program, item.program.args_for(query.task), query.observation, query.task)
        if item.kind != "edge" or item.applicability.state == state:
            return True
        return cosine(here(), self._embed([item.applicability.state], EmbedRole.QUERY)[0]) >= self.tau

    def _eligible(self, query: RecallQuery, here: _Screen
                  ) -> tuple[list[tuple[str, KnowledgeItem, bool]], list[str]]:
        """Items that fit this task and screen (with whether each is under trial) and the ones withheld
        as this episode's control."""
        contract = self.contract(query.task)
        state = state_text(query.observation, query.task)
        shown, withheld = [], []
        for item_id, item, status in self.lifecycle.live_for(query.task):
            if not compatible(item, query.task, contract, state, self.spec.exclude_source_task) or \
                    not self._fits_screen(item, query, state, here):
                continue
            if status in UNDER_TEST and self.lifecycle.arm(item_id, item, status, query.slot) == "control":
                withheld.append(item_id)
                continue
            shown.append((item_id, item, status in UNDER_TEST))
        # other tasks' items, on trial here, only where the task's own memory has nothing for this screen
        for item_id, item in [] if shown or withheld else self._offers(query, contract, state, here)[:1]:
            if transfer_arm(item, query.task.id, self.lifecycle.round, query.slot) == "control":
                withheld.append(item_id)
            else:
                shown.append((item_id, item, True))
        return shown, withheld

    def _offers(self, query: RecallQuery, contract: TaskContract, state: str, here: _Screen
                ) -> list[tuple[str, KnowledgeItem]]:
        """Task-scoped skills and subgoals of the app's other tasks that fit this task and screen
        (`AdmissionRules.transfer`; `guimem.memory.steer.scope`)."""
        if not self.spec.admission.transfer:
            return []

        def fits(item_id: str) -> KnowledgeItem | None:
            entry = self.lifecycle.entry(item_id)
            if entry is None or entry[1] not in (ItemStatus.ADMITTED, *UNDER_TEST):  # changed since the pool was read
                return None
            item = entry[0]
            ok = offerable(item, query.task, contract, self.spec.exclude_source_task) and \
                self._fits_screen(item, query, state, here) and \
                (item.kind != "procedure" or acts_here(item.behaviour, query.task, query.observation))
            return item if ok else None

        entries = self.lifecycle.pool_entries(query.task.app)
        if len(entries) > SCAN_UP_TO:  # a large pool: searched in relevance order (`guimem.memory.pool`)
            search = self._search(query.task.app)
            search.sync(entries, self._pool_vectors)
            if search.due and self.cache.enabled:  # a build, or a large change: saved at once
                search.save(self.cache, _pool_entry(query.task.app))
            found = search.first(self._query(query, here), fits)
            return [found] if found is not None else []
        out = [(item_id, item) for _, item_id in entries if (item := fits(item_id)) is not None]
        if len(out) > 1:  # the most relevant first (SGDR's relevance, as recall ranks)
            q = self._query(query, here)
            out.sort(key=lambda pair: -float(self._vector(pair[1]) @ q))
        return out

    def _search(self, app: str) -> PoolSearch:
        """The relevance index of ``app``'s transfer pool: held, else opened from the index cache, else empty."""
        search = self._searches.get(app)
        if search is None:
            search = self._searches[app] = PoolSearch(self.kit.vector_index, self.kit.embedder.dim)
            if self.cache.enabled:
                search.open(self.cache, _pool_entry(app))
        return search

    def _pool_vectors(self, ids: list[str]) -> tuple[list[str], NDArray[np.float32]]:
        """Relevance vectors of pool items (their content, as recall ranks), for the ids still there; the items
        read for them, a few store reads a batch, are not kept (`Admission.peek_many`: a pool of a million items is
        indexed in bounded memory)."""
        found = dict((i, item.content) for i, (item, _) in self.lifecycle.peek_many(ids))  # each item let go at once
        kept = [i for i in ids if i in found]
        rows = self._embed([found[i] for i in kept], EmbedRole.PASSAGE)
        return kept, np.stack(rows) if rows else np.zeros((0, self.kit.embedder.dim), np.float32)

    def _query(self, query: RecallQuery, here: _Screen) -> NDArray[np.float32]:
        """SGDR's relevance query: α · this screen + (1 − α) · the goal."""
        alpha = self.spec.skills.alpha
        q: NDArray[np.float32] = alpha * here() + (1 - alpha) * self.kit.embed_text(query.task.goal)
        return q

    def speculate(self, task: Task, observation: Observation) -> None:
        """Start embedding a screen recall may be asked about (`Speculating`), and recall on it in the background
        for the episode's trial slot (that of the last recall: a preview comes after an episode's first step)
        (`RecallAhead`): a recall on the same screen takes the answer; nothing while memory is empty."""
        self.speculate_query(RecallQuery(task=task, observation=observation, slot=self._slot))

    def speculate_query(self, query: RecallQuery) -> None:
        """`speculate` for the query's task, screen and trial slot (`SpeculatingQueries`): what the episode loop
        calls, knowing the episode's slot (its first recall is asked before the env resets)."""
        if self.lifecycle.has_items:
            self.kit.speculate_state(query.observation, query.task)
            if self.kit.embeds_ahead:  # an embedder that cannot embed ahead would be asked twice on another screen
                self._ahead.recall_ahead(query.task, query.observation, lambda: self._recall(query), also=query.slot)

    def recall(self, query: RecallQuery) -> Injection:
        """MMR across kinds under the token budget; abstain when nothing fits. The screen is embedded
        only when an edge's screen or the ranking needs it (an empty memory embeds nothing)."""
        self._slot = query.slot
        injection, skills = self._ahead.recalled(query.task, query.observation, lambda: self._recall(query),
                                                 also=query.slot)
        self._skills.update(skills)
        return injection

    def _recall(self, query: RecallQuery) -> tuple[Injection, dict[str, str]]:
        """The recall for the query's task, screen and trial slot (nothing else of it is read), and the skills it
        chose by name (what a policy can run): a function of them and the items held, so it may run ahead."""
        here = _Screen(self.kit, query, self._texts)
        eligible, withheld = self._eligible(query, here)
        if not eligible:
            has_items = self.lifecycle.has_items
            note = "no compatible knowledge" if has_items else "memory is empty"
            return Injection(method=self.name, abstained=has_items, note=note, withheld=tuple(withheld)), {}
        q = self._query(query, here)
        vectors = np.stack([self._vector(it) for _, it, _ in eligible])
        scores = (vectors @ q).astype(np.float32)
        order = mmr(scores, vectors, len(eligible), self.spec.skills.mmr_lambda)
        chosen: list[InjectedItem] = []
        skills: dict[str, str] = {}
        used: dict[str, int] = {}
        budget = self.spec.token_budget
        said: set[tuple[bool, str]] = set()  # one behaviour, one item: a skill and a procedure of the same
        for i in order:                       # steps, or a warning and a failed subgoal of one action
            item_id, item, trial = eligible[i]
            behaviour = (item.behaviour.avoid or is_failure(item), template_key(item.behaviour.actions))
            if behaviour in said:
                continue
            view = item_view(item_id, item, float(scores[i]), trial=trial)
            cost = self.kit.counter.count(view.text) + 2
            if used.get(item.kind, 0) >= KIND_CAPS[item.kind] or cost > budget:
                continue
            said.add(behaviour)
            if item.kind == "skill" and item.name:
                skills[item.name] = item_id
            chosen.append(view)
            used[item.kind] = used.get(item.kind, 0) + 1
            budget -= cost
        return self.kit.injection(self.name, "Memory for this step (verified):", chosen, withheld=tuple(withheld),
                                  observation=query.observation, task=query.task), skills

    def run_skill(self, env: Env, action: Action, task: Task, observation: Observation
                  ) -> tuple[Transition, tuple[Action, ...]]:
        """Execute a skill item by name."""
        with self._ahead.holding():  # its reads are kept where a recall looks, as a recall ahead's are
            shown = self._skills.get(action.skill or "")
            entry = self.lifecycle.entry(shown) if shown is not None else None
            found = [(shown, entry[0])] if shown is not None and entry is not None else self.lifecycle.every_item()
            match = next(((item_id, item) for item_id, item in found if item.kind == "skill" and
                          item.name == action.skill and item.program is not None), None)
        if match is not None:
            item_id, item = match
            assert item.program is not None
            run = execute(env, item.program, {**item.program.args_for(task), **action.args}, observation,
                          name=item.name)
            record_use(self.kit, item_id, task, run)
            return Transition(run.observation, run.error, run.done), run.performed
        err = ActionError(code=ActionErrorCode.SKILL_FAILED, message=f"no skill named {action.skill!r}",
                          action=action.describe())
        return Transition(observation, err), ()

