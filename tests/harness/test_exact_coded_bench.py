"""`benchmarks/exact_coded.py` measures what it says: both searches on the same rows, their answers compared."""

from __future__ import annotations

import pytest

from guimem.vectors import coded
from tests.harness.benchmark_module import load


@pytest.mark.skipif(not coded.available(), reason="NumKong (guimem[hnsw]) is not installed")
def test_the_benchmark_times_both_searches_and_compares_their_answers():
    bench = load("exact_coded")
    out = bench.run("e5-like", 2500, 8)
    assert out["same_answers"] == 1.0
    for k in (1, 20):
        for caches in ("warm", "cold"):
            label = f"k{k}_{caches}"
            assert out[f"{label}_float32_ms"] > 0 and out[f"{label}_coded_ms"] > 0
            assert out[f"{label}_ratio"] == pytest.approx(out[f"{label}_coded_ms"] / out[f"{label}_float32_ms"])
