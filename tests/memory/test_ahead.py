"""`SearchAhead`: a search run ahead of recall gives what recall would compute, never an answer from before the
index changed, and never runs while the index changes."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from guimem.memory.ahead import SearchAhead
from guimem.vectors import Hit, create_index

DIM = 8


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_an_answer_found_ahead_is_what_a_search_now_gives_and_a_change_forgets_it():
    rng = np.random.default_rng(3)
    index = create_index("exact", DIM)
    index.add([f"v{i}" for i in range(50)], _unit(rng, 50))
    ahead = SearchAhead(lambda: index)
    q = _unit(rng, 1)[0]
    ahead.ahead(lambda: q, 5)
    ahead.settle()  # waits for it
    assert ahead.search(q.copy(), 5) == index.search(q, 5) and ahead.taken == 1
    assert ahead.search(q, 6) == index.search(q, 6) and ahead.taken == 1  # another k: searched again
    ahead.ahead(lambda: q, 5)
    ahead.settle()
    with ahead.changing():  # the nearest item arrives after the search ahead
        index.add(["new"], q[None, :])
    got = ahead.search(q, 5)
    assert got[0].id == "new" and got == index.search(q, 5) and ahead.taken == 1
    other = _unit(rng, 1)[0]
    assert ahead.search(other, 5) == index.search(other, 5) and ahead.taken == 1  # another query: searched
    ahead.close()


class _Slow:
    """An index whose search takes a while and says whether a change overlapped it."""

    def __init__(self) -> None:
        self.searching = threading.Event()
        self.overlapped = False
        self.busy = False

    def search(self, query, k):
        self.busy = True
        self.searching.set()
        time.sleep(0.2)
        self.busy = False
        return [Hit("a", 1.0)]

    def change(self) -> None:
        self.overlapped |= self.busy


def test_a_change_waits_for_a_search_in_flight():
    slow = _Slow()
    ahead = SearchAhead(lambda: slow)  # type: ignore[arg-type, return-value]
    ahead.ahead(lambda: np.ones(DIM, np.float32), 3)
    assert slow.searching.wait(5)
    with ahead.changing():
        slow.change()
    assert not slow.overlapped
    ahead.close()


def test_a_query_that_fails_ahead_is_logged_and_recall_searches_itself(caplog):
    index = create_index("exact", DIM)
    index.add(["a"], np.ones((1, DIM), np.float32) / np.sqrt(DIM))
    ahead = SearchAhead(lambda: index)

    def broken() -> np.ndarray:
        raise RuntimeError("the embedder went away")

    with caplog.at_level(logging.WARNING, logger="guimem.memory.ahead"):
        ahead.ahead(broken, 1)
        ahead.close()
    assert "searching ahead failed" in caplog.text
    q = np.ones(DIM, np.float32) / np.sqrt(DIM)
    assert ahead.search(q, 1) == index.search(q, 1) and ahead.taken == 0


def test_nothing_is_searched_ahead_once_closed():
    index = create_index("exact", DIM)
    index.add(["a"], np.ones((1, DIM), np.float32) / np.sqrt(DIM))
    ahead = SearchAhead(lambda: index)
    q = np.ones(DIM, np.float32) / np.sqrt(DIM)
    ahead.ahead(lambda: q, 1)
    ahead.close()
    ahead.ahead(lambda: q, 1)  # a preview after close (the episode loop's last callback)
    assert not any(t.name.startswith("guimem-search-ahead") for t in threading.enumerate())
    ahead.close()


def test_only_an_embedder_that_embeds_ahead_is_asked_ahead(tmp_path):
    """Searching ahead embeds the previewed screen; an embedder that cannot take that work over for recall (one
    called once per text, such as a paid API) would be asked twice, so memory does not search ahead with it."""
    from guimem.embeddings import CachedEmbedder
    from guimem.embeddings.hashing import HashingEmbedder
    from guimem.memory.kit import MemoryKit
    from guimem.storage.sqlite import SQLiteStore
    from guimem.tokens import WhitespaceCounter

    store = SQLiteStore(tmp_path / "m.sqlite")
    try:
        plain = MemoryKit(store=store, embedder=HashingEmbedder(16), counter=WhitespaceCounter(), namespace="m")
        cached = MemoryKit(store=store, embedder=CachedEmbedder(HashingEmbedder(16)), counter=WhitespaceCounter(),
                           namespace="m")
        assert not plain.embeds_ahead and cached.embeds_ahead
    finally:
        store.close()
