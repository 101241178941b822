"""What the hostile-text screen costs clean pages: how often it fires on runs with no attacker (issue 32).

The defences fail closed: an episode whose screens carry text that addresses the agent is not learned from
(`guimem.memory.hostile.acted_on_hostile`), and a control page text directs the reader to is never replayed
(`directed`). On pages nobody planted anything on, every firing is memory lost for nothing. This reads the
traces of finished runs (any suite, any method) and counts, over every recorded screen: screens where the
text screen fires (`hostile_on_screen`), screens where the directed-text rule fires, and episodes the
round boundary would set aside; with the first texts found, so a person can judge them.

Writes nothing; prints a table (or ``--json``).

Usage: python benchmarks/screen_cost.py RUN_DIR [RUN_DIR ...] [--json] [--examples 5]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from guimem.harness.runfiles import RunDir
from guimem.memory.hostile import acted_on_hostile, directed, hostile_on_screen


def cost(run: RunDir, examples: int) -> dict:
    """The screen's firings over every trace of one run folder."""
    screens = episodes = on_screen = on_directed = set_aside = 0
    found: list[str] = []
    for trace in sorted((run.path / "traces").glob("*/round-*.jsonl")):
        method, round_index = trace.parent.name, int(trace.stem.split("-")[1])
        for trajectory in run.readable_traces(method, round_index).values():
            episodes += 1
            goal = trajectory.task.goal
            for step in trajectory.steps:
                screens += 1
                hostile = hostile_on_screen(step.observation, goal)
                pointed = directed(step.observation, goal)
                on_screen += bool(hostile)
                on_directed += bool(pointed)
                for f in (*hostile, *pointed):
                    if len(found) < examples and str(f) not in found:
                        found.append(f"{trajectory.task.id}: {f}")
            set_aside += acted_on_hostile(trajectory) is not None
    return {"run": str(run.path), "episodes": episodes, "screens": screens, "screen_fires": on_screen,
            "directed_fires": on_directed, "episodes_set_aside": set_aside, "examples": found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (each holds run_spec.json and traces/)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--examples", type=int, default=5, help="texts found to print per run")
    args = parser.parse_args()
    rows = [cost(RunDir(p), args.examples) for p in args.runs]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| run | episodes | screens | text screen fires | directed fires | episodes set aside |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | {r['episodes']} | {r['screens']} | {r['screen_fires']} | {r['directed_fires']} "
              f"| {r['episodes_set_aside']} |")
    total = {k: sum(r[k] for r in rows) for k in ("episodes", "screens", "screen_fires", "directed_fires",
                                                  "episodes_set_aside")}
    print(f"| all | {total['episodes']} | {total['screens']} | {total['screen_fires']} | {total['directed_fires']} "
          f"| {total['episodes_set_aside']} |")
    for r in rows:
        for e in r["examples"]:
            print(f"- {r['run']}: {e}")


if __name__ == "__main__":
    main()
