"""Memories that open from a persisted index cache: valid only while it matches the store; a deleted,
stale or corrupt cache is rebuilt from the store with the same recall; cache files never beside the store."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from guimem.memory.base import RecallQuery
from guimem.memory.graph import GraphMemory
from guimem.memory.indexcache import IndexCache
from guimem.memory.settings import GraphSettings, Structure
from guimem.vectors.exact import ExactIndex
from tests.memory.conftest import CANCEL, LOGIN, PASS, USER, episode
from tests.memory.test_graph import query

SETTINGS = GraphSettings(tau=0.95)


def _cached(kit, tmp_path: Path):
    return dataclasses.replace(kit, cache_dir=tmp_path / "cache")


def _learned(kit) -> GraphMemory:
    g = GraphMemory(kit, SETTINGS)
    g.learn(episode([USER, PASS, LOGIN], seed=1))
    g.learn(episode([USER, CANCEL], seed=2))
    g.commit_round(0, [])
    return g


def _view(g: GraphMemory) -> list[tuple[str, str, bool | None]]:
    return [(i.id, i.text, i.success) for i in g.recall(query()).items]


def test_a_reopen_reads_the_cache_and_recalls_the_same(kit, tmp_path, monkeypatch):
    from guimem.vectors import paging

    kit = _cached(kit, tmp_path)
    first = _learned(kit)
    expected, stats = _view(first), first.stats()
    warmed: list[str] = []
    monkeypatch.setattr(paging, "SMALLEST", 0)  # this memory's files are small: tracked all the same
    monkeypatch.setattr(paging, "warm", lambda path, mapped, keep: warmed.append(path.name))
    again = GraphMemory(kit, SETTINGS)
    assert again._adjacency is not None, "opened from the cache"
    assert {"adj_nodes.npy", "adj_offsets.npy", "adj_edges.npy"} <= set(warmed)  # read at random: paged in
    assert _view(again) == expected and again.stats() == stats
    uncached = GraphMemory(dataclasses.replace(kit, cache_dir=None), SETTINGS)
    assert uncached._adjacency is None and _view(uncached) == expected


def test_a_deleted_cache_is_rebuilt_with_the_same_recall(kit, tmp_path):
    kit = _cached(kit, tmp_path)
    expected = _view(_learned(kit))
    shutil.rmtree(tmp_path / "cache")
    rebuilt = GraphMemory(kit, SETTINGS)
    assert rebuilt._adjacency is None and _view(rebuilt) == expected
    assert any((tmp_path / "cache").rglob("stamp.json")), "written again"
    assert GraphMemory(kit, SETTINGS)._adjacency is not None


def test_a_saved_entry_replaces_the_one_before_which_a_later_save_removes_when_no_open_can_read_it(
        kit, tmp_path, monkeypatch):
    """A replaced entry stays for `REPLACED_KEPT_S` (another worker may be opening it); after that the next save
    removes it, and an entry another writer wrote but never pointed to as well."""
    import os
    import time

    import guimem.memory.indexcache as indexcache

    kit = _cached(kit, tmp_path)
    cache = IndexCache(kit)
    cache.save("probe", lambda folder: (folder / "data").write_text("one"))
    cache.save("probe", lambda folder: (folder / "data").write_text("two"))
    found = cache.load("probe")
    assert found is not None and (found[0] / "data").read_text() == "two"
    assert cache.folder is not None
    folders = lambda: sorted(p for p in cache.folder.iterdir() if p.is_dir())  # noqa: E731
    assert len(folders()) == 2, "the replaced entry is kept a while"
    orphan = cache.folder / "probe-0123abcd"  # a writer that lost the race for the pointer
    orphan.mkdir()
    (orphan / "data").write_text("lost")
    cache.save("probe", lambda folder: (folder / "data").write_text("three"))
    assert len(folders()) == 4, "nothing is old enough yet"
    long_ago = time.time() - indexcache.REPLACED_KEPT_S - 1
    for folder in folders():
        for f in (folder, *folder.iterdir()):
            os.utime(f, (long_ago, long_ago))
    cache.save("probe", lambda folder: (folder / "data").write_text("four"))
    current = cache.load("probe")
    assert current is not None and (current[0] / "data").read_text() == "four"
    left = {(f / "data").read_text() for f in folders()}
    assert left == {"three", "four"}, "the replaced entries and the orphan went; the one just replaced stays"


def test_a_stale_cache_is_not_used(kit, tmp_path):
    kit = _cached(kit, tmp_path)
    _learned(kit)
    other = GraphMemory(dataclasses.replace(kit, cache_dir=None), SETTINGS)  # a writer that keeps no cache
    other.learn(episode([LOGIN], seed=3))
    other.end_round()
    fresh = GraphMemory(kit, SETTINGS)
    assert fresh._adjacency is None, "the store changed after the cache was written"
    assert _view(fresh) == _view(other)


def test_a_corrupt_cache_is_rebuilt(kit, tmp_path):
    kit = _cached(kit, tmp_path)
    expected = _view(_learned(kit))
    for f in (tmp_path / "cache").rglob("vectors.npy"):
        f.write_bytes(b"\x93NUMPY garbage")
    again = GraphMemory(kit, SETTINGS)
    assert _view(again) == expected


def test_new_edges_after_a_cached_open_are_recalled_and_cached(kit, tmp_path):
    kit = _cached(kit, tmp_path)
    _learned(kit)
    g = GraphMemory(kit, SETTINGS)
    g.learn(episode([LOGIN], seed=4))
    g.commit_round(1, [])
    expected = _view(g)
    assert len(expected) > 0
    again = GraphMemory(kit, SETTINGS)
    assert again._adjacency is not None and _view(again) == expected and again.stats() == g.stats()


def test_flat_structure_uses_the_cached_edge_index(kit, tmp_path):
    kit = _cached(kit, tmp_path)
    flat = GraphSettings(tau=0.95, structure=Structure.FLAT)
    g = GraphMemory(kit, flat)
    g.learn(episode([USER, PASS, LOGIN], seed=1))
    g.commit_round(0, [])
    assert _view(GraphMemory(kit, flat)) == _view(g)


def test_cache_files_live_in_the_cache_folder_never_beside_the_store(kit, tmp_path):
    kit = _cached(kit, tmp_path)
    before = {p.name for p in Path(kit.store.url).parent.iterdir()}
    _learned(kit)
    GraphMemory(kit, SETTINGS)
    after = {p.name for p in Path(kit.store.url).parent.iterdir()}
    assert after - before <= {"m.sqlite-wal", "m.sqlite-shm", "cache"}
    assert IndexCache(kit).folder is not None and str(IndexCache(kit).folder).startswith(str(tmp_path / "cache"))


def test_an_in_memory_store_keeps_no_cache(tmp_path):
    from guimem.embeddings.hashing import HashingEmbedder
    from guimem.memory.kit import MemoryKit
    from guimem.storage.sqlite import SQLiteStore
    from guimem.tokens import WhitespaceCounter

    kit = MemoryKit(store=SQLiteStore(":memory:"), embedder=HashingEmbedder(64), counter=WhitespaceCounter(),
                    namespace="x", cache_dir=tmp_path)
    assert not IndexCache(kit).enabled


def test_a_loaded_exact_index_is_mapped_read_only_and_copied_on_first_change(tmp_path):
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((50, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    index = ExactIndex(8)
    index.add([f"v{i}" for i in range(50)], vecs)
    index.save(tmp_path / "ix")
    loaded = ExactIndex(8)
    loaded.load(tmp_path / "ix")
    assert isinstance(loaded._matrix, np.memmap) and not loaded._matrix.flags.writeable
    assert [h.id for h in loaded.search(vecs[7], 3)] == [h.id for h in index.search(vecs[7], 3)]
    loaded.add(["new"], vecs[:1])
    loaded.remove(["v3"])
    assert len(loaded) == 50 and "new" in loaded and "v3" not in loaded
    assert np.load(tmp_path / "ix" / "vectors.npy").shape == (50, 8), "the file is never written through"


def test_the_stack_embeds_its_items_once_across_opens(kit, tmp_path):
    from guimem.memory.stack import StackMemory

    kit = _cached(kit, tmp_path)
    stack = StackMemory(kit)
    stack.learn(episode([USER, PASS, LOGIN], seed=1))
    stack.learn(episode([USER, CANCEL], seed=2))
    stack.commit_round(0, [])
    stack.learn(episode([USER, PASS, LOGIN], seed=3))
    stack.commit_round(1, [])
    expected = [(i.id, i.text) for i in stack.recall(query()).items]
    assert len(stack._texts) > 0, "items were embedded"
    fresh_embedder = type(kit.embedder)(kit.embedder.inner)
    seen = []
    inner_embed = fresh_embedder.inner.embed
    fresh_embedder.inner.embed = lambda texts, role=None: (seen.extend(texts), inner_embed(texts, role))[1]
    again = StackMemory(dataclasses.replace(kit, embedder=fresh_embedder))
    assert not seen, "no item text or screen embedded again at open"
    assert fresh_embedder.misses == 0
    assert [(i.id, i.text) for i in again.recall(query()).items] == expected


def _steer_rounds(kit):
    from guimem.memory.steer.memory import SteerMemory

    steer = SteerMemory(kit)
    for r in range(1):  # after one round its items are under test: shown or withheld by slot
        trajs = [episode([USER, PASS, LOGIN], seed=10 * r + 1, memory=steer, round_index=r, slot=0),
                 episode([USER, CANCEL], seed=10 * r + 2, memory=steer, round_index=r, slot=1)]
        steer.commit_round(r, trajs)
    return steer


def test_steer_opens_from_the_cache_without_reading_every_item(kit, tmp_path):
    from guimem.memory.steer.memory import SteerMemory

    kit = _cached(kit, tmp_path)
    steer = _steer_rounds(kit)
    def seen(memory):  # what recall decided for every slot: shown items and withheld controls
        out = []
        for slot in range(4):
            inj = memory.recall(RecallQuery(task=query().task, observation=query().observation, slot=slot))
            out.append(([(i.id, i.text, i.trial) for i in inj.items], inj.withheld, inj.abstained))
        return out

    expected = seen(steer)
    assert any(items or withheld for items, withheld, _ in expected), "something fits the form task"
    again = SteerMemory(kit)
    assert not again.lifecycle.loaded, "opened from the cache"
    assert seen(again) == expected
    assert not again.lifecycle.loaded, "recall read only its task's items"
    assert again.stats() == steer.stats()
    other_task = RecallQuery(task=query().task.model_copy(update={"id": "another"}), observation=query().observation)
    assert again.recall(other_task).abstained and not again.lifecycle.loaded


def test_steer_with_a_stale_cache_reads_the_store(kit, tmp_path):
    from guimem.memory.steer.memory import SteerMemory

    kit = _cached(kit, tmp_path)
    steer = _steer_rounds(kit)
    steer.lifecycle.set_status(next(iter(steer.items())), "rejected", "test")  # a write the cache never saw
    again = SteerMemory(kit)
    assert again.stats() == steer.stats()
    assert not again.lifecycle.loaded, "a first open reads the items a chunk at a time and keeps none"
    assert again.lifecycle.view.kept_items() == 0


def test_skills_open_from_the_cache_and_read_bodies_on_demand(kit, tmp_path):
    from guimem.memory.settings import SkillSettings
    from guimem.memory.skills.library import SkillMemory
    from guimem.testing import FormEnv

    kit = _cached(kit, tmp_path)
    settings = SkillSettings(match_state=False)
    skills = SkillMemory(kit, settings, env_factory=FormEnv)
    skills.learn(episode([USER, PASS, LOGIN], seed=1))
    skills.commit_round(0, [])
    expected = [(i.id, i.name, i.text) for i in skills.recall(query()).items]
    assert expected, "a verified skill is recalled"
    again = SkillMemory(kit, settings, env_factory=FormEnv)
    assert again._names is not None and not again.view.kept_items(), "opened from the cache, no body read"
    assert [(i.id, i.name, i.text) for i in again.recall(query()).items] == expected
    assert again.stats() == skills.stats()
    name = expected[0][1]
    from guimem.types import Action, ActionKind

    env = FormEnv()
    obs = env.reset(query().task)
    _, performed = again.run_skill(env, Action(kind=ActionKind.RUN_SKILL, skill=name), env.task, obs)
    assert performed, "a skill known only by its cached name still runs"


def test_skills_opened_without_a_cache_keep_no_bodies_and_write_the_cache(kit, tmp_path):
    from guimem.memory.settings import SkillSettings
    from guimem.memory.skills.library import SkillMemory
    from guimem.testing import FormEnv

    settings = SkillSettings(match_state=False)
    skills = SkillMemory(kit, settings, env_factory=FormEnv)  # no cache folder at all
    skills.learn(episode([USER, PASS, LOGIN], seed=1))
    skills.commit_round(0, [])
    expected = ([(i.id, i.name, i.text) for i in skills.recall(query()).items], skills.stats())
    cached = _cached(kit, tmp_path)
    first = SkillMemory(cached, settings, env_factory=FormEnv)  # a million parsed bodies would not fit
    assert first._names is not None and not first.view.kept_items() and not first._skills
    assert ([(i.id, i.name, i.text) for i in first.recall(query()).items], first.stats()) == expected
    assert any((tmp_path / "cache").rglob("names.npy")), "and the cache is written for the next open"


def test_a_first_open_reads_the_items_a_chunk_at_a_time_and_keeps_none(kit, tmp_path, monkeypatch):
    """#34: opening without the index cache streams the items (steer and the stack): no call reads them all, no
    body is kept, the stack's texts are embedded there, and recall is what it was in the memory that learned."""
    from guimem.memory.stack import StackMemory
    from guimem.memory.steer.lifecycle import Admission
    from guimem.memory.steer.memory import SteerMemory
    from guimem.memory.view import ItemView

    stream = ItemView.stream
    for cls in (SteerMemory, StackMemory):
        learned = cls(_cached(kit, tmp_path / cls.__name__))
        for r in range(2):
            trajs = [episode([USER, PASS, LOGIN], seed=10 * r + 1, memory=learned, round_index=r, slot=0),
                     episode([USER, CANCEL], seed=10 * r + 2, memory=learned, round_index=r, slot=1)]
            learned.commit_round(r, trajs)
        queries = [RecallQuery(task=query().task, observation=query().observation, slot=slot) for slot in range(4)]
        expected = [[(i.id, i.text) for i in learned.recall(q).items] for q in queries]
        assert any(expected), f"{cls.__name__}: something to recall"

        chunks: list[int] = []

        def one_at_a_time(self, statuses=None, chunk=500, chunks=chunks):
            for part in stream(self, statuses, chunk=1):
                chunks.append(len(part))
                yield part
        monkeypatch.setattr(ItemView, "stream", one_at_a_time)
        monkeypatch.setattr(Admission, "_load", lambda self: (_ for _ in ()).throw(AssertionError("read them all")))
        fresh = dataclasses.replace(kit, cache_dir=tmp_path / f"{cls.__name__}-fresh",
                                    embedder=type(kit.embedder)(kit.embedder.inner))
        again = cls(fresh)
        assert len(chunks) > 1 and set(chunks) == {1}, "one chunk at a time"
        assert not again.lifecycle.loaded and again.lifecycle.view.kept_items() == 0
        embedded = fresh.embedder.misses
        assert [[(i.id, i.text) for i in again.recall(q).items] for q in queries] == expected
        if cls is StackMemory:
            assert embedded > 0 and len(again._texts) > 0, "the item texts were embedded while streaming"
        monkeypatch.undo()


def test_a_write_made_while_a_first_open_reads_is_not_claimed_by_its_cache(kit, tmp_path, monkeypatch):
    """The cache written at the end of a streaming first open carries the store's revision from before it read:
    an item another process wrote meanwhile makes the next open read the store again, and see it."""
    from guimem.memory.steer.memory import SteerMemory
    from guimem.memory.view import ItemView

    kit = _cached(kit, tmp_path)
    steer = _steer_rounds(kit)
    shutil.rmtree(tmp_path / "cache")
    stream = ItemView.stream

    def meanwhile(self, statuses=None, chunk=500):
        yield from stream(self, statuses, chunk)
        item_id = next(iter(steer.items()))
        steer.lifecycle.set_status(item_id, "rejected", "another process")  # after the read, before the save
    monkeypatch.setattr(ItemView, "stream", meanwhile)
    SteerMemory(kit)
    monkeypatch.undo()
    again = SteerMemory(kit)
    assert again.stats() == steer.stats()
    assert again.lifecycle.view.cache.load("knowledge") is not None, "a fresh cache entry was written"
    assert again.lifecycle._buckets is not None
    live = sum(len(v) for v in again.lifecycle._buckets.values())
    assert live == sum(1 for _, st in steer.items().values() if st.value in ("admitted", "candidate", "trial"))


def test_a_new_store_at_a_deleted_store_s_path_does_not_take_its_cache(kit, tmp_path):
    """A run directory deleted and run again holds a new store at the same path, written alike up to the same
    count: the old store's cache named items the new one does not hold, and every worker of the next round
    raised NotFoundError (two desktop evaluations re-run into the same --out)."""
    from guimem.storage.sqlite import SQLiteStore

    kit = _cached(kit, tmp_path)
    path = Path(kit.store.url)
    _learned(kit)
    old = IndexCache(kit).stamp()
    kit.store.close()
    for leftover in path.parent.glob(path.name + "*"):
        leftover.unlink()
    kit = dataclasses.replace(kit, store=SQLiteStore(path))
    second = _learned(kit)
    assert IndexCache(kit).stamp() != old, "written alike, but another store"
    expected = _view(second)
    again = GraphMemory(kit, SETTINGS)
    assert _view(again) == expected
    kit.store.close()


def test_a_stack_first_open_cut_short_resumes_where_its_last_save_left_off(kit, tmp_path, monkeypatch):
    """#34: a first open of a million items embeds for hours; it saves its text vectors now and then, so an open
    that dies part way (here: the embedder fails) is followed by one that embeds only what was not saved."""
    import guimem.memory.stack as stack_module
    from guimem.memory.stack import StackMemory
    from guimem.memory.view import ItemView

    learned = StackMemory(_cached(kit, tmp_path / "learned"))
    for r in range(3):
        trajs = [episode([USER, PASS, LOGIN], seed=10 * r + 1, memory=learned, round_index=r, slot=0),
                 episode([USER, CANCEL], seed=10 * r + 2, memory=learned, round_index=r, slot=1)]
        learned.commit_round(r, trajs)
    expected = [(i.id, i.text) for i in learned.recall(query()).items]
    stream = ItemView.stream
    monkeypatch.setattr(ItemView, "stream", lambda self, statuses=None, chunk=500: stream(self, statuses, chunk=1))
    monkeypatch.setattr(stack_module, "CHECKPOINT_TEXTS", 1)

    class Cut:
        """The kit's embedder, recording what it embeds, failing once it has embedded ``fail_after`` texts."""

        def __init__(self, inner, fail_after):
            self.inner, self.fail_after, self.asked = inner, fail_after, []
            self.name, self.dim = inner.name, inner.dim

        def embed(self, texts, role=None):
            if self.fail_after is not None and len(self.asked) + len(texts) > self.fail_after:
                raise RuntimeError("the open is cut short")
            self.asked.extend(texts)
            return self.inner.embed(texts) if role is None else self.inner.embed(texts, role)

    def counted(fail_after: int | None):
        recorder = Cut(kit.embedder.inner, fail_after)
        return type(kit.embedder)(recorder), recorder.asked

    whole_embedder, whole = counted(None)
    StackMemory(dataclasses.replace(kit, cache_dir=tmp_path / "whole", embedder=whole_embedder))
    assert len(whole) >= 4, "enough texts to cut the open short"
    cache = tmp_path / "resumed"
    cut_embedder, cut = counted(len(whole) // 2)
    try:
        StackMemory(dataclasses.replace(kit, cache_dir=cache, embedder=cut_embedder))
    except Exception as exc:  # the failure, as the open raises it
        assert "cut short" in str(exc) or "cut short" in str(exc.__cause__)
    else:
        raise AssertionError("the open should have failed part way")
    assert 0 < len(cut) <= len(whole) // 2
    rest_embedder, rest = counted(None)
    again = StackMemory(dataclasses.replace(kit, cache_dir=cache, embedder=rest_embedder))
    assert sorted(cut + rest) == sorted(whole), "each text embedded once across the two opens"
    assert [(i.id, i.text) for i in again.recall(query()).items] == expected


def test_skills_learn_a_round_after_a_cached_open_without_reading_every_skill(kit, tmp_path, monkeypatch):
    """#34: a round's learning merges a candidate with the skill of the same induction key; after a cached open
    it finds that skill through the cache's keys, never by reading every skill (at 1M skills that read held
    17.7 GB and rebuilt the whole index inside an evaluation), and the cache it writes opens the next time."""
    from guimem.memory.settings import SkillSettings
    from guimem.memory.skills.library import SkillMemory
    from guimem.memory.view import ItemView
    from guimem.testing import FormEnv

    kit = _cached(kit, tmp_path)
    settings = SkillSettings(match_state=False)
    skills = SkillMemory(kit, settings, env_factory=FormEnv)
    skills.learn(episode([USER, PASS, LOGIN], seed=1))
    skills.commit_round(0, [])
    shown = [(i.id, i.name) for i in skills.recall(query()).items]
    assert shown, "a verified skill is recalled"
    support = {name: skills._skill(name)[1].support for _, name in shown}
    total = sum(skills.stats().values())

    def no_full_read(*args, **kwargs):
        raise AssertionError("every skill read")
    monkeypatch.setattr(ItemView, "load", no_full_read)
    monkeypatch.setattr(ItemView, "stream", no_full_read)
    again = SkillMemory(kit, settings, env_factory=FormEnv)
    assert again._names is not None, "opened from the cache"
    again.learn(episode([USER, PASS, LOGIN], seed=2))
    again.commit_round(1, [])
    for skill_id, name in shown:  # the same episode again: every candidate merges with the skill it repeats
        entry = again._skill(name)
        assert entry is not None and entry[0] == skill_id and entry[1].support == support[name] + 1, name
    assert sum(again.stats().values()) == total, "no skill added twice"
    third = SkillMemory(kit, settings, env_factory=FormEnv)  # the cache written after the round: no read again
    assert all(third._skill(name)[1].support == support[name] + 1 for _, name in shown)
    recalled = [(i.id, i.name) for i in again.recall(query()).items]
    assert [(i.id, i.name) for i in third.recall(query()).items] == recalled


def test_skills_a_round_merges_with_what_another_writer_added_meanwhile(kit, tmp_path):
    """Two memories on one store: what one induced while the other was open is met by the other's round (it
    catches up first), so the same routine is merged, never kept twice."""
    from guimem.memory.settings import SkillSettings
    from guimem.memory.skills.library import SkillMemory
    from guimem.testing import FormEnv

    kit = _cached(kit, tmp_path)
    settings = SkillSettings(match_state=False)
    first = SkillMemory(kit, settings, env_factory=FormEnv)
    other = SkillMemory(kit, settings, env_factory=FormEnv)
    other.learn(episode([USER, PASS, LOGIN], seed=1))
    other.commit_round(0, [])
    added = sum(other.stats().values())
    assert added > 0
    first.learn(episode([USER, PASS, LOGIN], seed=2))
    first.commit_round(1, [])
    assert sum(first.stats().values()) == added, "merged with the other writer's skills, none added twice"


def test_skills_cache_names_are_compact_bytes_that_read_back_exactly_and_older_str_entries_still_open(
        kit, tmp_path, monkeypatch):
    """#34: the skills entry keeps names and ids as UTF-8 bytes (numpy's str arrays take 4 bytes a character, as
    long as the longest: 0.4 GB at the end of a 1M first open); any name reads back as it was, and an entry
    written with str arrays before still opens with the same names."""
    from guimem.memory.settings import SkillSettings
    from guimem.memory.skills.library import SkillMemory, _texts, _utf8
    from guimem.testing import FormEnv

    odd = ["plain", "café_ünïcode", "lone\ud800surrogate", "", "日本語"]
    assert list(_texts(_utf8(odd).tolist())) == odd
    assert list(_texts(np.asarray(odd[:2] + odd[3:], dtype=str).tolist())) == odd[:2] + odd[3:]
    assert list(_texts([b"\xff\xfe broken"])) == ["\ufffd\ufffd broken"], "a damaged entry never raises"
    kit = _cached(kit, tmp_path)
    settings = SkillSettings(match_state=False)
    skills = SkillMemory(kit, settings, env_factory=FormEnv)
    skills.learn(episode([USER, PASS, LOGIN], seed=1))
    skills.commit_round(0, [])
    again = SkillMemory(kit, settings, env_factory=FormEnv)
    assert again._names and again._by_key
    names, keys = dict(again._names), dict(again._by_key)
    entry = IndexCache(kit).load("skills")
    assert entry is not None
    names_file = entry[0] / "names.npy"
    assert np.load(names_file).dtype.kind == "S"
    for label in ("names", "ids", "key_ids"):  # as an entry written before: str arrays
        path = names_file.parent / f"{label}.npy"
        np.save(path, np.asarray([b.decode() for b in np.load(path).tolist()], dtype=str))
    from guimem.memory.view import ItemView

    def no_full_read(*args, **kwargs):
        raise AssertionError("every skill read: the older entry did not open")
    monkeypatch.setattr(ItemView, "stream", no_full_read)
    older = SkillMemory(kit, settings, env_factory=FormEnv)
    assert older._names == names and older._by_key == keys


def test_skills_opened_from_a_saved_graph_add_a_skill_after_a_round_that_added_none(kit, tmp_path):
    """A round that added no skill rewrote the cache entry and removed the one whose HNSW graph file the memory
    still viewed; the next new skill loaded that removed file (FileNotFoundError; found at 1M skills)."""
    from guimem.memory.settings import SkillSettings
    from guimem.memory.skills.library import SkillMemory
    from guimem.testing import FormEnv

    kit = dataclasses.replace(_cached(kit, tmp_path), vector_index="hnsw")
    settings = SkillSettings(match_state=False)
    first = SkillMemory(kit, settings, env_factory=FormEnv)
    first.learn(episode([USER, PASS, LOGIN], seed=1))
    first.commit_round(0, [])
    before = sum(first.stats().values())
    again = SkillMemory(kit, settings, env_factory=FormEnv)
    assert again._index._view is not None, "opened from the cache, the graph viewed from its file"
    again.commit_round(1, [])  # nothing learned: the entry is written again, the one viewed removed
    again.learn(episode([PASS, USER, LOGIN], seed=3))
    again.commit_round(2, [])
    assert sum(again.stats().values()) > before
    shown = [i.name for i in again.recall(query()).items]
    assert shown and [i.name for i in SkillMemory(kit, settings, env_factory=FormEnv).recall(query()).items] == shown


def _worker(kit, tmp_path: Path):
    """Another evaluation worker: its own connection to the same store, the same cache folder, HNSW search."""
    from guimem.storage.sqlite import SQLiteStore

    return dataclasses.replace(kit, store=SQLiteStore(Path(kit.store.url)), cache_dir=tmp_path / "cache",
                               vector_index="hnsw")


def test_two_workers_on_one_cache_entry_each_learn_after_the_other_replaced_it(kit, tmp_path):
    """#34 review: two skills memories open from one cache entry and view its graph file; one's round replaces the
    entry. The other still recalls, learns a new skill and writes its own entry (its first change read the
    replaced entry's file by name before: FileNotFoundError)."""
    from guimem.memory.settings import SkillSettings
    from guimem.memory.skills.library import SkillMemory
    from guimem.testing import FormEnv

    settings = SkillSettings(match_state=False)
    first = SkillMemory(_worker(kit, tmp_path), settings, env_factory=FormEnv)
    first.learn(episode([USER, PASS, LOGIN], seed=1))
    first.commit_round(0, [])
    a = SkillMemory(_worker(kit, tmp_path), settings, env_factory=FormEnv)
    b = SkillMemory(_worker(kit, tmp_path), settings, env_factory=FormEnv)
    assert a._names is not None and b._names is not None, "both opened from the cache"
    a.learn(episode([USER, CANCEL], seed=2))
    a.commit_round(1, [])  # a new entry
    shown = [i.name for i in b.recall(query()).items]
    assert shown
    b.learn(episode([PASS, USER, LOGIN], seed=3))
    b.commit_round(1, [])
    c = SkillMemory(_worker(kit, tmp_path), settings, env_factory=FormEnv)
    assert c._names is not None and sum(c.stats().values()) == sum(b.stats().values()) >= sum(a.stats().values())
    assert [i.name for i in c.recall(query()).items] == [i.name for i in b.recall(query()).items]


def test_an_entry_replaced_while_another_worker_opens_it_still_opens(kit, tmp_path, monkeypatch):
    """#34 review: a worker reads the entry's pointer, another worker's round replaces the entry, then the first
    reads the entry's arrays: they are still there (a replaced entry is removed only later), and the index and
    the arrays come from the same entry (the pointer was read twice before)."""
    from guimem.memory.settings import SkillSettings
    from guimem.memory.skills.library import SkillMemory
    from guimem.memory.view import ItemView
    from guimem.testing import FormEnv

    settings = SkillSettings(match_state=False)
    first = SkillMemory(_worker(kit, tmp_path), settings, env_factory=FormEnv)
    first.learn(episode([USER, PASS, LOGIN], seed=1))
    first.commit_round(0, [])
    a = SkillMemory(_worker(kit, tmp_path), settings, env_factory=FormEnv)
    a.learn(episode([USER, CANCEL], seed=2))
    real, reads = IndexCache.load, []

    def load(self, name, revision=True):
        found = real(self, name, revision)
        reads.append(name)
        if len(reads) == 1:  # this worker has the folder, not yet its arrays: the other's round ends now
            a.commit_round(1, [])
        return found
    def no_full_read(*args, **kwargs):
        raise AssertionError("every skill read: the entry found was not opened")
    monkeypatch.setattr(IndexCache, "load", load)
    monkeypatch.setattr(ItemView, "load", no_full_read)
    monkeypatch.setattr(ItemView, "stream", no_full_read)
    b = SkillMemory(_worker(kit, tmp_path), settings, env_factory=FormEnv)
    monkeypatch.setattr(IndexCache, "load", real)
    monkeypatch.undo()
    assert len(reads) == 1, "the pointer is read once per open"
    assert set(b._names.values()) == set(b._index._keys), "index and names from one entry"
    b.refresh()
    assert sum(b.stats().values()) == sum(a.stats().values())


def test_a_stack_first_open_that_embeds_says_how_far_it_got_and_a_cached_one_says_nothing(kit, tmp_path, monkeypatch,
                                                                                           caplog):
    """#34: a first open of a million items embeds for hours; at INFO (`guimem -v`) it says, now and then, how many
    items it read and texts it embedded and at what rate. An open that finds every text saved embeds nothing and
    says nothing."""
    import logging

    import guimem.memory.stack as stack_module
    from guimem.memory.stack import StackMemory
    from guimem.memory.view import ItemView

    learned = StackMemory(_cached(kit, tmp_path / "learned"))
    for r in range(2):
        trajs = [episode([USER, PASS, LOGIN], seed=10 * r + 1, memory=learned, round_index=r, slot=0),
                 episode([USER, CANCEL], seed=10 * r + 2, memory=learned, round_index=r, slot=1)]
        learned.commit_round(r, trajs)
    stream = ItemView.stream
    monkeypatch.setattr(ItemView, "stream", lambda self, statuses=None, chunk=500: stream(self, statuses, chunk=1))
    monkeypatch.setattr(stack_module, "PROGRESS_S", 0.0)
    cache = tmp_path / "fresh"
    with caplog.at_level(logging.INFO, logger="guimem.memory.stack"):
        StackMemory(dataclasses.replace(kit, cache_dir=cache))
    said = [r.getMessage() for r in caplog.records if "texts embedded" in r.getMessage()]
    assert said, "a first open that embeds says how far it got"
    assert re.search(r"\d+ items read, [1-9]\d* item texts embedded \(\d+\.\d texts/s\)", said[-1]), said[-1]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="guimem.memory.stack"):
        StackMemory(dataclasses.replace(kit, cache_dir=cache))
    assert not [r for r in caplog.records if "texts embedded" in r.getMessage()], "nothing embedded, nothing said"


def test_a_side_array_read_at_random_is_paged_in_and_one_read_at_once_is_not(kit, tmp_path, monkeypatch):
    from guimem.vectors import paging

    warmed: list[str] = []
    monkeypatch.setattr(paging, "warm", lambda path, mapped, keep: warmed.append(path.name))
    for key in ("adjacency", "ids"):
        np.save(tmp_path / f"{key}.npy", np.arange(300_000, dtype=np.int64))
    cache = IndexCache(_cached(kit, tmp_path))
    [adjacency] = cache.mapped_arrays(tmp_path, ["adjacency"])
    ids = IndexCache.array(tmp_path, "ids")
    assert warmed == ["adjacency.npy"]
    assert int(adjacency[-1]) == int(ids[-1]) == 299_999
    IndexCache(dataclasses.replace(_cached(kit, tmp_path), warm_indexes=False)).mapped_arrays(tmp_path, ["adjacency"])
    assert warmed == ["adjacency.npy"], "turned off in the memory's settings"


def test_an_index_opened_from_the_cache_is_warmed_unless_the_settings_say_not(kit, tmp_path, monkeypatch):

    index = ExactIndex(8)
    index.add(["a", "b"], np.eye(2, 8, dtype=np.float32))
    cache = IndexCache(_cached(kit, tmp_path))
    folder = cache.save_index("probe", index)
    assert folder is not None
    asked: list[int] = []
    monkeypatch.setattr(ExactIndex, "warm", lambda self: asked.append(len(self)) or [])
    assert cache.open_index("probe", ExactIndex(8)) is not None and asked == [2]
    off = IndexCache(dataclasses.replace(_cached(kit, tmp_path), warm_indexes=False))
    assert off.open_index("probe", ExactIndex(8)) is not None and asked == [2]


def test_the_setting_reaches_the_memory_from_the_environment(tmp_path, monkeypatch):
    from guimem.embeddings import CachedEmbedder
    from guimem.embeddings.hashing import HashingEmbedder
    from guimem.memory.factory import open_memory
    from guimem.settings import GuimemSettings

    monkeypatch.setenv("GUIMEM_WARM_INDEXES", "false")
    settings = GuimemSettings(cache_dir=tmp_path / "cache")
    memory = open_memory("graph", str(tmp_path / "m.sqlite"), settings, embedder=CachedEmbedder(HashingEmbedder(64)))
    try:
        assert settings.warm_indexes is False and memory.kit.warm_indexes is False
    finally:
        memory.close()
    monkeypatch.delenv("GUIMEM_WARM_INDEXES")
    assert GuimemSettings().warm_indexes is True  # on unless turned off


def test_an_entry_is_paged_in_only_once_every_part_of_it_is_accepted(kit, tmp_path, monkeypatch):
    kit = _cached(kit, tmp_path)
    graph = _learned(kit)
    warmed: list[object] = []
    monkeypatch.setattr(IndexCache, "warm", lambda self, index: warmed.append(index) or [])
    from guimem.vectors import create_index

    nodes, missing = (create_index(kit.vector_index, kit.embedder.dim) for _ in range(2))
    assert graph.edges.open_entry("nodes", [("nodes", nodes), ("no-such-entry", missing)]) is None
    assert warmed == [], "a part was missing: the caller rebuilds, nothing is paged in"
    assert graph.edges.open_entry("nodes", [("nodes", nodes)], counts=False) is not None
    assert warmed == [nodes]


def test_closing_a_memory_stops_the_warm_ups_it_started(kit, tmp_path, monkeypatch):
    import threading

    from guimem.vectors import paging

    kit = _cached(kit, tmp_path)
    _learned(kit)
    monkeypatch.setattr(paging, "SMALLEST", 0)  # this memory's files are small: warmed all the same
    gate = threading.Event()
    real = paging._read_through
    monkeypatch.setattr(paging, "_read_through", lambda *args: gate.wait(10) and real(*args))
    reopened_kit = dataclasses.replace(kit, warmups=[])
    again = GraphMemory(reopened_kit, SETTINGS)
    started = list(reopened_kit.warmups)
    assert started, "opened from the cache: its files are being paged in"
    again.close()
    gate.set()
    assert all(w.wait(30) for w in started)
    assert any(w.outcome is paging.Outcome.CANCELLED for w in started) and reopened_kit.warmups == []



def _graph_or_skills(method: str):
    """(open, the side array whose damage makes it rebuild after accepting its index entry) for ``method``."""
    from guimem.memory.settings import SkillSettings
    from guimem.memory.skills.library import SkillMemory
    from guimem.testing import FormEnv

    if method == "graph":
        return (lambda kit: GraphMemory(kit, SETTINGS)), "adj_edges.npy"
    return (lambda kit: SkillMemory(kit, SkillSettings(match_state=False), env_factory=FormEnv)), "key_ids.npy"


@pytest.mark.parametrize("method", ["graph", "skills"])
def test_a_memory_that_rebuilds_after_accepting_an_entry_stops_paging_in_what_it_dropped(kit, tmp_path, monkeypatch,
                                                                                        method):
    """Graph (skills) accepts its index entry, which starts paging its index in, then finds the adjacency (the
    induction keys) unreadable and rebuilds from the store: the dropped index's warm-up stops, not left to read a
    file nothing searches."""
    import threading

    from guimem.vectors import paging

    kit = _cached(kit, tmp_path)
    open_it, side = _graph_or_skills(method)
    first = open_it(kit)
    first.learn(episode([USER, PASS, LOGIN], seed=1))
    first.commit_round(0, [])
    damaged = list((tmp_path / "cache").rglob(side))
    assert damaged, f"{method} saved no {side}"
    for path in damaged:
        path.write_bytes(b"not a numpy file")
    monkeypatch.setattr(paging, "SMALLEST", 0)  # this memory's files are small: warmed all the same
    gate = threading.Event()
    real = paging._read_through
    monkeypatch.setattr(paging, "_read_through", lambda *args: gate.wait(10) and real(*args))
    started: list[paging.Warming] = []
    real_warm = IndexCache.warm
    monkeypatch.setattr(IndexCache, "warm", lambda self, index: started.extend(real_warm(self, index)) or [])
    again = open_it(dataclasses.replace(kit, warmups=[]))
    try:
        assert started, "the entry was accepted: its index was being paged in"
        assert again.recall(query()).items, "rebuilt from the store, it recalls"
        gate.set()
        assert all(w.wait(30) for w in started)
        assert all(w.outcome is paging.Outcome.CANCELLED for w in started), [w.outcome for w in started]
    finally:
        gate.set()


def test_the_stack_saves_only_the_text_vectors_a_round_added(kit, tmp_path):
    """#34: the stack saved every text vector again after each round (1.5 GB at a million items); the next entry
    now links the rows it loaded and writes the round's new ones, and a reopen reads them all."""
    import os

    from guimem.memory.stack import StackMemory
    from guimem.vectors.table import VectorTable

    kit = _cached(kit, tmp_path)
    stack = StackMemory(kit)
    entries, sizes = [], []
    rounds = ([("form", [USER, PASS, LOGIN]), ("form", [USER, CANCEL]), ("other", [PASS, USER, LOGIN]),
               ("third", [USER, PASS, CANCEL])],  # many texts,
              [("fourth", [PASS, CANCEL])])  # then a few
    for r, plans in enumerate(rounds):
        stack.commit_round(r, [episode(steps, seed=10 * r + i, memory=stack, round_index=r, slot=i, task_id=task)
                               for i, (task, steps) in enumerate(plans)])
        found = IndexCache(kit).load("texts", revision=False)
        assert found is not None
        entries.append(found[0] / "index")
        sizes.append(len(stack._texts))
    assert entries[0] != entries[1] and 0 < sizes[1] - sizes[0] < sizes[0], f"texts after each round: {sizes}"
    assert os.stat(entries[1] / "vectors.npy").st_ino == os.stat(entries[0] / "vectors.npy").st_ino, "rewritten"
    table = VectorTable(kit.embedder.dim)
    table.load(entries[-1])
    assert len(table) == len(stack._texts) and table.segments == 2
    table.close()
    again = StackMemory(kit)
    assert again.recall(query()).items == stack.recall(query()).items
