"""Episodes per minute on `demo`: --workers 2 on one machine vs a local 3-node Ray cluster on PostgreSQL.

The machine has 2 cores, so a cluster of a head and two 1-CPU worker nodes on it cannot be faster than
two local worker processes: the figures show the overhead of Ray and of a shared PostgreSQL store,
not a speed-up. Measured in one run, every variant from empty memory on the same suite and rounds:

- local: ``--workers 2``, each method's memory in a SQLite file in the run folder;
- local + PostgreSQL: ``--workers 2 --store postgresql://…`` (a throw-away server on loopback);
- Ray, 3 nodes: ``--backend ray --address … --workers 2 --store postgresql://…`` on a head (no CPU)
  and two worker nodes (1 CPU, 100 MB object store each), every node its own process tree on 127.0.0.1.

Each run's Pass@k must equal the others' (same episodes, same memory snapshots): the script says so.

Usage: python benchmarks/cluster_throughput.py [--suite demo] [--rounds 2] [--json F]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GUIMEM = [sys.executable, "-m", "guimem.cli"]
METHODS = "graph,skills,steer,stack"


def run(out: Path, suite: str, rounds: int, extra: list[str]) -> dict[str, object]:
    cmd = [*GUIMEM, "eval", "--suite", suite, "--rounds", str(rounds), "--methods", METHODS, "--workers", "2",
           "--out", str(out), "--json", *extra]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[3:])} failed:\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout)
    episodes = len((out / "results.jsonl").read_text().splitlines())
    passk = {m: v["pass_at_k"] for m, v in summary["methods"].items()}
    return {"wall_s": wall, "episodes": episodes, "per_min": episodes / wall * 60, "pass_at_k": passk}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--suite", default="demo")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    from guimem.testing.postgres import temporary_postgres
    from guimem.testing.raynode import LoopbackCluster

    figures: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="guimem-cluster-") as tmp, temporary_postgres() as server:
        root = Path(tmp)
        figures["local, SQLite"] = run(root / "local", args.suite, args.rounds, [])
        figures["local, PostgreSQL"] = run(root / "local-pg", args.suite, args.rounds, ["--store", server])
        t0 = time.perf_counter()
        with LoopbackCluster(root / "cluster", workers=2, cpus=1, object_store_mb=100) as cluster:
            start = time.perf_counter() - t0
            figures["Ray 3 nodes, PostgreSQL"] = run(root / "ray", args.suite, args.rounds,
                                                     ["--backend", "ray", "--address", cluster.address,
                                                      "--store", server])
        figures["Ray 3 nodes, PostgreSQL"]["cluster_start_s"] = start
    base = float(figures["local, SQLite"]["per_min"])  # type: ignore[arg-type]
    print(f"| {args.suite}, {args.rounds} rounds, {METHODS} + none | episodes | wall | episodes/min | vs local |")
    print("|---|---|---|---|---|")
    for name, f in figures.items():
        print(f"| {name} | {f['episodes']} | {float(f['wall_s']):.0f} s | {float(f['per_min']):.0f} | "  # type: ignore[arg-type]
              f"{float(f['per_min']) / base:.2f}× |")  # type: ignore[arg-type]
    same = len({json.dumps(f["pass_at_k"], sort_keys=True) for f in figures.values()}) == 1
    print(f"Pass@k identical across the three: {'yes' if same else 'NO'}; cluster start "
          f"{float(figures['Ray 3 nodes, PostgreSQL']['cluster_start_s']):.1f} s")  # type: ignore[arg-type]
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
