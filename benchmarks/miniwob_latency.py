"""MiniWoB++ reset and step latency in headless Chromium (snapshot of the DOM included).

Also, per page, a snapshot read over WebDriver (``execute_script``) against the same snapshot over the browser's
DevTools (`guimem.envs.browser.DevToolsPage`, what the env uses), alternating, in one run: p50 of each and their
ratio, on the first screen of a few pages and on book-flight with its date picker open (48 elements).

Usage: python benchmarks/miniwob_latency.py [--episodes 60] [--transport-only]
"""

from __future__ import annotations

import argparse
import time

from _synthetic import percentiles

from guimem.agents.explorer import ExplorerPolicy
from guimem.envs.miniwob import _SNAPSHOT_FN, _SNAPSHOT_JS, MiniWoBEnv
from guimem.harness.episode import run_episode
from guimem.tasks import load_suite
from guimem.types import Action, ActionKind, Role, Task


def transports(env: MiniWoBEnv, repeat: int = 30) -> None:
    """The preview snapshot over WebDriver and over DevTools, alternating, per page."""
    import statistics

    def timed(read) -> float:  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        read()
        return (time.perf_counter() - start) * 1000

    print("| page | elements | WebDriver p50 ms | DevTools p50 ms | ratio |")
    print("|---|---:|---:|---:|---:|")
    for task_id, open_picker in [("enter-text", False), ("click-checkboxes", False),
                                 ("email-inbox-forward-nl", False), ("book-flight", True)]:
        obs = env.reset(Task(id=task_id, goal="", app="miniwob", seed=3))
        if open_picker:  # the date picker: the biggest screen of the default suite
            box = [e for e in obs.elements if e.role is Role.TEXTBOX][-1]
            obs = env.step(Action(kind=ActionKind.TAP, ref=box.ref)).observation
        web, dev = [], []
        for _ in range(repeat):
            web.append(timed(lambda: env._js(_SNAPSHOT_JS, True)))
            dev.append(timed(lambda: env._page_js(f"JSON.stringify({_SNAPSHOT_FN}.call(null, true))")))
        w, d = statistics.median(web), statistics.median(dev)
        print(f"| {task_id}{' (date picker open)' if open_picker else ''} | {len(obs.elements)} | {w:.1f} | {d:.1f} "
              f"| {w / d:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--transport-only", action="store_true", help="measure only the snapshot's transports")
    args = parser.parse_args()
    suite = load_suite("default")
    env = MiniWoBEnv()
    if args.transport_only:
        try:
            transports(env)
        finally:
            env.close()
        return
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
        transports(env)
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
