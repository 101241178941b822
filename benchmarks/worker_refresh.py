"""Per-round worker refresh at 100k items, 2 workers: reopening the memory (before) vs catching up (after).

An evaluation's workers see each round's memory snapshot. Before, a worker reopened the memory at every
round: on another machine its index cache is stale after the boundary, so it read every item again
(``reopen, own cache``); on the main's machine it read the cache the main had just written (``reopen,
main's cache``). After, it reads only what the boundary wrote (`Refreshable.refresh`, by store position).

Measured on this machine in one run, per method: a store of N items (the recall benchmark's replicated
stores, cached under ~/.cache/guimem/bench), copied; 2 worker processes open it, each with its own
cache folder (as on other nodes); the main process commits one round learned from a real demo
evaluation's round-2 episodes of that method; then each worker times ``refresh()``, and a reopen from
its own (stale) cache and from the main's fresh cache, and checks that refreshed and reopened recall
the same items on recorded screens.

Usage: python benchmarks/worker_refresh.py [--size 100000] [--methods graph,skills,steer] [--json F]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import recall_end_to_end as bench


def _open(method: str, path: Path, cache: Path):  # type: ignore[no-untyped-def]
    from guimem.memory.factory import open_memory
    from guimem.settings import GuimemSettings

    settings = GuimemSettings()
    settings.cache_dir = cache
    return open_memory(method, str(path), settings, namespace=method)


def _queries(n: int = 6):  # type: ignore[no-untyped-def]
    from guimem.memory.base import RecallQuery
    from guimem.types import Trajectory

    trajs = [Trajectory.model_validate_json(x) for x in bench.screens().read_text().splitlines()][:n]
    return [RecallQuery(task=t.task, observation=t.observations[0]) for t in trajs]


def _view(memory, queries) -> list[list[str]]:  # type: ignore[no-untyped-def]
    return [[i.id for i in memory.recall(q).items] for q in queries]


def worker(method: str, path: str, own: str, main_cache: str, ready, go, out) -> None:  # type: ignore[no-untyped-def]
    queries = _queries()
    memory = _open(method, Path(path), Path(own))
    ready.set()
    go.wait()
    t0 = time.perf_counter()
    ok = memory.refresh()
    refresh_s = time.perf_counter() - t0
    refreshed = _view(memory, queries)
    t0 = time.perf_counter()
    again = _open(method, Path(path), Path(own))  # its own cache predates the boundary: a full read
    reopen_own_s = time.perf_counter() - t0
    same = _view(again, queries) == refreshed
    again.close()
    t0 = time.perf_counter()
    local = _open(method, Path(path), Path(main_cache))  # the cache the main wrote after the boundary
    reopen_main_s = time.perf_counter() - t0
    same = same and _view(local, queries) == refreshed
    local.close()
    memory.close()
    out.put({"refreshed": ok, "refresh_s": refresh_s, "reopen_own_s": reopen_own_s,
             "reopen_main_s": reopen_main_s, "same_recall": same})


def measure(method: str, size: int, workers: int = 2) -> dict[str, object]:
    from guimem.types import read_trajectories

    source = bench.build_store(method, size)
    with tempfile.TemporaryDirectory(prefix="guimem-refresh-") as tmp:
        root = Path(tmp)
        path = root / "store.sqlite"
        shutil.copy(source, path)
        main = _open(method, path, root / "main")
        ctx = mp.get_context("spawn")
        ready, go, out = [ctx.Event() for _ in range(workers)], ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=worker, args=(method, str(path), str(root / f"w{i}"), str(root / "main"),
                                                  ready[i], go, out)) for i in range(workers)]
        for p in procs:
            p.start()
        for e in ready:
            e.wait()
        trajs = read_trajectories(bench.templates() / "traces" / method / "round-1.jsonl")
        t0 = time.perf_counter()
        main.commit_round(main.committed_round() + 1, trajs)
        commit_s = time.perf_counter() - t0
        go.set()
        results = [out.get() for _ in procs]
        for p in procs:
            p.join()
        main.close()
    worst = {k: max(float(r[k]) for r in results) for k in ("refresh_s", "reopen_own_s", "reopen_main_s")}
    return {"size": size, "workers": workers, "episodes": len(trajs), "commit_s": commit_s, **worst,
            "all_refreshed": all(r["refreshed"] for r in results),
            "same_recall": all(r["same_recall"] for r in results)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--methods", default="graph,skills,steer")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    figures = {}
    print("| method @size | round's episodes | refresh (after) | reopen, own cache (before, other node) | "
          "reopen, main's cache (before, same machine) | before/after | same recall |")
    print("|---|---|---|---|---|---|---|")
    for method in [m for m in args.methods.split(",") if m]:
        r = measure(method, args.size)
        figures[method] = r
        ratio = float(r["reopen_own_s"]) / max(float(r["refresh_s"]), 1e-9)  # type: ignore[arg-type]
        print(f"| {method} @{args.size:,} | {r['episodes']} | {1000 * r['refresh_s']:.1f} ms | "  # type: ignore[operator]
              f"{r['reopen_own_s']:.2f} s | {r['reopen_main_s']:.2f} s | {ratio:,.0f}× | "
              f"{'yes' if r['same_recall'] and r['all_refreshed'] else 'NO'} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
