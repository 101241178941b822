"""`CachedEmbedder.prefetch`: embedding ahead moves work earlier and never changes a vector."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from guimem.embeddings import CachedEmbedder, EmbedRole
from guimem.embeddings.hashing import HashingEmbedder


class EngineDownError(RuntimeError):
    pass


class Counting:
    """A hashing embedder that counts the texts it embeds, optionally slow or failing."""

    name = "counting"

    def __init__(self, delay_s: float = 0.0, fail: int = 0) -> None:
        self.inner = HashingEmbedder(64)
        self.delay_s, self.fail = delay_s, fail
        self.texts: list[str] = []
        self.busy = 0
        self.overlapped = False
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return 64

    def embed(self, texts: Sequence[str], role: EmbedRole = EmbedRole.QUERY) -> np.ndarray:
        with self._lock:
            self.busy += 1
            self.overlapped |= self.busy > 1
        try:
            time.sleep(self.delay_s)
            if self.fail:
                self.fail -= 1
                raise EngineDownError("the engine failed")
            self.texts.extend(texts)
            return self.inner.embed(texts, role)
        finally:
            with self._lock:
                self.busy -= 1


def reference(texts: list[str], role: EmbedRole = EmbedRole.QUERY) -> np.ndarray:
    return HashingEmbedder(64).embed(texts, role)


class Gated(Counting):
    """Blocks inside `embed` until its gate opens."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def embed(self, texts: Sequence[str], role: EmbedRole = EmbedRole.QUERY) -> np.ndarray:
        self.entered.set()
        assert self.gate.wait(30), "the test never opened the gate"
        return super().embed(texts, role)


def test_a_prefetched_text_is_embedded_once_and_gives_the_same_vector():
    inner = Counting()
    cache = CachedEmbedder(inner)
    cache.prefetch(["screen: inbox\nbutton Reply"])
    got = cache.embed(["screen: inbox\nbutton Reply"])
    assert np.array_equal(got, reference(["screen: inbox\nbutton Reply"]))
    assert inner.texts == ["screen: inbox\nbutton Reply"]
    assert (cache.prefetched, cache.misses) == (1, 0)
    cache.close()


def test_prefetch_returns_while_the_engine_works_and_embed_waits_for_that_work():
    inner = Gated()
    cache = CachedEmbedder(inner)
    caller = threading.Thread(target=cache.prefetch, args=(["a slow screen"],))
    caller.start()
    caller.join(10)
    assert not caller.is_alive(), "prefetch waited for the embedding"
    assert inner.entered.wait(10)  # the background thread is inside the engine
    got: list[np.ndarray] = []
    asker = threading.Thread(target=lambda: got.append(cache.embed(["a slow screen"])))
    asker.start()
    asker.join(0.2)
    assert asker.is_alive() and not got  # it waits for the prefetch under way, and computes nothing itself
    inner.gate.set()
    asker.join(10)
    assert np.array_equal(got[0], reference(["a slow screen"]))
    assert inner.texts == ["a slow screen"] and cache.prefetched == 1
    cache.close()


def test_bulk_work_goes_to_the_engine_a_chunk_at_a_time():
    from guimem.embeddings.base import CHUNK

    inner = Counting()
    calls: list[int] = []
    embed = inner.embed
    inner.embed = lambda texts, role=EmbedRole.QUERY: calls.append(len(texts)) or embed(texts, role)  # type: ignore[method-assign]
    cache = CachedEmbedder(inner)
    texts = [f"item {i}" for i in range(2 * CHUNK + 5)]
    assert np.array_equal(cache.embed(texts, EmbedRole.PASSAGE), reference(texts, EmbedRole.PASSAGE))
    assert calls == [CHUNK, CHUNK, 5]


def test_a_screen_other_than_the_prefetched_one_is_embedded_as_without_prefetch():
    inner = Counting()
    cache = CachedEmbedder(inner)
    cache.prefetch(["the screen expected"])
    got = cache.embed(["the screen settled", "the screen expected"], EmbedRole.QUERY)
    assert np.array_equal(got, reference(["the screen settled", "the screen expected"]))
    assert sorted(inner.texts) == ["the screen expected", "the screen settled"]
    assert (cache.prefetched, cache.misses) == (1, 1)
    cache.close()


def test_roles_are_kept_apart():
    cache = CachedEmbedder(Counting())
    cache.prefetch(["login form"], EmbedRole.PASSAGE)
    assert np.array_equal(cache.embed(["login form"], EmbedRole.QUERY), reference(["login form"], EmbedRole.QUERY))
    assert cache.prefetched == 0
    assert np.array_equal(cache.embed(["login form"], EmbedRole.PASSAGE),
                          reference(["login form"], EmbedRole.PASSAGE))
    cache.close()


def test_a_failed_prefetch_is_embedded_again_and_a_real_failure_is_loud():
    inner = Counting(fail=1)
    cache = CachedEmbedder(inner)
    cache.prefetch(["flaky"])
    assert np.array_equal(cache.embed(["flaky"]), reference(["flaky"]))
    assert cache.misses == 1
    broken = CachedEmbedder(Counting(fail=2))
    broken.prefetch(["down"])
    with pytest.raises(EngineDownError):
        broken.embed(["down"])
    cache.close()
    broken.close()


def test_calls_into_the_engine_never_overlap_and_threads_agree():
    inner = Counting(delay_s=0.002)
    cache = CachedEmbedder(inner, size=16)
    texts = [f"screen {i % 24}" for i in range(120)]
    out: dict[int, np.ndarray] = {}

    def worker(offset: int) -> None:
        for i in range(offset, len(texts), 3):
            if i % 2:
                cache.prefetch([texts[i], texts[(i + 5) % len(texts)]])
            out[i] = cache.embed([texts[i]])[0]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not inner.overlapped
    for i, text in enumerate(texts):
        assert np.array_equal(out[i], reference([text])[0])
    cache.close()
