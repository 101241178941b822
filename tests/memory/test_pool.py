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
        return found, np.stack([self.table[i] for i in found])


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
