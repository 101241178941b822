"""Coded exact search (`guimem.vectors.coded`) answers what the float32 product answers: the same ids in the same
order, with the same scores up to float32 rounding (the rows read again are multiplied apart from the rest, in
another order of sums), on vectors like e5's (close together) and random ones, through adds, replacements,
removals and a save and load."""

from __future__ import annotations

import numpy as np
import pytest

from guimem.vectors import coded
from guimem.vectors.exact import ExactIndex

pytestmark = pytest.mark.skipif(not coded.available(), reason="NumKong (guimem[hnsw]) is not installed")


def _plain(index: ExactIndex, query: np.ndarray, k: int) -> list[tuple[str, float]]:
    """The float32 product over every row, best first, ties to the lower row: what coded search must give."""
    ids, matrix = index.arrays()
    scores = np.asarray(matrix) @ query.astype(np.float32)
    order = np.lexsort((np.arange(len(ids)), -scores))[:k]
    return [(ids[i], float(scores[i])) for i in order]


def _same(hits, plain) -> None:
    assert [h.id for h in hits] == [i for i, _ in plain]
    assert np.allclose([h.score for h in hits], [s for _, s in plain], rtol=0, atol=2e-6)


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _e5_like(rng: np.random.Generator, n: int, dim: int = 384) -> np.ndarray:
    """Unit vectors around a few shared directions, as e5's screens are (cosines of 0.7 to 0.95)."""
    centres = _unit(rng.standard_normal((8, dim)) + 3.0)
    return _unit(centres[rng.integers(0, 8, n)] + 0.25 * rng.standard_normal((n, dim)))


@pytest.mark.parametrize("kind", ["e5-like", "random"])
def test_coded_search_gives_the_float32_answer_through_every_change(kind, tmp_path):
    rng = np.random.default_rng(7)
    make = (lambda n: _e5_like(rng, n)) if kind == "e5-like" else (lambda n: _unit(rng.standard_normal((n, 384))))
    index = ExactIndex(384)
    index.add([f"v{i}" for i in range(3000)], make(3000))
    # the same vector twice: a tie, broken towards the lower row
    index.add(["twin"], index.get("v5")[None, :].copy())
    steps = [
        lambda: index.add([f"v{i}" for i in range(0, 3000, 7)], make(len(range(0, 3000, 7)))),  # replaced
        lambda: index.remove([f"v{i}" for i in range(1, 3000, 5)]),  # the last rows move into the gaps
        lambda: index.add([f"w{i}" for i in range(900)], make(900)),  # appended where removed rows were
    ]
    queries = np.concatenate([make(20), index.arrays()[1][:5] + 0.0, index.get("twin")[None, :]])  # and rows
    for step in [lambda: None, *steps]:
        step()
        assert len(index) >= coded.CODED_FROM
        for q in queries:
            for k in (1, 10, 64):
                _same(index.search(q, k), _plain(index, q, k))
    index.save(tmp_path / "saved")
    loaded = ExactIndex(384)
    loaded.load(tmp_path / "saved")
    for q in queries:
        _same(loaded.search(q, 10), _plain(loaded, q, 10))
    twin = loaded.get("twin")
    assert [h.id for h in loaded.search(twin, 2)] == [i for i, _ in _plain(loaded, twin, 2)], "a tie: the lower row"
    assert {h.id for h in loaded.search(twin, 2)} == {"twin", "v5"}


def test_a_small_index_is_searched_by_the_float32_product_alone():
    index = ExactIndex(8)
    index.add(["a", "b"], _unit(np.eye(8)[:2]))
    assert [h.id for h in index.search(np.eye(8)[1].astype(np.float32), 1)] == ["b"]


def test_coded_search_never_asks_for_amx_tiles():
    """AMX tiles kill a process that did not ask the kernel for them first (SIGILL): NumKong's are turned off."""
    import numkong

    assert coded.available()  # what imports NumKong for guimem
    caps = numkong.get_capabilities()
    assert not caps.get("sapphireamx") and not caps.get("graniteamx")


def test_a_saved_index_searches_coded_from_its_first_query_and_stale_codes_are_never_read(tmp_path):
    rng = np.random.default_rng(3)
    index = ExactIndex(384)
    index.add([f"v{i}" for i in range(3000)], _e5_like(rng, 3000))
    index.save(tmp_path / "a")
    assert (tmp_path / "a" / "codes.npy").exists()
    loaded = ExactIndex(384)
    loaded.load(tmp_path / "a")
    assert loaded._codes._coded == 3000, "the codes come with the index: nothing to code on the first query"
    q = _e5_like(rng, 1)[0]
    _same(loaded.search(q, 5), _plain(loaded, q, 5))
    loaded.add(["v0"], -loaded.get("v0")[None, :])  # a loaded (read-only) index changes: codes copied, row recoded
    _same(loaded.search(-q, 5), _plain(loaded, -q, 5))
    # the same path saved again without codes (a process without NumKong, say): the old codes must go
    plain = ExactIndex(384)
    plain._codes = None
    plain.add([f"v{i}" for i in range(3000)], _e5_like(rng, 3000))
    plain.save(tmp_path / "a")
    assert not (tmp_path / "a" / "codes.npy").exists()
    again = ExactIndex(384)
    again.load(tmp_path / "a")
    _same(again.search(q, 5), _plain(again, q, 5))


def test_a_row_or_query_that_is_not_finite_is_answered_by_the_float32_product():
    rng = np.random.default_rng(5)
    index = ExactIndex(384)
    index.add([f"v{i}" for i in range(2500)], _e5_like(rng, 2500))
    q = _e5_like(rng, 1)[0]
    with np.errstate(invalid="ignore", over="ignore"):
        bad = q.copy()
        bad[3] = np.nan
        assert len(index.search(bad, 10)) == 10, "a NaN query still gets k answers, as the float32 product gives"
        index.add(["inf"], np.full((1, 384), np.inf, dtype=np.float32))
        assert len(index.search(q, 10)) == 10


def test_two_threads_searching_at_once_get_what_one_gets():
    import threading

    rng = np.random.default_rng(9)
    index = ExactIndex(384)
    index.add([f"v{i}" for i in range(6000)], _e5_like(rng, 6000))
    queries = _e5_like(rng, 40)
    index.add(["late"], _e5_like(rng, 1))  # rows not coded yet: the first searches code them
    expected = [_plain(index, q, 5) for q in queries]
    errors: list[BaseException] = []

    def run():
        try:
            for q, want in zip(queries, expected, strict=True):
                _same(index.search(q, 5), want)
        except BaseException as exc:  # reported below
            errors.append(exc)
    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_rows_too_close_to_tell_apart_in_int8_are_scored_by_the_float32_product_over_every_row():
    """Near copies of one vector: the int8 bounds cannot separate them, so most rows would be read again one by one
    (a gather costs several times a row of the contiguous product). Past a sixth of the rows the coded search gives
    way to the float32 product, with the same answer."""
    rng = np.random.default_rng(11)
    base = _e5_like(rng, 1)[0]
    close = _unit(base + 0.01 * rng.standard_normal((6000, 384)))
    index = ExactIndex(384)
    index.add([f"v{i}" for i in range(6000)], close)
    codes = index._codes
    assert codes is not None
    q = _unit(base + 0.01 * rng.standard_normal(384))
    assert codes.top(index.arrays()[1], 6000, q, 10) is None, "most rows left: the float32 product answers"
    _same(index.search(q, 10), _plain(index, q, 10))
    spread = ExactIndex(384)
    spread.add([f"v{i}" for i in range(6000)], _e5_like(rng, 6000))
    assert spread._codes is not None and spread._codes.top(spread.arrays()[1], 6000, q, 10) is not None
