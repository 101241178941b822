"""The recall time the agent waits for, with and without speculative screen embedding, in a real MiniWoB++ eval.

Two evaluations of one suite run side by side (``--workers 1`` each, so both see the same load): one with
``--speculate`` (the env previews the screen it will return while the page settles, and memory embeds it on a
background thread), one with ``--no-speculate``. From their traces, per method, over the steps where memory
had something to show (the injection has items) and, apart, the steps where it had nothing: the recall time
the agent waited for (``Step.timings_ms["recall"]``), p50 and p95, and the ratio of the two runs. Then the
check that speculation changed nothing but time: every episode's actions and injected texts are the same in
both runs, and so are Pass@k and tokens.

Usage: python benchmarks/speculative_recall.py [--suite default] [--rounds 3] [--methods graph,skills,stack]
       [--out /tmp/spec-bench]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

from _synthetic import percentiles

from guimem.harness.runfiles import RunDir

GUIMEM = str(Path(sys.executable).with_name("guimem"))


def _run(out: Path, suite: str, rounds: int, methods: str, speculate: bool) -> subprocess.Popen[bytes]:
    flag = "--speculate" if speculate else "--no-speculate"
    return subprocess.Popen([GUIMEM, "eval", "--suite", suite, "--rounds", str(rounds), "--methods", methods,
                             "--workers", "1", flag, "--out", str(out), "--json"], stdout=subprocess.DEVNULL)


def _episodes(run: RunDir, method: str, rounds: int) -> dict[tuple[str, int, int], list[tuple[str, str, float, bool]]]:
    """(task, seed, round) → each step's (action, injected text, recall ms, memory showed something)."""
    out = {}
    for r in range(rounds):
        for traj in run.readable_traces(method, r).values():
            key = (traj.task.id, traj.task.seed, r)
            out[key] = [(s.action.describe(), s.injection.text, s.timings_ms.get("recall", 0.0),
                         bool(s.injection.items)) for s in traj.steps]
    return out


def _summary(run: RunDir) -> dict[str, tuple[object, object]]:
    data = json.loads((run.path / "summary.json").read_text())
    return {m: (s["pass_at_k"], s["injected_tokens_total"]) for m, s in data["methods"].items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="default")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--methods", default="graph,skills,stack")
    parser.add_argument("--out", type=Path, default=Path("/tmp/spec-bench"))
    args = parser.parse_args()
    ahead_dir, plain_dir = args.out / "speculate", args.out / "no-speculate"
    procs = [_run(ahead_dir, args.suite, args.rounds, args.methods, True),
             _run(plain_dir, args.suite, args.rounds, args.methods, False)]
    if any(p.wait() != 0 for p in procs):
        sys.exit("an evaluation failed: see its run directory")
    ahead, plain = RunDir(ahead_dir), RunDir(plain_dir)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, suite {args.suite}, {args.rounds} rounds, "
          "explorer, --workers 1 each, both runs side by side")
    print("| method | steps with items | speculate p50 / p95 ms | without p50 / p95 ms | p50 ratio | p95/p50 "
          "| steps with nothing: p50 ms (both) | same actions and injections |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    same_summary = _summary(ahead) == _summary(plain)
    for method in [m.strip() for m in args.methods.split(",")]:
        a, p = _episodes(ahead, method, args.rounds), _episodes(plain, method, args.rounds)
        same = a.keys() == p.keys() and all([s[:2] for s in a[k]] == [s[:2] for s in p[k]] for k in a)
        with_a = [ms for steps in a.values() for _, _, ms, shown in steps if shown]
        with_p = [ms for steps in p.values() for _, _, ms, shown in steps if shown]
        none_a = [ms for steps in a.values() for _, _, ms, shown in steps if not shown]
        none_p = [ms for steps in p.values() for _, _, ms, shown in steps if not shown]
        if not with_a or not with_p:
            print(f"| {method} | 0 | – | – | – | – | – | {same} |")
            continue
        a50, a95 = percentiles(with_a)
        p50, p95 = percentiles(with_p)
        n50a, _ = percentiles(none_a) if none_a else (0.0, 0.0)
        n50p, _ = percentiles(none_p) if none_p else (0.0, 0.0)
        print(f"| {method} | {len(with_a)} | {a50:.2f} / {a95:.2f} | {p50:.2f} / {p95:.2f} | {a50 / p50:.2f} "
              f"| {a95 / a50:.2f} | {n50a:.2f} / {n50p:.2f} | {same} |")
    print(f"Pass@k and tokens the same in both runs: {same_summary}")


if __name__ == "__main__":
    main()
