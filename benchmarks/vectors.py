"""Exact (NumPy) vs HNSW (usearch) search at 100k vectors: time per query, build time, recall@10.

Random unit vectors are the worst case for HNSW (no low-dimensional structure): at 384-d its
recall collapses unless ef grows large, while at 64-d it stays above 0.95. Both are reported.

Usage: python benchmarks/vectors.py [--n 100000] [--dims 64,384] [--queries 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from guimem.vectors.exact import ExactIndex
from guimem.vectors.hnsw import HnswIndex


def unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    v = rng.standard_normal((n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def timed_search(index: ExactIndex | HnswIndex, queries: np.ndarray) -> tuple[float, list[set[str]]]:
    times, found = [], []
    for q in queries:
        start = time.perf_counter()
        hits = index.search(q, 10)
        times.append((time.perf_counter() - start) * 1000)
        found.append({h.id for h in hits})
    return statistics.median(times), found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dims", default="64")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    for dim in (int(d) for d in args.dims.split(",")):
        run(args.n, dim, args.queries)


def run(n: int, dim: int, n_queries: int) -> None:
    """Benchmark one dimension."""
    rng = np.random.default_rng(0)
    vecs = unit(rng, n, dim)
    ids = [str(i) for i in range(n)]
    queries = unit(rng, n_queries, dim)
    start = time.perf_counter()
    exact = ExactIndex(dim)
    exact.add(ids, vecs)
    exact_build = time.perf_counter() - start
    start = time.perf_counter()
    hnsw = HnswIndex(dim)
    hnsw.add(ids, vecs)
    hnsw_build = time.perf_counter() - start
    exact_ms, truth = timed_search(exact, queries)
    hnsw_ms, approx = timed_search(hnsw, queries)
    recall = sum(len(a & t) for a, t in zip(approx, truth, strict=True)) / (10 * n_queries)
    print(f"{n} random unit vectors, {dim}-d, top-10, {n_queries} queries")
    print(f"exact: build {exact_build:.1f} s, search p50 {exact_ms:.2f} ms")
    print(f"hnsw:  build {hnsw_build:.1f} s, search p50 {hnsw_ms:.2f} ms, recall@10 {recall:.3f}")
    print(f"hnsw is {exact_ms / hnsw_ms:.1f}x faster per query than exact at this size")


if __name__ == "__main__":
    main()
