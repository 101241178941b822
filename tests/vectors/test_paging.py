"""Memory-mapped index files are paged in on a background thread after a load, not by the first searches."""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from guimem.vectors import paging
from guimem.vectors.exact import ExactIndex
from guimem.vectors.table import VectorTable
from tests.vectors.test_auto import _vectors

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory) -> Path:
    """A saved graph of 8,000 vectors (4 MB), built once; each test loads its own copy (a mapping is per file)."""
    pytest.importorskip("usearch")
    from guimem.vectors.hnsw import HnswIndex

    folder = tmp_path_factory.mktemp("graph")
    built = HnswIndex(64, exact_below=0, dtype="f32")
    built.add([f"v{i}" for i in range(8000)], _vectors(8000, 64))
    built.save(folder)
    return folder


def _saved_hnsw(folder: Path, graph_file: Path):
    from guimem.vectors.hnsw import HnswIndex

    shutil.copytree(graph_file, folder, dirs_exist_ok=True)
    return HnswIndex(64, exact_below=0)


@linux
def test_a_loaded_hnsw_graph_is_paged_in_before_any_search(tmp_path, graph_file):
    index = _saved_hnsw(tmp_path, graph_file)
    size = (tmp_path / "hnsw.usearch").stat().st_size
    index.load(tmp_path)
    assert index.warming.wait(60), "the warm-up did not finish"
    assert index.warming.outcome == "populated"
    # every page of the file is mapped into this process, though nothing searched it (viewing it touches only
    # the graph's node headers: before warming, about half of this file was resident)
    assert paging.resident(tmp_path / "hnsw.usearch") >= size - 4096
    assert index.search(_vectors(1, 64, seed=3)[0], 5)


@linux
def test_loaded_vector_files_are_paged_in(tmp_path):
    vecs = _vectors(6000, 96)
    ids = [f"v{i}" for i in range(len(vecs))]
    exact = ExactIndex(96)
    exact.add(ids, vecs)
    exact.save(tmp_path / "exact")
    table = VectorTable(96)
    table.add(ids, vecs)
    table.save(tmp_path / "table")
    for index, folder in ((ExactIndex(96), tmp_path / "exact"), (VectorTable(96), tmp_path / "table")):
        index.load(folder)
        assert index.warming.wait(60)
        assert paging.resident(folder / "vectors.npy") >= (folder / "vectors.npy").stat().st_size - 4096


@linux
def test_a_kernel_without_populate_read_reads_the_pages_in_and_says_so(tmp_path, graph_file, monkeypatch,
                                                                                 caplog):
    calls: list[int] = []

    def madvise(start: int, length: int, advice: int) -> int:
        calls.append(advice)
        return paging.EINVAL if advice == paging.MADV_POPULATE_READ else 0

    monkeypatch.setattr(paging, "_madvise", madvise)
    index = _saved_hnsw(tmp_path, graph_file)
    with caplog.at_level(logging.INFO, logger="guimem.vectors.paging"):
        index.load(tmp_path)
        assert index.warming.wait(60)
    assert index.warming.outcome == "touched"
    assert calls[0] == paging.MADV_POPULATE_READ and paging.MADV_WILLNEED in calls
    assert paging.resident(tmp_path / "hnsw.usearch") >= (tmp_path / "hnsw.usearch").stat().st_size - 4096
    assert "MADV_POPULATE_READ" in caplog.text


@linux
def test_a_file_too_large_for_the_memory_available_is_left_to_fault_in(tmp_path, graph_file, monkeypatch, caplog):
    monkeypatch.setattr(paging, "_available", lambda: 2 << 20)  # 2 MB free: a 4 MB graph would evict others
    index = _saved_hnsw(tmp_path, graph_file)
    with caplog.at_level(logging.INFO, logger="guimem.vectors.paging"):
        index.load(tmp_path)
        assert index.warming.wait(60)
    assert index.warming.outcome.startswith("left")
    assert "left to fault in" in caplog.text


def test_small_files_and_unmapped_files_are_not_warmed(tmp_path):
    small = tmp_path / "small.npy"
    np.save(small, np.zeros((10, 4), dtype=np.float32))
    kept = np.load(small, mmap_mode="r")
    warming = paging.warm(small, keep=kept)
    assert warming.wait(1) and warming.outcome == "small"
    big = tmp_path / "big.bin"
    big.write_bytes(b"\0" * (paging.SMALLEST + 1))
    warming = paging.warm(big, keep=None)  # nothing in this process maps it
    assert warming.wait(60) and warming.outcome == "not mapped"


def test_warming_can_be_turned_off(tmp_path, monkeypatch):
    big = tmp_path / "big.npy"
    np.save(big, np.zeros((1 << 18, 4), dtype=np.float32))  # 4 MB
    monkeypatch.setenv("GUIMEM_WARM", "0")
    warming = paging.warm(big, keep=np.load(big, mmap_mode="r"))
    assert warming.wait(1) and warming.outcome == "off"
