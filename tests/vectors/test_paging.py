"""Memory-mapped index files are paged in on a background thread after a load, not by the first searches."""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from guimem.vectors import paging
from guimem.vectors.auto import AutoIndex
from guimem.vectors.exact import ExactIndex
from guimem.vectors.table import VectorTable
from tests.vectors.test_auto import _vectors

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
PAGED_IN = {paging.Outcome.POPULATED, paging.Outcome.READ}  # READ: a kernel older than 5.14


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


def _only(warmings: list[paging.Warming]) -> paging.Warming:
    assert len(warmings) == 1
    assert warmings[0].wait(60), "the warm-up did not finish"
    return warmings[0]


@linux
def test_a_loaded_hnsw_graph_is_paged_in_before_any_search(tmp_path, graph_file):
    index = _saved_hnsw(tmp_path, graph_file)
    file = tmp_path / "hnsw.usearch"
    index.load(tmp_path)
    # viewing touches only the graph's node headers: about half of this file is resident before the warm-up
    assert paging.resident(file) < 0.8 * file.stat().st_size
    warming = _only(index.warm())
    assert warming.outcome in PAGED_IN
    if warming.outcome is paging.Outcome.POPULATED:  # (a kernel older than 5.14 only reads the file in)
        assert paging.resident(file) >= file.stat().st_size - paging.PAGE  # nothing searched it
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
        warming = _only(index.warm())
        assert warming.outcome in PAGED_IN
        file = folder / "vectors.npy"
        if warming.outcome is paging.Outcome.POPULATED:
            assert paging.resident(file) >= file.stat().st_size - paging.PAGE


@linux
def test_only_the_mapping_a_load_made_is_warmed_not_another_of_the_same_file(tmp_path, graph_file):
    from guimem.vectors.hnsw import HnswIndex

    shutil.copytree(graph_file, tmp_path, dirs_exist_ok=True)
    file = tmp_path / "hnsw.usearch"
    other = np.memmap(file, dtype=np.uint8, mode="r")  # the same file, mapped first by someone else
    index = HnswIndex(64, exact_below=0)
    index.load(tmp_path)
    warming = _only(index.warm())
    if warming.outcome is not paging.Outcome.POPULATED:
        pytest.skip("a kernel without MADV_POPULATE_READ: nothing is mapped by the warm-up to count")
    assert len(paging.regions(file)) == 2 and int(other[0]) >= 0  # both mapped; one of them was warmed
    assert paging.resident(file) < 1.8 * file.stat().st_size


@linux
def test_a_kernel_without_populate_read_reads_the_file_in_and_says_so(tmp_path, graph_file, monkeypatch, caplog):
    calls: list[int] = []

    def madvise(start: int, length: int, advice: int) -> int:
        calls.append(advice)
        return paging.EINVAL if advice == paging.MADV_POPULATE_READ else 0

    monkeypatch.setattr(paging, "_madvise", madvise)
    monkeypatch.setattr(paging, "CHUNK", 1 << 20)  # four chunks of the 4 MB graph
    monkeypatch.setattr(paging._PROCESS, "told_no_populate", False)
    index = _saved_hnsw(tmp_path, graph_file)
    index.load(tmp_path)
    with caplog.at_level(logging.INFO, logger="guimem.vectors.paging"):
        assert _only(index.warm()).outcome is paging.Outcome.READ
    assert calls == [paging.MADV_POPULATE_READ]  # asked once, then not again: the rest is only read
    assert "MADV_POPULATE_READ" in caplog.text


@linux
def test_what_would_exceed_the_memory_available_is_left_to_fault_in(tmp_path, graph_file, monkeypatch, caplog):
    monkeypatch.setattr(paging, "_available", lambda: 2 << 20)  # 2 MB free: a 4 MB graph would evict others
    index = _saved_hnsw(tmp_path, graph_file)
    index.load(tmp_path)
    with caplog.at_level(logging.INFO, logger="guimem.vectors.paging"):
        assert _only(index.warm()).outcome is paging.Outcome.LEFT
    assert "left to fault in" in caplog.text


@linux
def test_a_warm_up_stops_when_its_index_changes_and_the_index_goes_on(tmp_path, graph_file, monkeypatch):
    chunks: list[int] = []
    monkeypatch.setattr(paging, "_madvise", lambda start, length, advice: chunks.append(length) or 0)
    monkeypatch.setattr(paging, "CHUNK", paging.PAGE)  # a thousand chunks: time to see the cancel
    gate = threading.Event()
    real = paging._read_through

    def slow(file, buffer, offset, length):  # the first chunk waits for the change below
        gate.wait(10)
        real(file, buffer, offset, length)

    monkeypatch.setattr(paging, "_read_through", slow)
    index = _saved_hnsw(tmp_path, graph_file)
    index.load(tmp_path)
    [warming] = index.warm()
    index.add(["new"], _vectors(1, 64, seed=9))  # copied out of the mapping: the warm-up is let go
    gate.set()
    assert warming.wait(60) and warming.outcome is paging.Outcome.CANCELLED
    assert chunks == [], "the chunk being read when it was let go is not mapped in (its mapping may be going away)"
    assert index.search(_vectors(1, 64, seed=9)[0], 1)[0].id == "new"
    assert index.warm() == []  # nothing viewed any more


def test_small_files_are_not_tracked_and_not_warmed(tmp_path):
    small = tmp_path / "small.npy"
    np.save(small, np.zeros((10, 4), dtype=np.float32))
    pages = paging.Pages()
    pages.track(small, lambda: np.load(small, mmap_mode="r"))
    assert pages.warm() == []


def test_an_auto_index_warms_what_it_holds(tmp_path):
    index = AutoIndex(96)
    index.add([f"v{i}" for i in range(4000)], _vectors(4000, 96))
    index.save(tmp_path)
    again = AutoIndex(96)
    again.load(tmp_path)
    warmings = again.warm()
    assert warmings if sys.platform.startswith("linux") else warmings == []
    for warming in warmings:
        assert warming.wait(60) and warming.outcome in PAGED_IN


@linux
def test_a_fork_during_a_warm_up_ends_it_in_the_child(tmp_path, graph_file, monkeypatch):
    gate = threading.Event()
    monkeypatch.setattr(paging, "_madvise", lambda start, length, advice: gate.wait(10) and 0)
    index = _saved_hnsw(tmp_path, graph_file)
    index.load(tmp_path)
    [warming] = index.warm()
    pid = os.fork()
    if pid == 0:  # the child: the parent's thread is not here; its warm-up must not be waited for forever
        os._exit(0 if warming.wait(5) and warming.outcome is paging.Outcome.FAILED else 1)
    gate.set()
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            pytest.fail("the forked child waited for its parent's warm-up")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert warming.wait(60) and warming.outcome in PAGED_IN


@linux
def test_a_warm_up_let_go_before_its_turn_does_nothing_and_holds_nothing(tmp_path, graph_file):
    index = _saved_hnsw(tmp_path, graph_file)
    index.load(tmp_path)
    with paging._PROCESS.one_at_a_time:  # another warm-up is running
        held = paging._PROCESS.held
        [warming] = index.warm()
        warming.cancel()
        assert warming.wait(0.2) is False  # waiting for its turn
    assert warming.wait(60) and warming.outcome is paging.Outcome.CANCELLED
    assert paging._PROCESS.held <= held  # counted nothing (earlier owners may have been freed meanwhile)


@linux
def test_a_file_replaced_since_it_was_mapped_is_not_read_from_the_disk_by_the_warm_up(tmp_path, graph_file):
    index = _saved_hnsw(tmp_path, graph_file)
    index.load(tmp_path)
    file = tmp_path / "hnsw.usearch"
    fresh = tmp_path / "fresh"
    fresh.write_bytes(file.read_bytes())
    os.replace(fresh, file)  # as the index cache writes: a new file renamed over the old one
    warming = _only(index.warm())
    assert warming.outcome is paging.Outcome.LEFT and "replaced" in warming.detail
    assert index.search(_vectors(1, 64, seed=3)[0], 5)  # the index reads its own mapping, as ever


def test_no_thread_to_be_had_ends_the_warm_up_and_not_the_open(tmp_path, monkeypatch):
    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    region = paging.Region(0, paging.PAGE, 0, 0)
    warming = paging.warm(tmp_path / "any", frozenset({region}), keep=np.zeros(1))
    assert warming is not None and warming.wait(1) and warming.outcome is paging.Outcome.FAILED
    assert warming not in paging._PROCESS.pending


@linux
def test_a_warm_up_reads_into_anonymous_memory_no_larger_than_the_file(tmp_path, graph_file, monkeypatch):
    """The read buffer is anonymous memory the kernel fills in the reads, not a bytearray zeroed under the GIL (16 MB
    of it for every file warmed held a fresh process's first recall beside it from 4 to 11 ms), and never larger
    than what it pages in."""
    import mmap

    buffers: list[tuple[type, int]] = []
    real = paging._read_through
    monkeypatch.setattr(paging, "_read_through", lambda file, buffer, *rest: buffers.append(
        (type(buffer), len(buffer))) or real(file, buffer, *rest))
    index = _saved_hnsw(tmp_path, graph_file)
    index.load(tmp_path)
    warming = _only(index.warm())
    assert warming.outcome in PAGED_IN and buffers
    size = (tmp_path / "hnsw.usearch").stat().st_size
    assert {kind for kind, _ in buffers} == {mmap.mmap}
    mapped = -(-size // paging.PAGE) * paging.PAGE  # the mapping: whole pages
    assert {n for _, n in buffers} == {buffers[0][1]} and buffers[0][1] <= min(paging.CHUNK, mapped)
