"""A worker's memory catches up with the rounds committed by another process (reading only what changed)
and then recalls exactly what a fresh open of the store recalls."""

from __future__ import annotations

import pytest

from guimem.embeddings import CachedEmbedder
from guimem.embeddings.hashing import HashingEmbedder
from guimem.memory.base import RecallQuery, Refreshable
from guimem.memory.factory import open_memory
from guimem.settings import GuimemSettings
from guimem.testing import FormEnv
from guimem.types import ActionKind, Role, Task
from tests.memory.conftest import CANCEL, LOGIN, PASS, USER, episode

EMBEDDER = CachedEmbedder(HashingEmbedder(128))
SCRIPTS = [[USER, PASS, LOGIN], [LOGIN], [USER, CANCEL], [PASS, USER, LOGIN]]


def _open(method: str, path, cache):
    settings = GuimemSettings()
    settings.cache_dir = cache
    return open_memory(method, str(path), settings, namespace=method, embedder=EMBEDDER, env_factory=FormEnv)


def _queries() -> list[RecallQuery]:
    out = []
    for task_id, fields in [("form", ("username", "password")), *[(f"pin{r}", ("username", f"pin{r}"))
                                                                  for r in (1, 2, 3)]]:
        for seed in (3, 4):
            env = FormEnv(fields)
            obs = env.reset(Task(id=task_id, goal="", app="form", seed=seed))
            out += [RecallQuery(task=env.task, observation=obs, slot=slot) for slot in (0, 1)]
    return out


def _view(memory) -> list[object]:
    views: list[object] = [memory.stats()]
    for q in _queries():
        inj = memory.recall(q)
        views.append(([(i.id, i.text, i.trial) for i in inj.items], sorted(inj.withheld), inj.abstained))
    return views


@pytest.mark.parametrize("method", ["graph", "skills", "steer", "stack"])
@pytest.mark.parametrize("worker_cache", ["own", "shared"])
def test_a_refreshed_worker_recalls_what_a_fresh_open_recalls(tmp_path, method, worker_cache):
    path = tmp_path / f"{method}.sqlite"
    main = _open(method, path, tmp_path / "main-cache")
    main.commit_round(0, [episode(s, seed=i + 1) for i, s in enumerate(SCRIPTS)])
    # another node has its own cache folder (opens from the store); the same machine shares the main's
    worker = _open(method, path, tmp_path / ("worker-cache" if worker_cache == "own" else "main-cache"))
    assert isinstance(worker, Refreshable)
    seen = [_view(worker)]
    for round_index in (1, 2, 3):
        trajectories = [episode(s, seed=10 * round_index + i, memory=main, round_index=round_index, slot=i % 2)
                        for i, s in enumerate(SCRIPTS)]
        # and a form never seen before: new screens, subgoals, skills and items every round
        pin = (ActionKind.TYPE, {"role": Role.TEXTBOX, "label": f"pin{round_index}"}, f"pin{round_index}")
        for i, script in enumerate([[USER, pin, LOGIN], [pin, LOGIN], [USER, pin, LOGIN]]):
            form = FormEnv(("username", f"pin{round_index}"))
            trajectories.append(episode(script, seed=20 * round_index + i, env=form, task_id=f"pin{round_index}",
                                        memory=main, round_index=round_index, slot=i))
        main.commit_round(round_index, trajectories)
        assert worker.refresh(), "caught up without reopening"
        fresh = _open(method, path, None)
        assert _view(worker) == _view(fresh), f"round {round_index}"
        seen.append(_view(fresh))
        fresh.close()
    assert len({repr(v) for v in seen}) == len(seen), "every round changed what is recalled"
    assert worker.refresh() and _view(worker) == _view(main)
    # the writer itself catching up: its own rounds' writes are changes to its view too, applied once
    fresh = _open(method, path, None)
    assert main.refresh() and _view(main) == _view(fresh)
    fresh.close()
    worker.close()
    main.close()


def test_a_store_that_cannot_tell_its_changes_is_reopened(tmp_path):
    from guimem.memory.kit import MemoryKit
    from guimem.memory.steer.memory import SteerMemory
    from guimem.storage.sqlite import SQLiteStore
    from guimem.tokens import WhitespaceCounter

    class Opaque:  # a store without positions (e.g. a user's backend)
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            if name in ("position", "changes"):
                raise AttributeError(name)
            return getattr(self.inner, name)

    store = Opaque(SQLiteStore(tmp_path / "m.sqlite"))
    mem = SteerMemory(MemoryKit(store, EMBEDDER, WhitespaceCounter(), "steer"))  # type: ignore[arg-type]
    assert mem.refresh() is False


def test_a_change_the_graph_cannot_place_leaves_no_half_applied_cache(tmp_path):
    from guimem.storage import Record

    path = tmp_path / "graph.sqlite"
    main = _open("graph", path, tmp_path / "cache")
    main.commit_round(0, [episode(s, seed=i + 1) for i, s in enumerate(SCRIPTS)])
    worker = _open("graph", path, tmp_path / "cache")

    def new_form(round_index: int) -> None:
        pin = (ActionKind.TYPE, {"role": Role.TEXTBOX, "label": f"pin{round_index}"}, f"pin{round_index}")
        form = FormEnv(("username", f"pin{round_index}"))
        main.commit_round(round_index, [episode([USER, pin, LOGIN], seed=5, env=form, task_id=f"pin{round_index}")])

    new_form(1)
    # a node the graph cannot place (no vector), written between two rounds' new nodes and edges
    main.kit.store.put(Record("n-odd", "node", "graph", "active", '{"signature": "", "app": "form"}'))
    new_form(2)
    assert worker.refresh() is False
    worker.close()  # a worker that cannot refresh is closed (its cache written if it changed) and reopened
    again = _open("graph", path, tmp_path / "cache")
    fresh = _open("graph", path, None)
    assert _view(again) == _view(fresh), "the cache holds both rounds, not the first half"


class _Recording(HashingEmbedder):
    """Records every text it is asked to embed."""

    def __init__(self) -> None:
        super().__init__(128)
        self.asked: list[str] = []

    def embed(self, texts, role=None):
        self.asked += list(texts)
        return super().embed(texts) if role is None else super().embed(texts, role)


def test_a_refreshed_stack_takes_a_screen_s_vector_from_the_edges_learned_on_it(tmp_path):
    """A worker opened from the index cache catches up between rounds and embeds the round's new items then;
    a step on a screen an edge was learned on takes that edge's vector of the screen instead of embedding it
    again (the agent waits for nothing), and recalls what a fresh open recalls."""
    from guimem.memory.generalise import state_text

    path, cache = tmp_path / "stack.sqlite", tmp_path / "cache"
    main = _open("stack", path, cache)
    settings = GuimemSettings()
    settings.cache_dir = cache
    recording = _Recording()
    worker = open_memory("stack", str(path), settings, namespace="stack", embedder=CachedEmbedder(recording),
                         env_factory=FormEnv)
    main.commit_round(0, [episode(s, seed=i + 1) for i, s in enumerate(SCRIPTS)])
    assert worker.refresh()
    assert not worker.lifecycle.loaded, "the worker must not hold every item, or this shows nothing"
    states = {it.applicability.state for it, _ in main.lifecycle.entries.values() if it.kind == "edge"}
    on_edges = [q for q in _queries() if state_text(q.observation, q.task) in states]
    assert on_edges, "a screen of the round's edges must be asked about"
    recording.asked.clear()
    fresh = _open("stack", path, None)
    for q in on_edges:
        shown = worker.recall(q)
        assert shown.items and [i.id for i in shown.items] == [i.id for i in fresh.recall(q).items]
    waited = {state_text(q.observation, q.task) for q in on_edges} & set(recording.asked)
    assert not waited, f"recall embedded {len(waited)} screens an edge already holds the vector of"
    for memory in (worker, fresh, main):
        memory.close()
