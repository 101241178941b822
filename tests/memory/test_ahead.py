"""`SearchAhead`: a search or a whole recall run ahead of recall gives what recall would compute, never an answer
from before the memory changed, and never runs while it changes or beside a recall."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from guimem.memory.ahead import SearchAhead, take_ahead_use
from guimem.types import AheadUse, Bounds, Observation, Task, UIElement
from guimem.types.ui import same_screen
from guimem.vectors import Hit, create_index

DIM = 8


def _search_ahead(ahead: SearchAhead, query, k: int) -> None:
    """A recall ahead whose work is one search, as skills' starts with (on a screen no recall here asks about)."""
    ahead.recall_ahead(Task(id="ahead", goal="", app="form"), _screen("ahead"), lambda: ahead.search(query(), k))


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_an_answer_found_ahead_is_what_a_search_now_gives_and_a_change_forgets_it():
    rng = np.random.default_rng(3)
    index = create_index("exact", DIM)
    index.add([f"v{i}" for i in range(50)], _unit(rng, 50))
    ahead = SearchAhead(lambda: index)
    q = _unit(rng, 1)[0]
    _search_ahead(ahead, lambda: q, 5)
    ahead.settle()  # waits for it
    assert ahead.search(q.copy(), 5) == index.search(q, 5) and ahead.taken == 1
    assert ahead.search(q, 6) == index.search(q, 6) and ahead.taken == 1  # another k: searched again
    _search_ahead(ahead, lambda: q, 5)
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
    _search_ahead(ahead, lambda: np.ones(DIM, np.float32), 3)
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
        _search_ahead(ahead, broken, 1)
        ahead.close()
    assert "recalling ahead failed" in caplog.text
    q = np.ones(DIM, np.float32) / np.sqrt(DIM)
    assert ahead.search(q, 1) == index.search(q, 1) and ahead.taken == 0


def test_nothing_is_searched_ahead_once_closed():
    index = create_index("exact", DIM)
    index.add(["a"], np.ones((1, DIM), np.float32) / np.sqrt(DIM))
    ahead = SearchAhead(lambda: index)
    q = np.ones(DIM, np.float32) / np.sqrt(DIM)
    _search_ahead(ahead, lambda: q, 1)
    ahead.close()
    _search_ahead(ahead, lambda: q, 1)  # a preview after close (the episode loop's last callback)
    assert not any(t.name.startswith("guimem-ahead") for t in threading.enumerate())
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


def _screen(*texts: str, app: str = "form", at: float = 0.0) -> Observation:
    return Observation(app=app, timestamp=at, elements=tuple(
        UIElement(ref=f"e{i}", role="button", text=t, bounds=Bounds(x=0, y=20 * i, w=10, h=10))
        for i, t in enumerate(texts)))


def test_a_recall_done_ahead_is_taken_on_the_same_screen_only_and_never_after_a_change():
    ahead = SearchAhead(lambda: create_index("exact", DIM))
    task = Task(id="t", goal="press ok", app="form")
    calls: list[Observation] = []

    def recall_on(obs: Observation):
        return lambda: calls.append(obs) or f"recalled on {[e.text for e in obs.elements]}"

    preview = _screen("ok", "cancel", at=1.0)
    ahead.recall_ahead(task, preview, recall_on(preview))
    ahead.settle()
    settled = _screen("ok", "cancel", at=2.0).model_copy(update={"screenshot": "obs-1.png"})  # taken later, a shot
    assert ahead.recalled(task, settled, recall_on(settled)) == "recalled on ['ok', 'cancel']"
    assert calls == [preview] and ahead.recalls_taken == 1
    moved = _screen("ok", "cancel", "new")
    assert ahead.recalled(task, moved, recall_on(moved)) == "recalled on ['ok', 'cancel', 'new']"
    other = Task(id="t", goal="press cancel", app="form")
    assert ahead.recalled(other, settled, recall_on(settled)) == "recalled on ['ok', 'cancel']"
    assert calls == [preview, moved, settled] and ahead.recalls_taken == 1  # another task: recalled again
    ahead.recall_ahead(task, preview, recall_on(preview))
    ahead.settle()
    with ahead.changing():  # a skill learned after the recall ahead
        pass
    ahead.recalled(task, settled, recall_on(settled))
    assert calls[-1] is settled and ahead.recalls_taken == 1
    ahead.close()


def test_a_recall_never_runs_beside_a_recall_ahead_and_a_change_waits_for_it():
    ahead = SearchAhead(lambda: create_index("exact", DIM))
    task = Task(id="t", goal="g", app="form")
    started, busy, overlapped = threading.Event(), [False], [False]

    def slow(value: str):
        def run() -> str:
            overlapped[0] |= busy[0]
            busy[0] = True
            started.set()
            time.sleep(0.2)
            busy[0] = False
            return value
        return run

    ahead.recall_ahead(task, _screen("a"), slow("ahead"))
    assert started.wait(5)
    assert ahead.recalled(task, _screen("b"), slow("now")) == "now"  # waited for the one ahead to end
    ahead.recall_ahead(task, _screen("a"), slow("ahead"))
    started.clear()
    assert started.wait(5)
    with ahead.changing():
        overlapped[0] |= busy[0]
    assert not overlapped[0]
    ahead.close()


def test_a_recall_that_fails_ahead_is_logged_and_recall_runs_itself(caplog):
    ahead = SearchAhead(lambda: create_index("exact", DIM))
    task = Task(id="t", goal="g", app="form")

    def broken() -> str:
        raise RuntimeError("the store went away")

    with caplog.at_level(logging.WARNING, logger="guimem.memory.ahead"):
        ahead.recall_ahead(task, _screen("a"), broken)
        ahead.settle()
    assert "recalling ahead failed" in caplog.text
    assert ahead.recalled(task, _screen("a"), lambda: "now") == "now" and ahead.recalls_taken == 0
    ahead.close()
    ahead.recall_ahead(task, _screen("a"), lambda: "after close")
    assert ahead.recalled(task, _screen("a"), lambda: "now") == "now"


def test_same_screen_ignores_when_and_the_screenshot_only():
    a = _screen("ok", at=1.0)
    assert same_screen(a, a.model_copy(update={"timestamp": 9.0, "screenshot": "x.png"}))
    assert not same_screen(a, _screen("OK", at=1.0))
    assert not same_screen(a, _screen("ok", app="other", at=1.0))
    assert not same_screen(a, a.model_copy(update={"location": "page2"}))


def test_a_recall_ahead_not_started_is_dropped_for_another_screen_and_waited_for_on_its_own():
    slow = _Slow()
    ahead = SearchAhead(lambda: slow)  # type: ignore[arg-type, return-value]
    task = Task(id="t", goal="g", app="form")
    ran: list[str] = []
    _search_ahead(ahead, lambda: np.ones(DIM, np.float32), 3)  # keeps the background thread busy for 0.2 s
    assert slow.searching.wait(5)
    ahead.recall_ahead(task, _screen("a"), lambda: ran.append("a") or "ahead")
    assert ahead.recalled(task, _screen("b"), lambda: ran.append("b") or "now") == "now"
    ahead.settle()
    assert ran == ["b"]  # the preview's recall was dropped before it started
    slow.searching.clear()
    _search_ahead(ahead, lambda: np.full(DIM, 2.0, np.float32), 3)  # another query (the last one's answer is kept)
    assert slow.searching.wait(5)
    ahead.recall_ahead(task, _screen("a"), lambda: ran.append("a") or "ahead")
    assert ahead.recalled(task, _screen("a"), lambda: ran.append("a again") or "now") == "ahead"
    assert ran == ["b", "a"] and ahead.recalls_taken == 1
    ahead.close()


def test_each_recall_says_how_it_used_the_recall_done_ahead():
    """What a trace records per step (`Step.recall_ahead`): taken, waited for, or computed and why."""
    ahead = SearchAhead(lambda: create_index("exact", DIM))
    task = Task(id="t", goal="g", app="form")
    preview = _screen("ok", at=1.0)
    settled = _screen("ok", at=2.0)
    take_ahead_use()  # what an earlier test's recalls left on this thread
    assert take_ahead_use() == (None, 0.0)
    assert ahead.recalled(task, settled, lambda: "now") == "now"
    assert take_ahead_use() == (AheadUse.NONE, 0.0)
    assert take_ahead_use() == (None, 0.0)  # taken: forgotten
    ahead.recall_ahead(task, preview, lambda: "ahead")
    ahead.settle()
    assert ahead.recalled(task, settled, lambda: "now") == "ahead"
    assert take_ahead_use() == (AheadUse.TAKEN, 0.0)
    assert ahead.recalled(task, _screen("cancel"), lambda: "now") == "now"
    assert take_ahead_use()[0] is AheadUse.NONE  # no preview since: nothing asked ahead, whatever is kept
    ahead.recall_ahead(task, preview, lambda: "ahead")
    assert ahead.recalled(task, _screen("cancel"), lambda: "now") == "now"  # the settled screen was not the preview
    assert take_ahead_use()[0] is AheadUse.OTHER_SCREEN
    ahead.recall_ahead(task, preview, lambda: "ahead")
    assert ahead.recalled(Task(id="t", goal="other", app="form"), settled, lambda: "now") == "now"
    assert take_ahead_use()[0] is AheadUse.OTHER_SCREEN  # asked ahead for another task
    ahead.recall_ahead(task, preview, lambda: "ahead")
    ahead.settle()
    with ahead.changing():
        pass
    assert ahead.recalled(task, settled, lambda: "now") == "now"
    assert take_ahead_use()[0] is AheadUse.CHANGED
    assert ahead.recalled(task, settled, lambda: "now") == "now"
    assert take_ahead_use()[0] is AheadUse.NONE  # nothing asked since: not the change again

    def broken() -> str:
        raise RuntimeError("the store went away")

    ahead.recall_ahead(task, preview, broken)
    ahead.settle()
    assert ahead.recalled(task, settled, lambda: "now") == "now"
    assert take_ahead_use()[0] is AheadUse.NONE  # asked, but it failed
    started = threading.Event()

    def slow() -> str:
        started.set()
        time.sleep(0.2)
        return "slow ahead"

    ahead.recall_ahead(task, preview, slow)
    assert started.wait(5)
    assert ahead.recalled(task, settled, lambda: "now") == "slow ahead"
    use, waited = take_ahead_use()
    assert use is AheadUse.WAITED and 50 < waited < 5000
    started.clear()
    ahead.recall_ahead(task, preview, slow)
    assert started.wait(5)
    with ahead.changing():  # waits for the recall ahead under way, then forgets its answer
        pass
    ahead.recall_ahead(task, preview, lambda: "ahead")
    ahead.close()  # the one just asked is dropped
    assert ahead.recalled(task, settled, lambda: "now") == "now"
    assert take_ahead_use()[0] is AheadUse.NONE, "closed: nothing was done ahead"
