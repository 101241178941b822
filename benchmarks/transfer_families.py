"""Transfer against within-task memory, from two finished runs of one suite: Pass@k − none per method with
a 95 % task-clustered bootstrap CI, over every task and over the tasks that have no twin in the suite
(a twin's name differs only by ``-nodelay``, ``-popup`` or ``-easy``: a page that differs in timing, so a
figure carried by twins is not transfer between different pages), harm, and the share of the within-task
gain that transfer keeps.

Usage: python benchmarks/transfer_families.py WITHIN_RUN TRANSFER_RUN [--k 5] [--json]
(WITHIN_RUN: ``guimem eval --suite families``; TRANSFER_RUN: the same with ``--exclude-source-task``.)
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from guimem.harness.metrics import bootstrap_indices, pass_at, success_matrix
from guimem.harness.runfiles import EpisodeResult, RunDir, judged
from guimem.harness.transfermatrix import relation


def _units(results: list[EpisodeResult], keep: set[str] | None,
           order: list[tuple[str, int]] | None = None) -> list[tuple[str, int]]:
    """The (task, seed) units, in the suite's order when given (the order `guimem eval`'s summary resamples
    in, so the CIs agree with it), else sorted."""
    seen = {(r.task, r.seed) for r in results if keep is None or r.task in keep}
    return [u for u in order if u in seen] if order is not None else sorted(seen)


@dataclass(frozen=True)
class Delta:
    """Pass@k of ``none`` and a method (%) over some (task, seed) units, the paired Δ with its CI, and harm."""

    units: int
    none: float
    method: float
    delta: float
    ci: tuple[float, float]
    harmed: tuple[tuple[str, int, int], ...]

    def cell(self) -> str:
        return f"{self.delta:+5.1f} [{self.ci[0]:+.1f}, {self.ci[1]:+.1f}] h{len(self.harmed)}"


def delta(results: list[EpisodeResult], method: str, k: int, keep: set[str] | None = None,
          order: list[tuple[str, int]] | None = None) -> Delta:
    """``method`` against ``none`` on the tasks in ``keep`` (all when None)."""
    units = _units(results, keep, order)
    if not units:
        return Delta(0, 0.0, 0.0, 0.0, (0.0, 0.0), ())
    rounds = max(r.round for r in results) + 1
    base = pass_at(success_matrix([r for r in results if r.method == "none"], units, rounds), k).astype(float)
    mine = pass_at(success_matrix([r for r in results if r.method == method], units, rounds), k).astype(float)
    diffs = [float(np.mean(mine[i] - base[i])) for i in bootstrap_indices(units)]
    none_won = {(r.task, r.seed, r.round) for r in results if r.method == "none" and r.success}
    harm = sorted({(r.task, r.seed, r.round) for r in results if r.method == method and not r.success
                   and (r.task, r.seed, r.round) in none_won and (r.task, r.seed) in set(units)})
    pct = [round(100 * float(np.percentile(diffs, q)), 1) for q in (2.5, 97.5)]
    return Delta(len(units), round(100 * float(base.mean()), 1), round(100 * float(mine.mean()), 1),
                 round(100 * float((mine - base).mean()), 1), (pct[0], pct[1]), tuple(harm))


def kept(within: Delta, transfer: Delta) -> float | None:
    """The share of the within-task gain that transfer keeps (None without a within-task gain)."""
    return None if within.delta <= 0 else round(transfer.delta / within.delta, 2)


def untwinned(tasks: set[str]) -> set[str]:
    """The tasks with no twin among ``tasks``."""
    return {t for t in tasks if not any(o != t and relation(t, o) == "twin" for o in tasks)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("within", type=Path)
    parser.add_argument("transfer", type=Path)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    within, transfer = (judged(RunDir(p).results()) for p in (args.within, args.transfer))
    order = list(dict.fromkeys((e.task, e.seed) for e in RunDir(args.within).load_spec().suite.tasks))
    solo = untwinned({r.task for r in within})
    methods = sorted({r.method for r in within} - {"none"})
    rows = {m: {(form, part): delta(res, m, args.k, solo if part == "untwinned" else None, order)
                for form, res in (("within", within), ("transfer", transfer)) for part in ("all", "untwinned")}
            for m in methods}
    if args.json:
        print(json.dumps({"k": args.k, "untwinned_tasks": sorted(solo), "methods": {
            m: {f"{form}_{part}": asdict(d) for (form, part), d in row.items()}
            | {f"kept_{part}": kept(row[("within", part)], row[("transfer", part)]) for part in ("all", "untwinned")}
            for m, row in rows.items()}}, indent=1))
        return
    print(f"Pass@{args.k}; Δ vs none [95 % CI]; h = harm; untwinned = the {len(solo)} tasks with no twin in the suite")
    print(f"{'method':24} {'within (all)':>26} {'transfer (all)':>26} {'kept':>5}   "
          f"{'within (untwinned)':>26} {'transfer (untwinned)':>26} {'kept':>5}")
    for m, row in rows.items():
        cells = []
        for part in ("all", "untwinned"):
            cells += [row[("within", part)].cell().rjust(26), row[("transfer", part)].cell().rjust(26)]
            share = kept(row[("within", part)], row[("transfer", part)])
            cells.append(("—" if share is None else f"{share:.2f}").rjust(5))
        print(f"{m:24} {cells[0]} {cells[1]} {cells[2]}   {cells[3]} {cells[4]} {cells[5]}")


if __name__ == "__main__":
    main()
