"""Where a round's episodes run: here, in local worker processes (one browser each), or on Ray.

Within a round every episode reads the same memory snapshot and learning waits for the round
boundary, so the episodes of a round are independent and can run in any order, anywhere.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from guimem.harness.jobs import EpisodeJob, Workbench
from guimem.harness.processes import stop_descendants
from guimem.harness.runfiles import EpisodeResult, EvalSpec, RunDir
from guimem.settings import GuimemSettings
from guimem.types import Trajectory

log = logging.getLogger(__name__)
Finished = tuple[EpisodeResult, Trajectory]


class Executor(Protocol):
    """Runs a batch of jobs of one (method, round) and yields them as they finish."""

    def run(self, jobs: list[EpisodeJob]) -> Iterator[Finished]:
        """Yield (result, trajectory) per job, in any order."""
        ...

    def close(self, abort: bool = False) -> None:
        """Release workers and their browsers (``abort``: the run is stopping on an error or a signal)."""
        ...


class SequentialExecutor:
    """One process, one browser (the main process's workbench)."""

    def __init__(self, bench: Workbench) -> None:
        self.bench = bench

    def run(self, jobs: list[EpisodeJob]) -> Iterator[Finished]:
        """Run jobs in order."""
        for job in jobs:
            yield self.bench.run(job)

    def close(self, abort: bool = False) -> None:
        """Nothing to release (the main workbench is closed by its owner)."""


_BENCH: Workbench | None = None


def _close_bench() -> None:
    global _BENCH
    bench, _BENCH = _BENCH, None
    if bench is not None:
        bench.close()


def _on_sigterm(signum: int, frame: object) -> None:
    # The pool terminates its workers with SIGTERM; close the browser before going, or it outlives us
    # (and stop what is left, such as a browser that was still starting).
    try:
        _close_bench()
    finally:
        stop_descendants(grace_s=3.0)
        os._exit(128 + signum)


def _init_worker(spec_json: str, run_path: str, settings_json: str) -> None:
    global _BENCH  # one workbench (browser, embedder) per worker process, built once
    from multiprocessing import util
    from pathlib import Path

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the main process, which stops the pool
    signal.signal(signal.SIGTERM, _on_sigterm)
    _BENCH = Workbench(EvalSpec.model_validate_json(spec_json), RunDir(Path(run_path)),
                       GuimemSettings.model_validate_json(settings_json))
    util.Finalize(None, _close_bench, exitpriority=100)  # a normal worker exit closes the browser too


def _work(job: EpisodeJob) -> tuple[str, str]:
    assert _BENCH is not None
    result, traj = _BENCH.run(job, fresh_memory=True)
    return result.model_dump_json(), traj.model_dump_json()


class ProcessExecutor:
    """``--workers N``: N local processes, each with its own browser and a read-only view of memory."""

    def __init__(self, spec: EvalSpec, run_dir: RunDir, settings: GuimemSettings, workers: int) -> None:
        ctx = mp.get_context("spawn")
        self._pool = ctx.Pool(workers, initializer=_init_worker,
                              initargs=(spec.model_dump_json(), str(run_dir.path), settings.model_dump_json()))

    def run(self, jobs: list[EpisodeJob]) -> Iterator[Finished]:
        """Run jobs in parallel; yield as they finish."""
        for result_json, traj_json in self._pool.imap_unordered(_work, jobs):
            yield EpisodeResult.model_validate_json(result_json), Trajectory.model_validate_json(traj_json)

    def close(self, abort: bool = False) -> None:
        """Stop the workers; each closes its browser as it exits (on SIGTERM too, when aborting)."""
        if abort:
            self._pool.terminate()
        else:
            self._pool.close()
        self._pool.join()


class RayExecutor:
    """``--backend ray``: episodes as Ray tasks on a local or existing cluster (``ray.init(address=...)``)."""

    def __init__(self, spec: EvalSpec, run_dir: RunDir, settings: GuimemSettings, workers: int,
                 address: str | None = None) -> None:
        try:
            import ray
        except ImportError as exc:
            from guimem.errors import MissingDependencyError

            raise MissingDependencyError("ray", "ray") from exc
        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no telemetry, and no network here anyway
            ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                     log_to_driver=False)
        args = (spec.model_dump_json(), str(run_dir.path), settings.model_dump_json())
        actor: Any = ray.remote(num_cpus=1)(_RayWorker)
        self._actors: list[Any] = [actor.remote(*args) for _ in range(workers)]

    def run(self, jobs: list[EpisodeJob]) -> Iterator[Finished]:
        """Spread jobs over the actors round-robin; yield as they finish."""
        ray = self._ray
        pending = [self._actors[i % len(self._actors)].run.remote(job) for i, job in enumerate(jobs)]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            result_json, traj_json = ray.get(ready[0])
            yield EpisodeResult.model_validate_json(result_json), Trajectory.model_validate_json(traj_json)

    def close(self, abort: bool = False) -> None:
        """Close the actors' browsers, stop the actors (and the local Ray instance if this executor started it)."""
        try:
            self._ray.get([a.close.remote() for a in self._actors], timeout=60)
        except Exception:  # an actor that is already gone has nothing left to close
            log.warning("a Ray worker did not close cleanly", exc_info=True)
        for a in self._actors:
            self._ray.kill(a)
        if self._owns:
            self._ray.shutdown()


class _RayWorker:
    def __init__(self, spec_json: str, run_path: str, settings_json: str) -> None:
        _init_worker(spec_json, run_path, settings_json)

    def run(self, job: EpisodeJob) -> tuple[str, str]:
        return _work(job)

    def close(self) -> None:
        _close_bench()


def make_executor(backend: str, workers: int, bench: Workbench, spec: EvalSpec, run_dir: RunDir,
                  settings: GuimemSettings) -> Executor:
    """The executor for ``--backend`` and ``--workers``."""
    builders: dict[str, Callable[[], Executor]] = {
        "local": lambda: SequentialExecutor(bench) if workers <= 1 else ProcessExecutor(spec, run_dir, settings,
                                                                                         workers),
        "ray": lambda: RayExecutor(spec, run_dir, settings, workers),
    }
    if backend not in builders:
        from guimem.errors import UnknownBackendError

        raise UnknownBackendError("backend", backend, sorted(builders), [])
    return builders[backend]()
