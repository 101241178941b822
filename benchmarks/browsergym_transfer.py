"""guimem's own `miniwob` env vs the `browsergym` env on the demo suite, and memory carried from one to the other.

1. `guimem eval` on the `demo` suite with `--env miniwob` and on `bgym-miniwob` (the same 24 entries) with
   `--env browsergym`, R rounds, explorer, none/steer/stack (resumable: rerun to finish a run).
2. Pass@k of both, and the step latency of each env (p50 of the env part of a step, from the traces).
3. Transfer: every method's memory learned on the `miniwob` env (a copy of its store; nothing is written
   back) is used, frozen, for one episode of every entry on the `browsergym` env; success and items
   injected are compared with `none` on the same entries.

BrowserGym seeds its pages its own way, so a seed gives another instance in each env: the transfer is
across instances as well as envs.

Usage: python benchmarks/browsergym_transfer.py [--rounds 3] [--out runs/bench-browsergym] [--workers 2]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from guimem.agents.explorer import ExplorerPolicy
from guimem.envs.browsergym import BrowserGymEnv
from guimem.harness.episode import EpisodeSettings, run_episode
from guimem.harness.metrics import summarise
from guimem.harness.runfiles import RunDir
from guimem.memory.base import SkillRunner
from guimem.memory.factory import open_memory
from guimem.settings import GuimemSettings
from guimem.tasks import load_suite

METHODS = ("steer", "stack")


def _eval(out: Path, suite: str, env: str, rounds: int, workers: int) -> None:
    cmd = [str(Path(sys.executable).with_name("guimem")), "eval", "--suite", suite, "--env", env, "--rounds",
           str(rounds), "--methods", ",".join(METHODS), "--workers", str(workers), "--out", str(out), "--json"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def _env_step_ms(run: RunDir, rounds: int) -> float:
    steps = [s.timings_ms.get("env", 0.0) for m in ("none", *METHODS) for r in range(rounds)
             for t in run.readable_traces(m, r).values() for s in t.steps]
    return statistics.median(steps) if steps else float("nan")


def _transfer(source: RunDir, rounds: int) -> dict[str, tuple[int, int, int]]:
    """method -> (successes, episodes, episodes with items injected on some step)."""
    suite = load_suite("bgym-miniwob")
    settings = GuimemSettings()
    env = BrowserGymEnv()
    out: dict[str, tuple[int, int, int]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for method in ("none", *METHODS):
                copy = Path(tmp) / f"{method}.sqlite"
                shutil.copy(source.store_file(method), copy)
                memory = open_memory(method, str(copy), settings)
                wins = shown = 0
                for entry in suite.tasks:
                    task = entry.to_task("browsergym")
                    runner = memory.run_skill if isinstance(memory, SkillRunner) else None
                    traj = run_episode(env, ExplorerPolicy(), task, memory=memory, skill_runner=runner,
                                       settings=EpisodeSettings(max_steps=entry.max_steps or 8), round_index=rounds)
                    wins += traj.outcome.success
                    shown += any(s.injection.items for s in traj.steps)
                memory.close()
                out[method] = (wins, len(suite.tasks), shown)
    finally:
        env.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("runs/bench-browsergym"))
    args = parser.parse_args()
    runs = {"miniwob": args.out / "miniwob", "browsergym": args.out / "browsergym"}
    for env, out in runs.items():
        _eval(out, "demo" if env == "miniwob" else "bgym-miniwob", env, args.rounds, args.workers)
    summaries = {env: summarise(RunDir(out).load_spec(), RunDir(out).results(), RunDir(out))
                 for env, out in runs.items()}
    ks = range(1, args.rounds + 1)
    print(f"Pass@k (%), demo's 24 entries, {args.rounds} rounds, explorer")
    print("| env | method | " + " | ".join(f"P@{k}" for k in ks) + " | tok/step |")
    print("|---|---|" + "---|" * (len(ks) + 1))
    for env, summary in summaries.items():
        for method in ("none", *METHODS):
            m = summary.methods[method]
            cells = " | ".join(f"{100 * m.pass_at_k[str(k)]:.1f}" for k in ks)
            per_step = m.injected_tokens_total / m.steps_total if m.steps_total else 0.0
            print(f"| {env} | {method} | {cells} | {per_step:.1f} |")
    step = {env: _env_step_ms(RunDir(out), args.rounds) for env, out in runs.items()}
    print(f"env step p50: miniwob {step['miniwob']:.0f} ms, browsergym {step['browsergym']:.0f} ms "
          f"(browsergym / miniwob = {step['browsergym'] / step['miniwob']:.1f}x)")
    print("transfer: memory learned on the miniwob env, used frozen for one episode per entry on browsergym")
    for method, (wins, n, shown) in _transfer(RunDir(runs["miniwob"]), args.rounds).items():
        print(f"  {method:>6}: success {wins}/{n} ({100 * wins / n:.1f} %), items injected in {shown}/{n} episodes")


if __name__ == "__main__":
    main()
