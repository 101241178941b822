"""Reading many stored items: one statement per batch of ids (`Batching.get_many`) against one per item.

Indexing the stack's transfer pool reads every pool item once (`ItemView.peek_many`). Measured here, in one
run, on SQLite and on a real PostgreSQL 15 on loopback: N items copied from the recall benchmark's stack store
(its real stored bodies and vectors; `recall_end_to_end.build_store`), read back in the pool build's batches
of 512 ids and one by one, twice each, alternating, the best of each. Records only (the parse is the same
in both and is reported apart).

Usage: python benchmarks/store_reads.py [--items 20000] [--size 100000] [--json F]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import recall_end_to_end as bench

from guimem.memory.steer.items import KnowledgeItem
from guimem.storage import Record, create_store

BATCH = 512
"""The pool build's batch (`PoolSearch.sync`)."""


def _records(size: int, n: int) -> list[Record]:
    path = bench.build_store("stack", size)
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute("SELECT id, kind, namespace, status, body, vector FROM items WHERE current AND kind = "
                      "'knowledge' LIMIT ?", (n,)).fetchall()
    db.close()
    return [Record(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]


def _best(*runs: Callable[[], None]) -> list[float]:
    """Each run's best time of two, alternating (neither gains from the cache the other filled)."""
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(2):
        for i, run in enumerate(runs):
            t0 = time.perf_counter()
            run()
            times[i].append(time.perf_counter() - t0)
    return [min(t) for t in times]


@contextlib.contextmanager
def _stores(folder: Path) -> Iterator[list[tuple[str, str]]]:
    found = [("SQLite", str(folder / "reads.sqlite"))]
    try:
        from guimem.testing.postgres import temporary_postgres

        with temporary_postgres() as dsn:
            yield [*found, ("PostgreSQL (loopback)", dsn)]
    except RuntimeError as exc:  # no PostgreSQL installed: SQLite only, said
        print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
        yield found


def measure(records: list[Record], url: str) -> dict[str, float]:
    store = create_store(url)
    try:
        for start in range(0, len(records), 500):  # a transaction's locks are bounded on PostgreSQL
            with store.transaction():
                for rec in records[start:start + 500]:
                    store.put(rec)
        ids = [r.id for r in records]

        def batched() -> None:
            for start in range(0, len(ids), BATCH):
                store.get_many(ids[start:start + BATCH])

        def single() -> None:
            for item_id in ids:
                store.get(item_id)

        def parse() -> None:
            for rec in records:
                KnowledgeItem.model_validate_json(rec.body)

        b, s, p = _best(batched, single, parse)
        return {"batched_per_s": len(ids) / b, "single_per_s": len(ids) / s, "parse_per_s": len(ids) / p}
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000, help="items copied and read back")
    parser.add_argument("--size", type=int, default=100_000, help="the recall benchmark's stack store to copy from")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    args = parser.parse_args()
    records = _records(args.size, args.items)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, _stores(Path(tmp)) as stores:
        for name, url in stores:
            results[name] = measure(records, url)
    print(f"| store ({len(records):,} items) | batched reads/s | one read each /s | ratio | parse/s |")
    print("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['batched_per_s']:,.0f} | {r['single_per_s']:,.0f} | "
              f"{r['batched_per_s'] / r['single_per_s']:.1f}× | {r['parse_per_s']:,.0f} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
