"""A large transfer pool is searched in relevance order, in bounded time, with the answer a read-through gives
(issue #34: the stack's transfer offers read every item of the app's pool at every recall)."""

from __future__ import annotations

import numpy as np
import pytest

import guimem.memory.stack as stack_module
from guimem.memory import pool
from guimem.memory.pool import LOOK_AT, PoolSearch
from tests.memory.conftest import LOGIN, PASS, USER, episode
from tests.memory.test_scope import _learned_on, _recall


def _vectors(n: int, dim: int = 16, seed: int = 3) -> dict[str, np.ndarray]:
    rows = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return {f"i{k}": rows[k] for k in range(n)}


class Source:
    """The pool's items: their vectors, and how often they were asked for."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table, self.asked = table, 0

    def __call__(self, ids: list[str]) -> tuple[list[str], np.ndarray]:
        self.asked += len(ids)
        found = [i for i in ids if i in self.table]
        return found, np.stack([self.table[i] for i in found]) if found else np.zeros((0, 16), np.float32)


def test_the_most_relevant_item_that_passes_is_the_one_a_read_through_finds():
    table = _vectors(3000)
    entries = [(pos, i) for pos, i in enumerate(table)]
    search, source = PoolSearch("exact", 16), Source(table)
    search.sync(entries, source)
    q = table["i7"] + 0.3 * table["i11"]
    q /= np.linalg.norm(q)
    order = sorted(table, key=lambda i: -float(table[i] @ q))
    for allowed in ({order[0]}, {order[5], order[40]}, {order[200]}):
        asked: list[str] = []

        def passes(item_id: str, allowed=allowed, asked=asked) -> str | None:
            asked.append(item_id)
            return item_id if item_id in allowed else None

        best = min(allowed, key=order.index)
        assert search.first(q, passes) == (best, best)
        assert asked == order[:order.index(best) + 1], "checked from the most relevant, and no further"


def test_checks_stop_after_look_at_and_nothing_is_read_again_while_the_pool_is_the_same():
    table = _vectors(3000)
    entries = [(pos, i) for pos, i in enumerate(table)]
    search, source = PoolSearch("exact", 16), Source(table)
    search.sync(entries, source)
    calls: list[str] = []
    assert search.first(table["i1"], lambda i: calls.append(i)) is None
    assert len(calls) == LOOK_AT == len(set(calls))
    search.sync(entries, source)
    assert source.asked == 3000, "the same pool: no item read again"


def test_an_item_that_left_the_pool_is_never_found_and_new_ones_are():
    table = _vectors(3000)
    entries = [(pos, i) for pos, i in enumerate(table) if i != "i9"]
    search, source = PoolSearch("exact", 16), Source(table)
    search.sync(entries, source)
    assert search.first(table["i9"], lambda i: i)[0] != "i9"
    entries.append((3000, "i9"))  # the pool grew in place (a new item at a boundary)
    search.sync(entries, source)
    assert search.first(table["i9"], lambda i: i)[0] == "i9" and source.asked == 3000
    smaller = [e for e in entries if e[1] != "i9"]  # the pool replaced (an item retired)
    search.sync(smaller, source)
    assert search.first(table["i9"], lambda i: i)[0] != "i9"


@pytest.mark.parametrize("scan_up_to", [0, 1])
def test_the_stacks_offer_from_a_searched_pool_is_the_read_through_one(kit, monkeypatch, scan_up_to):
    """The stack with its pool searched (every pool counts as large) offers what it offers reading the pool."""
    mem = _learned_on(kit, "form-a")
    for task_id in ("form-c", "form-d"):
        mem.learn(episode([USER, PASS, LOGIN], seed=2, task_id=task_id))
    mem.end_round()
    read = [(_recall(mem, "form-b", slot).items, _recall(mem, "form-b", slot).withheld) for slot in (0, 1)]
    monkeypatch.setattr(stack_module, "SCAN_UP_TO", scan_up_to)
    assert scan_up_to < pool.SCAN_UP_TO
    searched = [(_recall(mem, "form-b", slot).items, _recall(mem, "form-b", slot).withheld) for slot in (0, 1)]
    assert searched == read and any(items for items, _ in read), "something is offered, and the same"
    assert mem._searches["form"] is not None


def _cache(kit, tmp_path):
    import dataclasses

    from guimem.memory.indexcache import IndexCache

    return IndexCache(dataclasses.replace(kit, cache_dir=tmp_path / "cache"))


def test_a_saved_pool_index_opens_and_catches_up_with_the_pool_without_reading_it_again(kit, tmp_path):
    """A built pool index is saved in the index cache; another process opens it and reads only what changed
    (issue #34: the pool index at 1M was rebuilt by every process, reading every item)."""
    table = _vectors(3000)
    entries = [(pos, i) for pos, i in enumerate(table) if i != "i9"]
    built, source = PoolSearch("exact", 16), Source(table)
    built.sync(entries, source)
    cache = _cache(kit, tmp_path)
    assert built.unsaved == 2999 and built.due and built.save(cache, "pool-x") and not built.due
    opened, again = PoolSearch("exact", 16), Source(table)
    assert opened.open(cache, "pool-x") and len(opened) == 2999
    opened.sync(entries, again)
    assert again.asked == 0 and opened.unsaved == 0, "nothing read: the saved index is the pool"
    q = table["i5"] + 0.2 * table["i9"]
    assert opened.first(q, lambda i: i) == built.first(q, lambda i: i)
    moved = [e for e in entries if e[1] != "i5"] + [(3000, "i9")]  # since it was saved: one left, one came
    opened.sync(moved, again)
    assert again.asked == 1 and opened.unsaved == 2 and not opened.due, "a small change: not worth rewriting"
    assert opened.first(table["i9"], lambda i: i)[0] == "i9" and opened.first(table["i5"], lambda i: i)[0] != "i5"
    assert not PoolSearch("exact", 16).open(cache, "pool-y"), "no entry: nothing opened"


def test_a_pool_index_is_paged_in_only_once_its_members_check(kit, tmp_path, monkeypatch):
    """An opened pool index is warmed (its files paged in) when its members are all in it, never when the entry
    is turned down and rebuilt: nothing would search what it paged in."""
    from guimem.memory.indexcache import IndexCache

    table = _vectors(3000)
    built = PoolSearch("exact", 16)
    built.sync([(pos, i) for pos, i in enumerate(table)], Source(table))
    cache = _cache(kit, tmp_path)
    assert built.save(cache, "pool-x")
    warmed: list[object] = []
    monkeypatch.setattr(IndexCache, "warm", lambda self, index: warmed.append(index) or [])
    opened = PoolSearch("exact", 16)
    assert opened.open(cache, "pool-x") and warmed == [opened._index]
    folder, _ = cache.load("pool-x", revision=False)
    np.save(folder / "members.npy", np.asarray(["i1", "not indexed"], dtype=str))
    assert not PoolSearch("exact", 16).open(cache, "pool-x"), "a member the index lacks: turned down"
    assert warmed == [opened._index], "nothing paged in for an entry turned down"


def test_an_id_with_no_vector_is_not_a_change():
    """An item that left the store between the pool's list and its read has no vector: asked again at the next
    sync, but counted as nothing that needs saving."""
    table = _vectors(3000)
    entries = [(pos, i) for pos, i in enumerate(table)] + [(3000, "gone")]
    search = PoolSearch("exact", 16)
    search.sync(entries, Source(table))
    assert search.unsaved == 3000
    search.unsaved = 0
    search.sync(list(entries), Source(table))
    assert search.unsaved == 0 and not search.due


def test_a_corrupt_pool_index_is_rebuilt_not_trusted(kit, tmp_path):
    table = _vectors(3000)
    built = PoolSearch("exact", 16)
    built.sync([(pos, i) for pos, i in enumerate(table)], Source(table))
    cache = _cache(kit, tmp_path)
    built.save(cache, "pool-x")
    folder, _ = cache.load("pool-x", revision=False)
    for f in (folder / "index").iterdir():
        f.write_bytes(b"not an index")
    fresh, source = PoolSearch("exact", 16), Source(table)
    assert not fresh.open(cache, "pool-x") and len(fresh) == 0
    fresh.sync([(pos, i) for pos, i in enumerate(table)], source)
    assert source.asked == 3000 and fresh.first(table["i4"], lambda i: i)[0] == "i4", "rebuilt from the pool"


def test_the_stack_saves_its_pool_index_and_the_next_open_reads_no_item_to_index(kit, tmp_path, monkeypatch):
    """With the pool searched, the stack's first recall indexes it without keeping the items it read, saves the
    index, and a memory opened later on the same store offers the same from the saved index, reading nothing to
    index it."""
    import dataclasses

    from guimem.memory.settings import MemorySpec
    from guimem.memory.stack import StackMemory
    from guimem.storage.sqlite import SQLiteStore
    from tests.memory.test_scope import FormEnv

    monkeypatch.setattr(stack_module, "SCAN_UP_TO", 0)
    monkeypatch.setattr(pool, "SAVE_AFTER", 3)
    cached = dataclasses.replace(kit, cache_dir=tmp_path / "cache")
    mem = _learned_on(cached, "form-a")
    for task_id in ("form-c", "form-d"):
        mem.learn(episode([USER, PASS, LOGIN], seed=2, task_id=task_id))
    mem.end_round()
    kept = mem.lifecycle.view.kept_items()
    first = [(_recall(mem, "form-b", slot).items, _recall(mem, "form-b", slot).withheld) for slot in (0, 1)]
    assert any(items for items, _ in first) and mem.lifecycle.view.kept_items() <= kept
    mem.close()
    later = StackMemory(dataclasses.replace(cached, store=SQLiteStore(tmp_path / "m.sqlite")), MemorySpec(),
                        env_factory=FormEnv)
    read: list[str] = []
    original = later._pool_vectors
    monkeypatch.setattr(later, "_pool_vectors", lambda ids: (read.extend(ids), original(ids))[1])
    again = [(_recall(later, "form-b", slot).items, _recall(later, "form-b", slot).withheld) for slot in (0, 1)]
    assert again == first and read == [], "the saved pool index: no item read to index it"
    saved = sorted(p.name for p in (tmp_path / "cache").rglob("pool-*") if p.is_dir())
    later.learn(episode([USER, PASS, LOGIN], seed=3, task_id="form-e"))
    later.end_round()
    [_recall(later, "form-b", slot) for slot in (0, 1)]
    assert 0 < later._searches["form"].unsaved < 3 and read, "the new item was indexed"
    assert sorted(p.name for p in (tmp_path / "cache").rglob("pool-*") if p.is_dir()) == saved, \
        "a change below SAVE_AFTER does not rewrite the saved index"
    later.close()
    for entry in (tmp_path / "cache").rglob("pool-*.entry"):
        entry.unlink()  # the pool index lost: the next memory reads the pool's items to index it, keeping none
    rebuilt = StackMemory(dataclasses.replace(cached, store=SQLiteStore(tmp_path / "m.sqlite")), MemorySpec(),
                          env_factory=FormEnv)
    kept = rebuilt.lifecycle.view.kept_items()
    searched = [(_recall(rebuilt, "form-b", slot).items, _recall(rebuilt, "form-b", slot).withheld) for slot in (0, 1)]
    assert rebuilt._searches["form"].unsaved == 0, "built and saved at once"
    pool_size = len(rebuilt.lifecycle.pool_entries("form"))
    assert rebuilt.lifecycle.view.kept_items() - kept < pool_size, (pool_size, "what indexing read is not kept")
    monkeypatch.setattr(stack_module, "SCAN_UP_TO", 10_000)
    assert [(_recall(rebuilt, "form-b", slot).items, _recall(rebuilt, "form-b", slot).withheld)
            for slot in (0, 1)] == searched, "the rebuilt index offers what reading the pool offers"
    rebuilt.close()


def test_the_stacks_pool_is_indexed_from_batched_reads_not_one_store_read_per_item(kit, tmp_path, monkeypatch):
    """Indexing a pool reads its items a batch at a time (`Batching.get_many`): at a million items one read per
    item was 368k round trips (16 minutes, worse on a database server)."""
    import dataclasses

    from guimem.memory.settings import MemorySpec
    from guimem.memory.stack import StackMemory
    from guimem.storage.sqlite import SQLiteStore
    from tests.memory.test_scope import FormEnv

    monkeypatch.setattr(stack_module, "SCAN_UP_TO", 0)
    cached = dataclasses.replace(kit, cache_dir=tmp_path / "cache")
    mem = _learned_on(cached, "form-a")
    for seed, task_id in enumerate(("form-c", "form-d", "form-e"), start=2):
        mem.learn(episode([USER, PASS, LOGIN], seed=seed, task_id=task_id))
    mem.end_round()
    mem.close()
    store = SQLiteStore(tmp_path / "m.sqlite")
    later = StackMemory(dataclasses.replace(cached, store=store), MemorySpec(), env_factory=FormEnv)
    assert not later.lifecycle.loaded, "opened from the index cache: items are read from the store on demand"
    reads: list[tuple[str, int]] = []  # the store reads made while the pool is indexed
    indexing = [False]
    get, get_many, vectors = store.get, store.get_many, later._pool_vectors
    monkeypatch.setattr(store, "get", lambda i: (indexing[0] and reads.append(("get", 1)), get(i))[1])
    monkeypatch.setattr(store, "get_many", lambda ids: (indexing[0] and reads.append(("get_many", len(ids))),
                                                        get_many(ids))[1])

    def indexed(ids: list[str]) -> tuple[list[str], np.ndarray]:
        indexing[0] = True
        try:
            return vectors(ids)
        finally:
            indexing[0] = False

    monkeypatch.setattr(later, "_pool_vectors", indexed)
    assert _recall(later, "form-b", 0).items, "the pool offered nothing: the case did not happen"
    pooled = later.lifecycle.pool("form")
    assert len(pooled) > 1 and len(later._searches["form"]._index) == len(pooled), "every pool item was indexed"
    assert reads == [("get_many", len(pooled))], "one batched read, no read per item"
    later.close()


def test_the_index_is_searched_once_for_every_item_that_may_be_checked():
    """An exact search costs the same for 32 answers as for 256: asking for fewer first and again for more when none
    passes searched the pool up to three times a recall."""
    table = _vectors(3000)
    search = PoolSearch("exact", 16)
    search.sync([(pos, i) for pos, i in enumerate(table)], Source(table))
    searched: list[int] = []
    inner = search._index.search
    search._index.search = lambda q, k: searched.append(k) or inner(q, k)  # type: ignore[method-assign]
    order = sorted(table, key=lambda i: -float(table[i] @ table["i1"]))
    assert search.first(table["i1"], lambda i: i if i == order[100] else None) == (order[100], order[100])
    assert searched == [LOOK_AT]
