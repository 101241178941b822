from __future__ import annotations

import numpy as np
import pytest

from guimem.embeddings import CachedEmbedder, EmbedRole, create_embedder
from guimem.embeddings.e5 import E5Embedder
from guimem.embeddings.hashing import HashingEmbedder
from guimem.embeddings.openai import OpenAIEmbedder
from guimem.settings import EmbedderSettings
from guimem.testing import ScriptedOpenAIServer


@pytest.fixture(scope="module")
def e5():
    return E5Embedder()


def test_e5_vectors_are_384_d_and_normalised(e5):
    v = e5.embed(["open the search bar", "打开搜索栏"])
    assert v.shape == (2, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)


def test_e5_is_multilingual(e5):
    q = e5.embed(["open the search bar and submit a query"])[0]
    zh, cart = e5.embed(["打开搜索栏并提交查询", "add the item to the shopping cart"])
    assert float(q @ zh) > float(q @ cart)


def test_e5_query_and_passage_prefixes_differ(e5):
    q = e5.embed(["login form"], EmbedRole.QUERY)[0]
    p = e5.embed(["login form"], EmbedRole.PASSAGE)[0]
    assert not np.allclose(q, p) and float(q @ p) > 0.8


def test_hashing_is_deterministic_and_similar_texts_are_closer():
    h = HashingEmbedder(256)
    a, b, c = h.embed(["click the login button", "click the login button now", "zebra stripes"])
    assert np.allclose(h.embed(["click the login button"])[0], a)
    assert float(a @ b) > float(a @ c)


class CountingEmbedder(HashingEmbedder):
    def __init__(self):
        super().__init__(32)
        self.seen: list[str] = []

    def embed(self, texts, role=EmbedRole.QUERY):
        self.seen.extend(texts)
        return super().embed(texts, role)


def test_cache_embeds_each_text_once_per_role():
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, size=100)
    first = cached.embed(["a", "b", "a"])
    again = cached.embed(["b", "a"])
    cached.embed(["a"], EmbedRole.PASSAGE)
    assert inner.seen == ["a", "b", "a"]
    assert np.allclose(first[0], again[1]) and cached.hits == 3


def test_cache_evicts_beyond_its_size():
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, size=2)
    cached.embed(["a", "b", "c"])
    cached.embed(["a"])
    assert inner.seen.count("a") == 2


def test_openai_embedder_against_a_real_local_server():
    with ScriptedOpenAIServer() as server:
        emb = OpenAIEmbedder(base_url=server.base_url, model="m", query_prefix="query: ")
        v = emb.embed(["hello", "world"])
        assert v.shape == (2, 64) and emb.dim == 64
        assert server.requests[0]["body"]["input"] == ["query: hello", "query: world"]


def test_factory_builds_a_cached_hashing_embedder():
    emb = create_embedder(EmbedderSettings(name="hashing", dim=16))
    assert emb.dim == 16 and emb.name == "hashing:16"


def test_a_process_embedding_with_e5_keeps_numpys_blas_on_one_thread():
    """OpenBLAS threads spinning after a vector search slowed the next e5 embedding 2x on 2 cores
    (benchmarks/recall_end_to_end.py); loading e5 limits BLAS to one thread."""
    from threadpoolctl import threadpool_info

    from guimem.embeddings.e5 import E5Embedder

    E5Embedder().embed(["load the model"])
    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
    assert blas and all(p["num_threads"] == 1 for p in blas)
