"""The lifelong evaluation: the same ordered (task, seed) list for R rounds, every method from an
empty store, ``none`` always alongside; learning applied at each round boundary.

Resumable: ``results.jsonl`` lines commit episodes, and a round boundary commits in the method's
store (meta ``boundary``) together with everything it learned, so a rerun on an interrupted
directory neither repeats nor loses an episode or a boundary.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from guimem.harness.executors import make_executor
from guimem.harness.jobs import EpisodeJob, Workbench
from guimem.harness.metrics import Summary, summarise
from guimem.harness.report import write_report
from guimem.harness.runfiles import EpisodeResult, EvalSpec, RunDir
from guimem.settings import GuimemSettings

log = logging.getLogger(__name__)
Progress = Callable[[EpisodeResult], None]


def with_slots(spec: EvalSpec) -> list[tuple[int, int]]:
    """(suite index, slot) pairs: the slot counts earlier occurrences of the same task in the suite."""
    seen: dict[str, int] = {}
    out = []
    for i, entry in enumerate(spec.suite.tasks):
        out.append((i, seen.get(entry.task, 0)))
        seen[entry.task] = seen.get(entry.task, 0) + 1
    return out


def methods_of(requested: list[str]) -> list[str]:
    """The requested methods with ``none`` first (it always runs, as the control)."""
    return ["none", *[m for m in dict.fromkeys(requested) if m != "none"]]


@dataclass
class Evaluation:
    """One evaluation run in one directory.

    Args:
        spec: What to run.
        out: The run directory (resumed if it holds the same spec).
        settings: Process settings (browser, embedder).
        progress: Called after every finished episode.
        stop_after: Stop (as if interrupted) after this many new episodes; for tests and smoke runs.
    """

    spec: EvalSpec
    out: Path
    settings: GuimemSettings
    progress: Progress | None = None
    stop_after: int | None = None

    def run(self) -> Summary | None:
        """Run (or resume) every round; return the summary, or None when stopped early."""
        run_dir = RunDir(self.out)
        self.spec = run_dir.start(self.spec)
        done = {r.key for r in run_dir.results()}
        bench = Workbench(self.spec, run_dir, self.settings)
        executor = make_executor(self.spec.backend, self.spec.workers, bench, self.spec, run_dir, self.settings)
        new = 0
        try:
            for round_index in range(self.spec.rounds):
                for method in self.spec.methods:
                    if self._boundary_done(bench, method, round_index):
                        continue
                    jobs = [EpisodeJob(method, round_index, slot, self.spec.suite.tasks[i])
                            for i, slot in with_slots(self.spec)
                            if (method, round_index, self.spec.suite.tasks[i].task,
                                self.spec.suite.tasks[i].seed) not in done]
                    for result, traj in executor.run(jobs):
                        run_dir.record(result, traj)
                        done.add(result.key)
                        new += 1
                        if self.progress:
                            self.progress(result)
                        if self.stop_after is not None and new >= self.stop_after:
                            return None
                    self._boundary(bench, run_dir, method, round_index)
        finally:
            executor.close()
            bench.close()
        return self.finish(run_dir)

    def finish(self, run_dir: RunDir) -> Summary:
        """Write ``summary.json`` and ``report.html``."""
        summary = summarise(self.spec, run_dir.results(), run_dir)
        (run_dir.path / "summary.json").write_text(summary.model_dump_json(indent=2))
        write_report(run_dir, self.spec, summary)
        return summary

    def _boundary_done(self, bench: Workbench, method: str, round_index: int) -> bool:
        run_dir = RunDir(self.out)
        if run_dir.snapshot(method, round_index) is not None:
            return True
        memory = bench.memory(method, round_index)
        kit = getattr(memory, "kit", None)
        committed = int(kit.store.meta_get("boundary") or -1) if kit is not None else -1
        if committed >= round_index:  # the boundary committed, its snapshot was not written yet
            run_dir.write_snapshot(method, round_index, memory.stats())
            return True
        return False

    def _boundary(self, bench: Workbench, run_dir: RunDir, method: str, round_index: int) -> None:
        """Learn from the round's episodes in suite order, consolidate, commit, snapshot."""
        results = [r for r in run_dir.results() if r.method == method and r.round == round_index]
        trajs = run_dir.trajectories(method, round_index, {r.episode_id for r in results})
        order = {(e.task, e.seed): i for i, e in enumerate(self.spec.suite.tasks)}
        ordered = sorted(results, key=lambda r: order.get((r.task, r.seed), 0))
        memory = bench.memory(method, round_index)
        kit = getattr(memory, "kit", None)
        if kit is None:
            run_dir.write_snapshot(method, round_index, memory.stats())
            return
        with kit.store.transaction():
            for r in ordered:
                if r.episode_id in trajs:
                    memory.learn(trajs[r.episode_id])
            memory.end_round()
            kit.store.meta_set("boundary", str(round_index))
        run_dir.write_snapshot(method, round_index, memory.stats())
        log.info("%s round %d boundary: %s", method, round_index, json.dumps(memory.stats()))
