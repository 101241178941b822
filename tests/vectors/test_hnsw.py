"""The HNSW index: vectors held in half precision, and its saved key list read as hostile."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from guimem.errors import StoreError
from guimem.vectors.auto import AutoIndex
from guimem.vectors.exact import ExactIndex
from guimem.vectors.hnsw import HnswIndex
from tests.vectors.test_auto import _vectors as unit_vectors

pytest.importorskip("usearch")


def _vectors(n: int, dim: int = 48, seed: int = 0) -> np.ndarray:
    return unit_vectors(n, dim, seed)


def test_half_precision_finds_what_single_precision_finds_and_stays_half_when_saved(tmp_path):
    vecs = _vectors(3000)
    ids = [f"v{i}" for i in range(len(vecs))]
    exact = ExactIndex(48)
    exact.add(ids, vecs)
    half = HnswIndex(48, 16, 128, 64, exact_below=0, dtype="f16")
    half.add(ids, vecs)
    queries = _vectors(40, seed=1)
    agree = sum(len({h.id for h in half.search(q, 10)} & {h.id for h in exact.search(q, 10)}) for q in queries)
    assert agree >= 0.9 * 10 * len(queries)
    # each vector finds itself with its own score, as half precision keeps it; approximately: a graph built on
    # several threads leaves about 0.1 % of its vectors that their own vector does not reach (usearch 2.26: 31
    # of 30,000 here, none built on one thread), so most, not all, of 20
    own = [{h.id: h.score for h in half.search(vecs[i], 10)}.get(f"v{i}") for i in range(17, 37)]
    assert sum(1 for score in own if score == pytest.approx(1.0, abs=2e-3)) >= 18
    half.save(tmp_path / "ix")
    assert json.loads((tmp_path / "ix" / "meta.json").read_text())["dtype"] == "f16"
    loaded = HnswIndex(48, exact_below=0)
    loaded.load(tmp_path / "ix")
    assert loaded.dtype == "f16"
    assert [h.id for h in loaded.search(vecs[3], 5)] == [h.id for h in half.search(vecs[3], 5)]
    loaded.add(["new"], vecs[:1])  # the viewed file is read into memory before it changes: still half
    assert loaded.dtype == "f16" and loaded._index.dtype.name.lower() == "f16"
    assert loaded.search(vecs[0], 2)[0].id in {"v0", "new"}


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="f16"):
        HnswIndex(8, dtype="i8")


def test_the_automatic_index_switches_to_a_half_precision_graph(tmp_path):
    vecs = _vectors(500)
    index = AutoIndex(48, switch_at=400)
    index.add([f"v{i}" for i in range(500)], vecs)
    assert index.backend == "hnsw" and index._active.dtype == "f16"
    index.save(tmp_path / "ix")
    again = AutoIndex(48)
    again.load(tmp_path / "ix")
    assert again._active.dtype == "f16" and again.search(vecs[42], 1)[0].id == "v42"


def test_removed_and_replaced_ids_are_never_returned(tmp_path):
    vecs = _vectors(60)
    index = HnswIndex(48, exact_below=0)
    index.add([f"v{i}" for i in range(60)], vecs)
    index.remove(["v5", "v6"])
    index.add(["v7"], vecs[5:6])  # replaced: its old key is gone, its new vector is v5's
    found = [h.id for h in index.search(vecs[5], 60)]
    assert "v5" not in found and "v6" not in found and found[0] == "v7" and len(found) == len(set(found)) == 58
    index.save(tmp_path / "ix")
    loaded = HnswIndex(48, exact_below=0)
    loaded.load(tmp_path / "ix")
    assert [h.id for h in loaded.search(vecs[5], 60)] == found


@pytest.mark.parametrize("meta", [{"next": 10**12}, {"next": 3}, {"next": "x"}, {"dtype": "f64"}])
def test_a_damaged_or_hostile_saved_index_is_refused_not_held(tmp_path, meta):
    vecs = _vectors(20)
    index = HnswIndex(48, exact_below=0)
    index.add([f"v{i}" for i in range(20)], vecs)
    index.save(tmp_path / "ix")
    saved = json.loads((tmp_path / "ix" / "meta.json").read_text())
    (tmp_path / "ix" / "meta.json").write_text(json.dumps({**saved, **meta}))
    with pytest.raises(StoreError):
        HnswIndex(48).load(tmp_path / "ix")


def _viewed(entry: Path) -> tuple[np.ndarray, HnswIndex]:
    """50 vectors, and a half-precision graph of the first 40 saved in ``entry`` and viewed from there."""
    vecs = _vectors(50)
    index = HnswIndex(48, exact_below=0, dtype="f16")
    index.add([f"v{i}" for i in range(40)], vecs[:40])
    index.save(entry)
    viewed = HnswIndex(48, exact_below=0)
    viewed.load(entry)
    return vecs, viewed


def test_a_viewed_index_saved_elsewhere_can_change_after_the_file_it_was_read_from_is_removed(tmp_path):
    """An index cache writes a new entry and removes the old one; a skills memory opened from the old entry whose
    round added nothing still views that file, and the next round's new skill loaded the removed file
    (FileNotFoundError at 1M skills in an evaluation's third round)."""
    vecs, viewed = _viewed(tmp_path / "old")
    viewed.save(tmp_path / "new")
    shutil.rmtree(tmp_path / "old")
    assert viewed.search(vecs[3], 1)[0].id == "v3"
    viewed.add([f"v{i}" for i in range(40, 50)], vecs[40:])
    assert len(viewed) == 50 and viewed.search(vecs[45], 1)[0].id == "v45"
    again = HnswIndex(48, exact_below=0)
    again.load(tmp_path / "new")
    assert len(again) == 40 and again.dtype == "f16", "the copy is the index as it was saved"


def test_the_search_expansion_can_change_and_is_saved(tmp_path):
    vecs = _vectors(30)
    index = HnswIndex(48, 16, 128, 64, exact_below=0)
    index.add([f"v{i}" for i in range(30)], vecs)
    index.expansion_search = 96
    assert index.expansion_search == 96 and index.connectivity == 16
    index.save(tmp_path / "ix")
    loaded = HnswIndex(48, exact_below=0)
    loaded.load(tmp_path / "ix")
    assert loaded.expansion_search == 96 and loaded.connectivity == 16


@pytest.mark.parametrize("then", ["add", "remove", "save"])
def test_a_viewed_index_whose_file_another_writer_removed_still_changes_and_saves(tmp_path, then):
    """Two evaluation workers open one index cache entry; one's round replaces the entry and its folder goes.
    The other views that file: its next change and its next save read the mapping, never the removed path
    (both read the path before: FileNotFoundError)."""
    vecs, viewed = _viewed(tmp_path / "entry")
    shutil.rmtree(tmp_path / "entry")  # the other worker's new entry replaced it
    if then == "add":
        viewed.add([f"v{i}" for i in range(40, 50)], vecs[40:])
    elif then == "remove":
        viewed.remove(["v3"])
    viewed.save(tmp_path / "mine")
    again = HnswIndex(48, exact_below=0)
    again.load(tmp_path / "mine")
    expected = {"add": 50, "remove": 39, "save": 40}[then]
    assert len(again) == expected and again.dtype == "f16"
    assert again.search(vecs[7], 1)[0].id == "v7" and ("v3" in again) == (then != "remove")


def test_saving_where_it_is_viewed_under_another_name_leaves_the_file_whole(tmp_path):
    """The same file through a link: nothing is copied onto itself (SameFileError before) or truncated."""
    vecs = _vectors(30)
    index = HnswIndex(48, exact_below=0)
    index.add([f"v{i}" for i in range(30)], vecs)
    index.save(tmp_path / "entry")
    (tmp_path / "link").symlink_to(tmp_path / "entry")
    viewed = HnswIndex(48, exact_below=0)
    viewed.load(tmp_path / "entry")
    viewed.save(tmp_path / "link")
    again = HnswIndex(48, exact_below=0)
    again.load(tmp_path / "entry")
    assert len(again) == 30 and again.search(vecs[4], 1)[0].id == "v4"


def test_an_id_added_again_keeps_its_key_so_a_long_used_index_still_opens(tmp_path):
    """A skill is added again at every merge and status change: each gave a new key, so a memory whose items
    changed often enough was refused on its next open as too sparse (`SPARSEST`) and rebuilt (hours at 1M)."""
    vecs = _vectors(100)
    ids = [f"v{i}" for i in range(100)]
    index = HnswIndex(48, 8, 16, 16, exact_below=0, dtype="f16")
    for turn in range(8):
        index.add(ids, np.roll(vecs, turn, axis=0))
    assert index._next == 100
    index.remove(ids[:10])
    back = _vectors(10, seed=9)
    index.add(ids[:10], back)  # removed, then back
    assert index._next == 100
    index.save(tmp_path / "ix")
    again = HnswIndex(48, exact_below=0)
    again.load(tmp_path / "ix")
    assert len(again) == 100
    assert [h.id for h in again.search(back[5], 1)] == ["v5"]
    assert [h.id for h in again.search(vecs[50], 1)] == [ids[(50 + 7) % 100]]


def test_an_id_twice_in_one_call_is_held_once_with_its_last_vector():
    vecs = _vectors(3)
    index = HnswIndex(48, exact_below=0)
    index.add(["a", "b", "a"], vecs)
    assert len(index) == 2 and [h.id for h in index.search(vecs[2], 3)] == ["a", "b"]
    assert index.search(vecs[0], 1)[0].id != "a" or index.search(vecs[0], 1)[0].score < 0.999
