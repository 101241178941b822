"""The explorer with no memory on a suite: per-task success rate over several policy seeds.

This is the baseline every memory method is measured against.

Usage: python benchmarks/explorer_baseline.py [--suite default] [--policy-seeds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

from guimem.agents.explorer import ExplorerPolicy
from guimem.envs.miniwob import MiniWoBEnv
from guimem.harness.episode import run_episode
from guimem.tasks import load_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="default")
    parser.add_argument("--policy-seeds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    suite = load_suite(args.suite)
    env = MiniWoBEnv()
    wins: dict[str, list[bool]] = defaultdict(list)
    try:
        for policy_seed in range(args.policy_seeds):
            policy = ExplorerPolicy(seed=policy_seed)
            for entry in suite.tasks:
                traj = run_episode(env, policy, entry.to_task("miniwob"))
                wins[entry.task].append(traj.outcome.success)
    finally:
        env.close()
    rates = {task: sum(w) / len(w) for task, w in wins.items()}
    overall = sum(sum(w) for w in wins.values()) / sum(len(w) for w in wins.values())
    if args.json:
        print(json.dumps({"overall": overall, "per_task": rates}, indent=2))
        return
    n = args.policy_seeds * len(suite.tasks) // len(rates)
    print(f"explorer, no memory, suite {args.suite}: {overall:.1%} over {sum(len(w) for w in wins.values())} "
          f"episodes ({n} per task: task seeds x {args.policy_seeds} policy seeds)")
    for task, rate in rates.items():
        print(f"  {task:<26} {rate:6.1%}")


if __name__ == "__main__":
    main()
