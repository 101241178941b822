"""`VectorTable`: key → vector with the saved part memory-mapped and the added part spilled to disk."""

from __future__ import annotations

import numpy as np
import pytest

from guimem.errors import StoreError
from guimem.vectors.exact import ExactIndex
from guimem.vectors.table import VectorTable


def _vecs(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def test_vectors_come_back_from_memory_the_spill_file_and_a_saved_file(tmp_path):
    vecs = _vecs(23)
    table = VectorTable(8, spill_dir=tmp_path / "spill", block=5)  # 4 blocks spilled, 3 rows in memory
    table.add([f"k{i}" for i in range(23)], vecs)
    assert len(table) == 23 and "k22" in table and "nope" not in table and table.get("nope") is None
    for i in range(23):
        np.testing.assert_array_equal(table.get(f"k{i}"), vecs[i])
    assert list((tmp_path / "spill").iterdir()) == [], "the spill file has no name"

    table.save(tmp_path / "t")
    again = VectorTable(8, block=5)
    again.load(tmp_path / "t")
    more = _vecs(9, seed=1)
    again.add([f"m{i}" for i in range(9)] + [], more)
    again.add(["k3"], more[:1])  # a key already held keeps its vector
    np.testing.assert_array_equal(again.get("k3"), vecs[3])
    again.save(tmp_path / "u")  # saved rows copied from their file, then the spilled and the held ones
    exact = ExactIndex(8)
    exact.load(tmp_path / "u")
    assert len(exact) == 32
    for i in range(23):
        np.testing.assert_array_equal(exact.get(f"k{i}"), vecs[i])
    for i in range(9):
        np.testing.assert_array_equal(exact.get(f"m{i}"), more[i])
    again.close()
    table.close()


def test_a_vector_handed_out_never_changes_afterwards(tmp_path):
    table = VectorTable(8, block=2)
    vecs = _vecs(7)
    table.add(["a"], vecs[:1])
    held = table.get("a")
    kept = held.copy()
    table.add([f"b{i}" for i in range(6)], vecs[1:])  # the block holding "a" is spilled and another filled
    np.testing.assert_array_equal(held, kept)
    np.testing.assert_array_equal(table.get("a"), kept)


def test_an_exact_index_file_opens_as_a_table_and_a_saved_entry_may_be_replaced_under_it(tmp_path):
    index = ExactIndex(8)
    vecs = _vecs(10)
    index.add([f"k{i}" for i in range(10)], vecs)
    index.save(tmp_path / "e")
    table = VectorTable(8)
    table.load(tmp_path / "e")
    np.testing.assert_array_equal(table.get("k9"), vecs[9])
    (tmp_path / "e" / "vectors.npy").unlink()  # another process replaced the cache entry
    table.add(["new"], vecs[:1])
    table.save(tmp_path / "f")
    reread = VectorTable(8)
    reread.load(tmp_path / "f")
    assert len(reread) == 11
    np.testing.assert_array_equal(reread.get("k4"), vecs[4])


def test_a_file_that_does_not_match_is_refused(tmp_path):
    index = ExactIndex(4)
    index.add(["a"], _vecs(1, dim=4))
    index.save(tmp_path / "e")
    with pytest.raises(StoreError):
        VectorTable(8).load(tmp_path / "e")
    with pytest.raises(StoreError):
        VectorTable(8).load(tmp_path / "missing")


def test_a_file_of_another_type_is_refused_and_a_closed_table_starts_empty(tmp_path):
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "d" / "vectors.npy", _vecs(2).astype(np.float64))
    np.save(tmp_path / "d" / "ids.npy", np.asarray(["a", "b"]))
    with pytest.raises(StoreError):
        VectorTable(8).load(tmp_path / "d")
    table = VectorTable(8, block=2)
    table.add(["a", "b", "c"], _vecs(3))
    table.close()
    assert len(table) == 0 and table.get("a") is None
    table.add(["a", "b", "c"], _vecs(3, seed=2))  # usable again: a spill file of its own
    np.testing.assert_array_equal(table.get("a"), _vecs(3, seed=2)[0])
