"""MiniWoB++ reset and step latency in headless Chromium (snapshot of the DOM included).

Usage: python benchmarks/miniwob_latency.py [--episodes 60]
"""

from __future__ import annotations

import argparse
import time

from _synthetic import percentiles

from guimem.agents.explorer import ExplorerPolicy
from guimem.envs.miniwob import MiniWoBEnv
from guimem.harness.episode import run_episode
from guimem.tasks import load_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=60)
    args = parser.parse_args()
    suite = load_suite("default")
    env = MiniWoBEnv()
    start = time.perf_counter()
    env.reset(suite.tasks[0].to_task("miniwob"))
    launch = time.perf_counter() - start
    resets, steps, envs = [], [], []
    try:
        for i in range(args.episodes):
            task = suite.tasks[i % len(suite.tasks)].to_task("miniwob")
            start = time.perf_counter()
            env.reset(task)
            resets.append((time.perf_counter() - start) * 1000)
            traj = run_episode(env, ExplorerPolicy(), task)
            envs += [s.timings_ms["env"] for s in traj.steps]
            steps.append(len(traj.steps))
    finally:
        env.close()
    r50, r95 = percentiles(resets)
    s50, s95 = percentiles(envs)
    print(f"browser launch + first task page: {launch:.2f} s")
    print(f"reset (same or new task page, seeded, timer lifted, first snapshot): p50 {r50:.1f} ms, p95 {r95:.1f} ms "
          f"({len(resets)} resets)")
    print(f"step (action + {30} ms settle + snapshot): p50 {s50:.1f} ms, p95 {s95:.1f} ms ({len(envs)} steps)")


if __name__ == "__main__":
    main()
