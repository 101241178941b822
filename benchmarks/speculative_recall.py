"""The recall time the agent waits for, with and without speculative screen embedding, in a real MiniWoB++ eval.

Two evaluations of one suite run side by side (``--workers 1`` each, so both see the same load): one as
``guimem eval`` runs by default (the env previews the screen it will return while the page settles, and memory
embeds it on a background thread), one with ``--no-speculate``. From their traces, per method, over the steps
where memory had something to show (the injection has items) and, apart, the steps where it had nothing: the recall time
the agent waited for (``Step.timings_ms["recall"]``), p50 and p95, and the ratio of the two runs. Then the
check that speculation changed nothing but time: every episode's actions and injected texts are the same in
both runs (left out: tasks whose episodes differ between the runs without memory too, the env's own timing,
e.g. `book-flight`'s datepicker), and so is Pass@k.

Usage: python benchmarks/speculative_recall.py [--suite default] [--rounds 3] [--methods graph,skills,stack]
       [--out /tmp/spec-bench]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from _synthetic import percentiles

from guimem.harness.runfiles import RunDir

GUIMEM = str(Path(sys.executable).with_name("guimem"))


def _run(out: Path, suite: str, rounds: int, methods: str, speculate: bool) -> subprocess.Popen[bytes]:
    flag = [] if speculate else ["--no-speculate"]
    return subprocess.Popen([GUIMEM, "eval", "--suite", suite, "--rounds", str(rounds), "--methods", methods,
                             "--workers", "1", *flag, "--out", str(out), "--json"], stdout=subprocess.DEVNULL)


Steps = dict[tuple[str, int, int], list[tuple[str, str, float, bool, float, float]]]


def _episodes(run: RunDir, methods: list[str], rounds: int) -> dict[str, Steps]:
    """Per method, (task, seed, round) → each step's (action, injected text, recall ms, memory showed something,
    ms of it spent computing or waiting for embeddings, the env's ms: where the preview's work went)."""
    out: dict[str, Steps] = {m: {} for m in methods}
    for method in methods:
        for r in range(rounds):
            for traj in run.readable_traces(method, r).values():
                out[method][(traj.task.id, traj.task.seed, r)] = [
                    (s.action.describe(), s.injection.text, s.timings_ms.get("recall", 0.0), bool(s.injection.items),
                     s.timings_ms.get("embed", 0.0), s.timings_ms.get("env", 0.0)) for s in traj.steps]
    return out


def _summary(run: RunDir) -> dict[str, object]:
    data = json.loads((run.path / "summary.json").read_text())
    return {m: s["pass_at_k"] for m, s in data["methods"].items()}


def _same(a: Steps, b: Steps, skip: set[str]) -> int:
    """Episodes (outside the tasks in ``skip``) whose actions or injected texts differ."""
    return sum(1 for k in a.keys() | b.keys() if k[0] not in skip and
               [s[:2] for s in a.get(k, [])] != [s[:2] for s in b.get(k, [])])


def _row(label: str, values: list[float]) -> str:
    if not values:
        return f"{label}: –"
    p50, p95 = percentiles(values)
    return f"{p50:.2f} / {p95:.2f} ({len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="default")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--methods", default="graph,skills,stack")
    parser.add_argument("--out", type=Path, default=Path("/tmp/spec-bench"), help="a new directory")
    args = parser.parse_args()
    ahead_dir, plain_dir = args.out / "speculate", args.out / "no-speculate"
    if args.out.exists():
        sys.exit(f"{args.out} exists: give a new --out (a run directory resumes, and would report its old traces)")
    procs = [_run(ahead_dir, args.suite, args.rounds, args.methods, True),
             _run(plain_dir, args.suite, args.rounds, args.methods, False)]
    if any(p.wait() != 0 for p in procs):
        sys.exit("an evaluation failed: see its run directory")
    methods = [m.strip() for m in args.methods.split(",")]
    a = _episodes(RunDir(ahead_dir), ["none", *methods], args.rounds)
    p = _episodes(RunDir(plain_dir), ["none", *methods], args.rounds)
    # the env's own nondeterminism: tasks whose episodes differ between the two runs without memory
    skip = {k[0] for k in a["none"].keys() | p["none"].keys()
            if [s[:2] for s in a["none"].get(k, [])] != [s[:2] for s in p["none"].get(k, [])]}
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at the end; suite "
          f"{args.suite}, {args.rounds} rounds, explorer, --workers 1 each, both runs side by side")
    print("Recall the agent waited for, ms, p50 / p95 (steps), over the steps where memory showed items; cold: the "
          "steps whose recall embedded the screen in the run without speculation (`timings_ms.embed` > 0)")
    print("| method | all, speculate | all, without | cold, speculate | cold, without | cold p50 ratio "
          "| nothing shown (both) | env step p50 (both) | episodes that differ |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for method in methods:
        # cold: the step embedded its screen in the run without speculation (paired by task, seed, round, step)
        cold = {(k, i) for k, steps in p[method].items() for i, step in enumerate(steps) if step[4] > 0}

        def pick(steps: Steps, shown: bool, only: set[tuple[tuple[str, int, int], int]] | None = None) -> list[float]:
            return [step[2] for k, episode in steps.items() for i, step in enumerate(episode)
                    if step[3] == shown and (only is None or (k, i) in only)]

        ca, cp = pick(a[method], True, cold), pick(p[method], True, cold)
        ratio = f"{percentiles(ca)[0] / percentiles(cp)[0]:.2f}" if ca and cp else "–"
        nothing = f"{_row('', pick(a[method], False))} · {_row('', pick(p[method], False))}"
        env_a = [step[5] for episode in a[method].values() for step in episode]
        env_p = [step[5] for episode in p[method].values() for step in episode]
        envs = f"{percentiles(env_a)[0]:.1f} · {percentiles(env_p)[0]:.1f}" if env_a and env_p else "–"
        print(f"| {method} | {_row('', pick(a[method], True))} | {_row('', pick(p[method], True))} | {_row('', ca)} "
              f"| {_row('', cp)} | {ratio} | {nothing} | {envs} | {_same(a[method], p[method], skip)} |")
    print(f"tasks left out of the comparison (their episodes differ without memory too): {sorted(skip) or 'none'}")
    same = _summary(RunDir(ahead_dir)) == _summary(RunDir(plain_dir))
    print(f"Pass@k the same in both runs: {same}")


if __name__ == "__main__":
    main()
