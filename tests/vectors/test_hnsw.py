"""The HNSW index: vectors held in half precision, and its saved key list read as hostile."""

from __future__ import annotations

import json

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
    top = half.search(vecs[17], 1)[0]
    assert top.id == "v17" and top.score == pytest.approx(1.0, abs=2e-3)
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


def test_a_viewed_index_saved_elsewhere_can_change_after_the_file_it_was_read_from_is_removed(tmp_path):
    """An index cache writes a new entry and removes the old one; a skills memory opened from the old entry whose
    round added nothing still views that file, and the next round's new skill loaded the removed file
    (FileNotFoundError at 1M skills in an evaluation's third round)."""
    import shutil

    vecs = _vectors(50)
    index = HnswIndex(48, exact_below=0, dtype="f16")
    index.add([f"v{i}" for i in range(40)], vecs[:40])
    index.save(tmp_path / "old")
    viewed = HnswIndex(48, exact_below=0)
    viewed.load(tmp_path / "old")
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
