"""e5 embedding latency on this machine: one query at a time, and batches of 64 passages.

Usage: python benchmarks/embeddings.py [--n 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

from guimem.embeddings import CachedEmbedder, EmbedRole
from guimem.embeddings.e5 import E5Embedder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args()
    e5 = E5Embedder()
    e5.embed(["warm up"])
    texts = [f"app: miniwob\nscreen: task-{i}\ntextbox#field{i} [Field {i}]\nbutton Submit {i}" for i in range(args.n)]
    single = []
    for t in texts:
        start = time.perf_counter()
        e5.embed([t], EmbedRole.QUERY)
        single.append((time.perf_counter() - start) * 1000)
    batches = []
    for i in range(5):
        batch = [f"passage {i}-{j}: type the password into the field and press login" for j in range(64)]
        start = time.perf_counter()
        e5.embed(batch, EmbedRole.PASSAGE)
        batches.append((time.perf_counter() - start) * 1000)
    cached = CachedEmbedder(e5)
    cached.embed(texts[:1])
    start = time.perf_counter()
    for _ in range(1000):
        cached.embed(texts[:1])
    hit_us = (time.perf_counter() - start) * 1000
    p50 = statistics.median(single)
    p95 = sorted(single)[int(0.95 * len(single)) - 1]
    batch_ms = statistics.median(batches)
    print(f"e5 query, one at a time: p50 {p50:.2f} ms, p95 {p95:.2f} ms ({args.n} distinct texts)")
    print(f"e5 batch of 64 passages: median {batch_ms:.1f} ms = {batch_ms / 64:.2f} ms per text "
          f"({p50 / (batch_ms / 64):.2f}x cheaper per text than single queries)")
    print(f"cache hit: {hit_us:.1f} us per lookup ({p50 * 1000 / hit_us:.0f}x cheaper than embedding)")


if __name__ == "__main__":
    main()
