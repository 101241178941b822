"""`VectorTable`: key → vector with the saved part memory-mapped and the added part spilled to disk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from guimem.errors import StoreError
from guimem.vectors.exact import ExactIndex
from guimem.vectors.table import VectorTable


def _vecs(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def _two_entries(tmp_path):
    """A table loaded from entry ``a``, then saved with one more row as entry ``b`` (which links ``a``'s rows) and
    loaded from ``b``; the caller's ``c`` is the next save."""
    table = VectorTable(8)
    table.add([f"k{i}" for i in range(100)], _vecs(100))
    table.save(tmp_path / "a")
    table.load(tmp_path / "a")
    table.add(["x"], _vecs(1, seed=1))
    return table


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
    again.save(tmp_path / "u")  # the saved rows linked, the spilled and the held ones a segment of their own
    reread = VectorTable(8)
    reread.load(tmp_path / "u")
    assert len(reread) == 32 and reread.segments == 2
    for i in range(23):
        np.testing.assert_array_equal(reread.get(f"k{i}"), vecs[i])
    for i in range(9):
        np.testing.assert_array_equal(reread.get(f"m{i}"), more[i])
    exact = ExactIndex(8)  # a table of one segment is what an exact index saves
    exact.load(tmp_path / "t")
    assert len(exact) == 23
    np.testing.assert_array_equal(exact.get("k22"), vecs[22])
    for t in (again, table, reread):
        t.close()


def test_a_save_writes_only_what_was_added_since_the_load(tmp_path):
    """The stack saves its text vectors after every round: the rows loaded are linked into the new entry, not
    rewritten (at a million items they are 1.5 GB), and only the new rows are written."""
    import os

    table = VectorTable(8, block=3)
    table.add([f"k{i}" for i in range(1000)], _vecs(1000))
    table.save(tmp_path / "0")
    table.load(tmp_path / "0")
    table.add(["new1", "new2"], _vecs(2, seed=5))
    table.save(tmp_path / "1")
    assert os.stat(tmp_path / "1" / "vectors.npy").st_ino == os.stat(tmp_path / "0" / "vectors.npy").st_ino
    assert (tmp_path / "1" / "vectors.1.npy").stat().st_size < 200, "two rows of 8 floats and a header"
    table.load(tmp_path / "1")
    np.testing.assert_array_equal(table.get("new2"), _vecs(2, seed=5)[1])
    np.testing.assert_array_equal(table.get("k999"), _vecs(1000)[999])
    table.close()


def test_many_small_saves_keep_few_segments_and_every_row(tmp_path):
    """Trailing segments no larger than what is written are merged into it (a binary counter): after 64 saves
    of 10 rows over 1,000 the table has a handful of segments, and every row reads back."""
    table = VectorTable(8)
    table.add([f"k{i}" for i in range(1000)], _vecs(1000))
    table.save(tmp_path / "s0")
    table.load(tmp_path / "s0")
    added = {}
    for n in range(1, 65):
        vecs = _vecs(10, seed=n)
        keys = [f"r{n}-{j}" for j in range(10)]
        table.add(keys, vecs)
        added.update(zip(keys, vecs, strict=True))
        table.save(tmp_path / f"s{n}")
        table.load(tmp_path / f"s{n}")
        assert table.segments <= 9, table.segments
    assert len(table) == 1640
    for key, vec in added.items():
        np.testing.assert_array_equal(table.get(key), vec)
    np.testing.assert_array_equal(table.get("k0"), _vecs(1000)[0])
    table.close()


def _reread(path, rows: int) -> VectorTable:
    """The table saved in ``path``, opened afresh, checked to hold ``rows`` rows."""
    again = VectorTable(8)
    again.load(path)
    assert len(again) == rows
    return again


def test_saving_into_the_folder_it_was_loaded_from_keeps_every_row(tmp_path):
    import os

    table = _two_entries(tmp_path)
    inode = os.stat(tmp_path / "a" / "vectors.npy").st_ino
    table.save(tmp_path / "a")  # its own files: left as they are, never truncated under it
    assert os.stat(tmp_path / "a" / "vectors.npy").st_ino == inode, "not rewritten"
    again = _reread(tmp_path / "a", 101)
    assert again.segments == 2
    np.testing.assert_array_equal(again.get("k99"), _vecs(100)[99])
    np.testing.assert_array_equal(again.get("x"), _vecs(1, seed=1)[0])
    table.save(tmp_path / "a")  # and again, after a save that wrote two segments there
    again.load(tmp_path / "a")
    assert len(again) == 101
    for t in (table, again):
        t.close()


@pytest.mark.parametrize("written", ['{"segments": 65}', '{"segments": 0}', '{"segments": true}', '[2]', 'no json',
                                     '{"segments": "2"}', '{"segments": 3}', " " * 5000, "[" * 4000])
def test_a_segment_count_that_is_not_one_of_the_table_is_refused(tmp_path, written):
    table = _two_entries(tmp_path)
    table.save(tmp_path / "b")
    (tmp_path / "b" / "segments.json").write_text(written)
    with pytest.raises(StoreError):
        VectorTable(8).load(tmp_path / "b")
    table.close()


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="links an open file through /proc")
def test_rows_loaded_from_an_entry_swept_since_are_still_linked_not_copied(tmp_path):
    """Another worker replaced the entry this table was loaded from, and the old folder was swept: the files the
    table holds open are still named by a newer entry, so the next save links them rather than copy 1.5 GB."""
    import os
    import shutil

    table = _two_entries(tmp_path)
    table.save(tmp_path / "b")  # a newer entry linking a's rows (another worker's, say)
    inode = os.stat(tmp_path / "a" / "vectors.npy").st_ino
    shutil.rmtree(tmp_path / "a")  # swept
    table.add(["y"], _vecs(1, seed=2))
    table.save(tmp_path / "c")
    assert os.stat(tmp_path / "c" / "vectors.npy").st_ino == inode
    again = _reread(tmp_path / "c", 102)
    np.testing.assert_array_equal(again.get("k99"), _vecs(100)[99])
    for t in (table, again):
        t.close()


def test_rows_whose_files_no_name_holds_any_more_are_copied_from_the_open_files(tmp_path, caplog):
    import logging
    import shutil

    table = _two_entries(tmp_path)
    shutil.rmtree(tmp_path / "a")  # the only name of the loaded files
    with caplog.at_level(logging.INFO, logger="guimem.vectors.table"):
        table.save(tmp_path / "c")
    assert "100 saved rows copied" in caplog.text
    again = _reread(tmp_path / "c", 101)
    np.testing.assert_array_equal(again.get("k0"), _vecs(100)[0])
    np.testing.assert_array_equal(again.get("x"), _vecs(1, seed=1)[0])
    for t in (table, again):
        t.close()


def test_an_exact_index_refuses_a_table_of_several_segments_and_never_writes_through_a_link(tmp_path):
    table = _two_entries(tmp_path)
    table.save(tmp_path / "b")  # b/vectors.npy is a's file
    with pytest.raises(StoreError, match="several segments"):
        ExactIndex(8).load(tmp_path / "b")
    index = ExactIndex(8)
    index.add(["z"], _vecs(1, seed=3))
    index.save(tmp_path / "b")  # over a link to a's file: a's file is left alone
    again = _reread(tmp_path / "a", 100)
    np.testing.assert_array_equal(again.get("k7"), _vecs(100)[7])
    for t in (table, again):
        t.close()


def test_keys_that_are_not_a_list_are_refused(tmp_path):
    table = _two_entries(tmp_path)
    table.save(tmp_path / "b")
    np.save(tmp_path / "b" / "ids.1.npy", np.asarray(7))
    with pytest.raises(StoreError, match="not a list of keys"):
        VectorTable(8).load(tmp_path / "b")
    table.close()


def test_a_key_in_two_segments_is_refused(tmp_path):
    table = _two_entries(tmp_path)
    table.save(tmp_path / "b")
    np.save(tmp_path / "b" / "ids.1.npy", np.asarray(["k0"]))
    with pytest.raises(StoreError, match="twice"):
        VectorTable(8).load(tmp_path / "b")
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
