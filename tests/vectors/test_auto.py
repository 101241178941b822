"""The automatic exact/HNSW switch: exact below the switch size, HNSW from it on, saved and loaded as such."""

from __future__ import annotations

import numpy as np

from guimem.vectors.auto import AutoIndex, hnsw_params
from guimem.vectors.exact import ExactIndex


def _vectors(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_exact_below_the_switch_and_hnsw_from_it(tmp_path):
    vecs = _vectors(600)
    index = AutoIndex(32, switch_at=400)
    index.add([f"v{i}" for i in range(300)], vecs[:300])
    assert index.backend == "exact"
    exact = ExactIndex(32)
    exact.add([f"v{i}" for i in range(300)], vecs[:300])
    assert index.search(vecs[5], 5) == exact.search(vecs[5], 5), "below the switch it is the exact index"
    index.add([f"v{i}" for i in range(300, 600)], vecs[300:])
    assert index.backend == "hnsw" and len(index) == 600
    found = sum(index.search(vecs[i], 1)[0].id == f"v{i}" for i in range(0, 600, 7))
    assert found >= 0.95 * len(range(0, 600, 7))
    index.save(tmp_path / "ix")
    loaded = AutoIndex(32, switch_at=400)
    loaded.load(tmp_path / "ix")
    assert loaded.backend == "hnsw" and [h.id for h in loaded.search(vecs[9], 3)] == \
        [h.id for h in index.search(vecs[9], 3)]
    loaded.add(["extra"], vecs[:1])
    assert "extra" in loaded and len(loaded) == 601


def test_a_small_index_saves_and_loads_as_exact(tmp_path):
    vecs = _vectors(20)
    index = AutoIndex(32)
    index.add([f"v{i}" for i in range(20)], vecs)
    index.save(tmp_path / "ix")
    loaded = AutoIndex(32)
    loaded.load(tmp_path / "ix")
    assert loaded.backend == "exact" and loaded.search(vecs[3], 2) == index.search(vecs[3], 2)


def test_parameters_grow_with_size() -> None:
    assert hnsw_params(60_000)[0] <= hnsw_params(1_000_000)[0]


def test_a_growing_graph_searches_with_the_expansion_its_size_was_measured_to_need(tmp_path, monkeypatch):
    """The graph's degree is fixed at the switch (16); its search expansion follows its size: the ef measured at the
    smallest measured size at or above it (a 1M index that grew from the switch searched with 50k's ef)."""
    from guimem.vectors import auto

    for m, steps in auto.SEARCH_EXPANSION.items():
        efs = [ef for _, ef in steps]
        assert efs == sorted(efs) and all(ef >= 16 for ef in efs), f"M {m}: ef grows with size"
        assert auto.search_expansion(10**9, m) == efs[-1]
    monkeypatch.setattr(auto, "SEARCH_EXPANSION", {16: ((450, 24), (10_000, 80))})
    vecs = _vectors(500)
    index = AutoIndex(32, switch_at=400)
    index.add([f"v{i}" for i in range(420)], vecs[:420])
    assert index.search(vecs[1], 1)[0].id == "v1" and index._hnsw.expansion_search == 24
    index.add([f"v{i}" for i in range(420, 500)], vecs[420:])
    assert index.search(vecs[460], 1)[0].id == "v460" and index._hnsw.expansion_search == 80
    index.save(tmp_path / "ix")
    monkeypatch.setattr(auto, "SEARCH_EXPANSION", {16: ((10_000, 48),)})
    loaded = AutoIndex(32)
    loaded.load(tmp_path / "ix")  # viewed from its file: the expansion still changes
    assert loaded.search(vecs[7], 1)[0].id == "v7" and loaded._hnsw.expansion_search == 48
