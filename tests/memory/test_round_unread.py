"""A round boundary reads only what the round touched: with not every item held (a memory opened from its index
cache, or a first open, which reads a chunk at a time), the gate, the merges and the next round's buckets come from
the items the round's evidence and proposals name, and what is recalled after is the same as with every item held
(before, `Admission.end_round` read every item twice: 21 GB for the stack at a million items)."""

from __future__ import annotations

from guimem.agents.explorer import ExplorerPolicy
from guimem.embeddings import CachedEmbedder
from guimem.embeddings.hashing import HashingEmbedder
from guimem.harness.episode import EpisodeSettings, run_episode
from guimem.memory.factory import open_memory
from guimem.settings import GuimemSettings
from guimem.testing import FormEnv
from guimem.types import Task
from tests.memory.conftest import steps_seen


def _run(tmp_path, method: str, hold_all: bool, cache: bool):
    settings = GuimemSettings(cache_dir=tmp_path / f"cache-{method}-{hold_all}-{cache}" if cache else None)
    embedder = CachedEmbedder(HashingEmbedder(settings.embedder.dim))
    path = str(tmp_path / f"{method}-{hold_all}-{cache}.sqlite")
    env = FormEnv()
    out, loaded = [], []
    for round_index in range(4):
        memory = open_memory(method, path, settings, embedder=embedder, env_factory=FormEnv)  # reopened each round
        try:
            if hold_all:
                memory.items()  # reads every item: the boundary then works on them
            batch = []
            for slot, seed in enumerate((1, 2, 3, 4)):
                task = Task(id="form", goal="", app="form", seed=seed + round_index, max_steps=6)
                batch.append(run_episode(env, ExplorerPolicy(seed=seed + 7 * round_index), task, memory=memory,
                                         settings=EpisodeSettings(max_steps=6), round_index=round_index, slot=slot,
                                         skill_runner=getattr(memory, "run_skill", None)))
            memory.commit_round(round_index, batch)
            loaded.append(memory.lifecycle.loaded)
            out.extend(batch)
            stats = memory.stats()
        finally:
            memory.close()
    embedder.close()
    return out, stats, loaded


def test_a_round_boundary_with_not_every_item_held_recalls_what_one_with_every_item_held_does(tmp_path):
    for method in ("steer", "stack"):
        for cache in (False, True):
            held, held_stats, held_loaded = _run(tmp_path, method, hold_all=True, cache=cache)
            lazy, lazy_stats, lazy_loaded = _run(tmp_path, method, hold_all=False, cache=cache)
            assert all(held_loaded) and not any(lazy_loaded), (method, cache)  # the boundary read no item beyond
            assert steps_seen(lazy) == steps_seen(held), (method, cache)
            assert lazy_stats == held_stats, (method, cache)
            assert any(s.injection.items for t in lazy for s in t.steps), f"{method} recalled nothing"
            assert lazy_stats.get("admitted", 0) > 0, lazy_stats  # items were proposed, merged and judged


def _open(method: str, tmp_path, embedder):
    settings = GuimemSettings(cache_dir=tmp_path / "cache")
    return open_memory(method, str(tmp_path / f"{method}.sqlite"), settings, embedder=embedder, env_factory=FormEnv)


def _episodes(memory, env, round_index: int):
    return [run_episode(env, ExplorerPolicy(seed=seed + 7 * round_index),
                        Task(id="form", goal="", app="form", seed=seed + round_index, max_steps=6), memory=memory,
                        settings=EpisodeSettings(max_steps=6), round_index=round_index, slot=slot,
                        skill_runner=getattr(memory, "run_skill", None))
            for slot, seed in enumerate((1, 2, 3, 4))]


def test_a_person_s_decision_made_in_another_process_during_the_round_stands(tmp_path):
    """The round's gate judges an item as it is now in the store, not as this process read it for recall: a person
    who rejects (or retires) an item another process showed this round keeps their decision."""
    embedder = CachedEmbedder(HashingEmbedder(64))
    env = FormEnv()
    decided = None
    for round_index in range(8):
        memory = _open("stack", tmp_path, embedder)
        batch = _episodes(memory, env, round_index)
        shown = {i.id for t in batch for s in t.steps for i in s.injection.items}
        testing = sorted(x for x in shown if memory.lifecycle.entry(x)[1].value in ("candidate", "trial"))
        if decided is None and testing:
            decided = testing[0]
            person = _open("stack", tmp_path, embedder)
            person.set_status(decided, "rejected", "a person")
            person.close()
        memory.commit_round(round_index, batch)
        memory.close()
        if decided is not None:
            break
    assert decided is not None, "no item under test was shown: nothing is tested"
    again = _open("stack", tmp_path, embedder)
    assert again.lifecycle.entry(decided)[1].value == "rejected"
    again.close()
    embedder.close()


def test_an_item_is_found_by_its_key_whatever_its_digest_ends_with_and_the_last_of_a_key_wins(tmp_path):
    import numpy as np

    from guimem.memory.steer.lifecycle import _key_digest

    embedder = CachedEmbedder(HashingEmbedder(64))
    memory = _open("steer", tmp_path, embedder)
    try:
        lifecycle = memory.lifecycle
        nul = next(k for k in (f"key{i}" for i in range(10_000)) if _key_digest(k).endswith(b"\0"))
        keys = [nul, "other", nul, "third"]  # ``nul`` twice (an import keeps its id): the later one is found
        lifecycle._keys_from(np.asarray([_key_digest(k) for k in keys], dtype="S16"),
                             np.asarray([b"first", b"other", b"second", b"third"]))
        assert lifecycle._with_key(nul) == "second"
        assert lifecycle._with_key("other") == "other" and lifecycle._with_key("missing") is None
    finally:
        memory.close()
        embedder.close()


def test_the_cached_content_keys_hold_each_item_once_however_many_rounds(tmp_path):
    import numpy as np

    from guimem.memory.indexcache import IndexCache

    embedder = CachedEmbedder(HashingEmbedder(64))
    env = FormEnv()
    for round_index in range(6):  # reopened every round, as an evaluation's workers are
        memory = _open("stack", tmp_path, embedder)
        memory.commit_round(round_index, _episodes(memory, env, round_index))
        folder = memory.lifecycle.view.open_entry("knowledge")[0]
        ids = IndexCache.array(folder, "key_ids")
        assert len(ids) == len(set(ids.tolist())) == sum(memory.stats().values()), round_index
        assert len(IndexCache.array(folder, "key_digests")) == len(ids)
        assert np.all(IndexCache.array(folder, "key_digests")[:-1] <= IndexCache.array(folder, "key_digests")[1:])
        memory.close()
    embedder.close()
