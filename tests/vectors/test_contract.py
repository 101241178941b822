"""One contract suite, run against every vector index backend."""

from __future__ import annotations

import numpy as np
import pytest

from guimem.vectors import create_index
from guimem.vectors.exact import ExactIndex

BACKENDS = ["exact", "hnsw", "auto"]


def unit(rng, n, d):
    v = rng.standard_normal((n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(params=BACKENDS)
def index(request):
    return create_index(request.param, dim=16)


def test_search_finds_the_vector_itself_first(index):
    rng = np.random.default_rng(0)
    vecs = unit(rng, 50, 16)
    index.add([f"v{i}" for i in range(50)], vecs)
    hits = index.search(vecs[7], 3)
    assert hits[0].id == "v7" and hits[0].score == pytest.approx(1.0, abs=1e-3)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_small_data_results_equal_exact_search(index):
    rng = np.random.default_rng(1)
    vecs = unit(rng, 200, 16)
    ids = [f"v{i}" for i in range(200)]
    exact = ExactIndex(16)
    exact.add(ids, vecs)
    index.add(ids, vecs)
    for q in unit(rng, 10, 16):
        assert [h.id for h in index.search(q, 5)] == [h.id for h in exact.search(q, 5)]


def test_remove_and_replace(index):
    rng = np.random.default_rng(2)
    vecs = unit(rng, 10, 16)
    index.add([f"v{i}" for i in range(10)], vecs)
    index.remove(["v3", "nope"])
    assert len(index) == 9 and "v3" not in index
    assert all(h.id != "v3" for h in index.search(vecs[3], 9))
    index.add(["v4"], vecs[0:1])
    assert len(index) == 9
    assert index.search(vecs[0], 2)[0].id in {"v0", "v4"}


def test_save_and_load_round_trip(index, tmp_path):
    rng = np.random.default_rng(3)
    vecs = unit(rng, 30, 16)
    index.add([f"v{i}" for i in range(30)], vecs)
    index.save(tmp_path / "idx")
    other = type(index)(16)
    other.load(tmp_path / "idx")
    assert len(other) == 30 and other.search(vecs[5], 1)[0].id == "v5"


def test_empty_index_returns_nothing(index):
    assert index.search(np.ones(16, dtype=np.float32) / 4, 5) == []


@pytest.mark.slow
def test_hnsw_recall_at_10_on_100k_random_vectors():
    rng = np.random.default_rng(4)
    n, d = 100_000, 64
    vecs = unit(rng, n, d)
    ids = [str(i) for i in range(n)]
    exact, hnsw = ExactIndex(d), create_index("hnsw", dim=d)
    exact.add(ids, vecs)
    hnsw.add(ids, vecs)
    queries = unit(rng, 100, d)
    found = sum(len({h.id for h in hnsw.search(q, 10)} & {h.id for h in exact.search(q, 10)}) for q in queries)
    assert found / 1000 >= 0.95
