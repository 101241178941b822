"""Exact search with int8 codes read first (`guimem.vectors.coded`) against the float32 product alone.

For each size: the p50 time of one query, k = 1 (a graph's nearest node) and k = 20 (a skills pool), with the
processor's caches warm (queries back to back) and cold (64 MB read between two queries, as a browser's work
does between two steps of an episode), as the ratio coded / float32 (< 1: coded is faster), and how many rows
coded search read again in float32. The answers are compared too (same ids, scores within float32 rounding).
Vectors: unit vectors around 8 shared directions (cosines like e5's), and plain random ones.

Usage: python benchmarks/exact_coded.py [--sizes 10000,50000] [--queries 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from guimem.vectors import coded
from guimem.vectors.exact import ExactIndex


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def vectors(kind: str, rng: np.random.Generator, n: int, dim: int = 384) -> np.ndarray:
    if kind == "random":
        return _unit(rng.standard_normal((n, dim)))
    centres = _unit(rng.standard_normal((8, dim)) + 3.0)
    return _unit(centres[rng.integers(0, 8, n)] + 0.25 * rng.standard_normal((n, dim)))


_JUNK = np.ones(64 * 1024 * 1024 // 8)


def p50(index: ExactIndex, queries: np.ndarray, k: int, cold: bool) -> float:
    times = []
    for q in queries:
        if cold:
            _JUNK.sum()  # the caches hold something else now
        start = time.perf_counter()
        index.search(q, k)
        times.append((time.perf_counter() - start) * 1000)
    return float(np.median(times))


def run(kind: str, n: int, n_queries: int) -> dict[str, float]:
    rng = np.random.default_rng(11)
    data = vectors(kind, rng, n)
    queries = _unit(data[rng.integers(0, n, n_queries)] + 0.05 * rng.standard_normal((n_queries, data.shape[1])))
    plain, fast = ExactIndex(data.shape[1]), ExactIndex(data.shape[1])
    plain._codes = None  # the float32 product alone
    ids = [f"v{i}" for i in range(n)]
    plain.add(ids, data)
    fast.add(ids, data)
    fast.search(queries[0], 1)  # codes the rows (timed apart)
    start = time.perf_counter()
    fast._codes.clear()  # type: ignore[union-attr]
    fast.search(queries[0], 1)
    out: dict[str, float] = {"code_ms": (time.perf_counter() - start) * 1000}
    same = True
    for q in queries[:50]:
        for k in (1, 20):
            a, b = plain.search(q, k), fast.search(q, k)
            same &= [h.id for h in a] == [h.id for h in b] and \
                bool(np.allclose([h.score for h in a], [h.score for h in b], atol=2e-6))
    out["same_answers"] = float(same)
    for k in (1, 20):
        for cold in (False, True):
            label = f"k{k}_{'cold' if cold else 'warm'}"
            out[f"{label}_float32_ms"] = p50(plain, queries, k, cold)
            out[f"{label}_coded_ms"] = p50(fast, queries, k, cold)
            out[f"{label}_ratio"] = out[f"{label}_coded_ms"] / out[f"{label}_float32_ms"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not coded.available():
        raise SystemExit("NumKong is not installed: pip install 'guimem[hnsw]'")
    results = {}
    print("| vectors | rows | k | caches | float32 ms | coded ms | ratio (< 1: coded faster) |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for kind in ("e5-like", "random"):
        for n in (int(s) for s in args.sizes.split(",")):
            r = run(kind, n, args.queries)
            results[f"{kind}@{n}"] = r
            for k in (1, 20):
                for cold in ("warm", "cold"):
                    label = f"k{k}_{cold}"
                    print(f"| {kind} | {n:,} | {k} | {cold} | {r[label + '_float32_ms']:.3f} | "
                          f"{r[label + '_coded_ms']:.3f} | {r[label + '_ratio']:.2f} |")
            print(f"| {kind} | {n:,} | | coding every row once: {r['code_ms']:.1f} ms; same answers: "
                  f"{'yes' if r['same_answers'] else 'NO'} | | | |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
