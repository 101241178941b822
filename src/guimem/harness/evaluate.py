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
from dataclasses import dataclass, field
from pathlib import Path

from guimem.errors import RunStoppedError
from guimem.harness.executors import Executor, make_executor
from guimem.harness.factory import check_names
from guimem.harness.jobs import EpisodeJob, Workbench
from guimem.harness.metrics import Summary, summarise
from guimem.harness.report import write_report
from guimem.harness.runfiles import EpisodeResult, EvalSpec, RunDir, judged
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


class _Breaker:
    """Stops a run after ``limit`` consecutive infrastructure failures (a judged episode resets it)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.streak = 0

    def observe(self, result: EpisodeResult) -> None:
        """Count one finished episode.

        Raises:
            RunStoppedError: The streak reached the limit.
        """
        if result.infra is None:
            self.streak = 0
            return
        self.streak += 1
        if self.streak >= self.limit:
            raise RunStoppedError(f"stopped after {self.streak} infrastructure failures in a row "
                                  f"({result.infra.component} failed)", failures=self.streak,
                                  first=result.infra.message, suggestion=result.infra.suggestion)


@dataclass
class Evaluation:
    """One evaluation run in one directory.

    Args:
        spec: What to run.
        out: The run directory (resumed if it holds the same spec).
        settings: Process settings (browser, embedder).
        progress: Called after every finished episode.
        stop_after: Stop (as if interrupted) after this many new episodes; for tests and smoke runs.
        store_url: The shared store every method's memory lives in (``spec.store`` is its URL without the
            password); empty: one SQLite file per method in the run folder.
    """

    spec: EvalSpec
    out: Path
    settings: GuimemSettings
    progress: Progress | None = None
    stop_after: int | None = None
    store_url: str = ""
    _new: int = field(default=0, init=False)
    _breaker: _Breaker = field(default_factory=lambda: _Breaker(1), init=False, repr=False)

    def run(self) -> Summary | None:
        """Run (or resume) every round; return the summary, or None when stopped early.

        Raises:
            ConfigError: A part's name is unknown or its import path does not import, before the run
                folder is written.
            GuimemError: A part failed its preflight (browser, model endpoint), before any episode.
            RunStoppedError: The infrastructure kept failing during the run; what finished is kept
                and a rerun resumes (infrastructure failures are run again, never counted).
        """
        check_names(self.spec, self.settings)
        run_dir = RunDir(self.out)
        # a resumed run keeps its saved spec; where it runs (workers, backend, cluster) is this invocation's
        self.spec = run_dir.start(self.spec).model_copy(update={k: getattr(self.spec, k)
                                                                 for k in ("workers", "backend", "address")})
        done = {r.key for r in run_dir.results() if r.judged}
        bench = Workbench(self.spec, run_dir, self.settings, self.store_url)
        executor: Executor | None = None
        finished = False
        self._breaker = _Breaker(self.settings.run.infra_breaker)
        self._new = 0
        try:
            for line in bench.preflight():
                log.info("preflight: %s", line)
            if self.spec.workers > 1 or self.spec.backend != "local":
                bench.close_env()  # workers start their own browsers
            executor = make_executor(self.spec.backend, self.spec.workers, bench, self.spec, run_dir, self.settings,
                                     self.spec.address)
            for round_index in range(self.spec.rounds):
                for method in self.spec.methods:
                    if self._boundary_done(bench, method, round_index):
                        continue
                    jobs = [EpisodeJob(method, round_index, slot, self.spec.suite.tasks[i])
                            for i, slot in with_slots(self.spec)
                            if (method, round_index, self.spec.suite.tasks[i].task,
                                self.spec.suite.tasks[i].seed) not in done]
                    if self._run_jobs(executor, run_dir, jobs, done):
                        finished = True
                        return None
                    self._boundary(bench, run_dir, method, round_index)
            finished = True
        finally:
            if executor is not None:
                executor.close(abort=not finished)
            bench.close()
        return self.finish(run_dir)

    def _run_jobs(self, executor: Executor, run_dir: RunDir, jobs: list[EpisodeJob],
                  done: set[tuple[str, int, str, int]]) -> bool:
        """Run a round's jobs, retrying infrastructure failures; True when `stop_after` was reached.

        Raises:
            RunStoppedError: Too many infrastructure failures in a row, or some still failing
                after the retries (the round's boundary needs every episode).
        """
        failed: list[EpisodeJob] = []
        for attempt in range(self.settings.run.infra_retries + 1):
            failed = []
            by_key = {(j.method, j.round, j.entry.task, j.entry.seed): j for j in jobs}
            for result, traj in executor.run(jobs):
                run_dir.record(result, traj)
                self._breaker.observe(result)
                if result.infra is not None:
                    failed.append(by_key[result.key])
                    continue
                done.add(result.key)
                self._new += 1
                if self.progress:
                    self.progress(result)
                if self.stop_after is not None and self._new >= self.stop_after:
                    return True
            if not failed:
                return False
            log.warning("%d episodes failed for infrastructure reasons (attempt %d); running them again",
                        len(failed), attempt + 1)
            jobs = failed
        first = next(r for r in reversed(run_dir.results()) if r.infra is not None).infra
        assert first is not None
        raise RunStoppedError(f"{len(failed)} episodes of {jobs[0].method} round {jobs[0].round + 1} still fail "
                              f"after {self.settings.run.infra_retries} retries ({first.component} failed)",
                              failures=len(failed), first=first.message, suggestion=first.suggestion)

    def finish(self, run_dir: RunDir) -> Summary:
        """Write ``summary.json`` and ``report.html``."""
        summary = summarise(self.spec, run_dir.results(), run_dir)
        (run_dir.path / "summary.json").write_text(summary.model_dump_json(indent=2))
        write_report(run_dir, self.spec, summary, self.store_url)
        return summary

    def _boundary_done(self, bench: Workbench, method: str, round_index: int) -> bool:
        run_dir = RunDir(self.out)
        if run_dir.snapshot(method, round_index) is not None:
            return True
        memory = bench.memory(method, round_index)
        if memory.committed_round() >= round_index:  # the boundary committed, its snapshot was not written yet
            run_dir.write_snapshot(method, round_index, memory.stats())
            return True
        return False

    def _boundary(self, bench: Workbench, run_dir: RunDir, method: str, round_index: int) -> None:
        """Learn from the round's episodes in suite order, consolidate, commit, snapshot."""
        results = [r for r in judged(run_dir.results()) if r.method == method and r.round == round_index]
        trajs = run_dir.trajectories(method, round_index, {r.episode_id for r in results})
        order = {(e.task, e.seed): i for i, e in enumerate(self.spec.suite.tasks)}
        ordered = sorted(results, key=lambda r: order.get((r.task, r.seed), 0))
        memory = bench.memory(method, round_index)
        memory.commit_round(round_index, [trajs[r.episode_id] for r in ordered if r.episode_id in trajs])
        run_dir.write_snapshot(method, round_index, memory.stats())
        log.info("%s round %d boundary: %s", method, round_index + 1, json.dumps(memory.stats()))
