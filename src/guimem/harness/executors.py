"""Where a round's episodes run: here, in local worker processes (one browser each), or on Ray.

Within a round every episode reads the same memory snapshot and learning waits for the round
boundary, so the episodes of a round are independent and can run in any order, anywhere.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import multiprocessing as mp
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from guimem.errors import GuimemError
from guimem.harness.jobs import EpisodeJob, Workbench
from guimem.harness.runfiles import BACKENDS, EpisodeResult, EvalSpec, RunDir
from guimem.processes import adopt_orphans, orphans_adopted, stop_descendants
from guimem.settings import GuimemSettings
from guimem.types import Trajectory

log = logging.getLogger(__name__)
Finished = tuple[EpisodeResult, Trajectory]
LOCK_WAIT_S = 5.0
"""How long an aborting pool may wait for its task queue's lock before the lock is taken as a dead worker's."""
STOP_WAIT_S = 60.0
"""How long the workers then have to close their browsers and desktops and exit."""


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
    # (and stop what is left, such as a browser that was still starting; a process whose parent died, such as
    # Chromium when chromedriver quits first, is this worker's child by then: see _init_worker).
    try:
        _close_bench()
    finally:
        stop_descendants(grace_s=3.0)
        os._exit(128 + signum)


def _init_worker(spec_json: str, run_path: str, settings_json: str, store_url: str = "", threads: int = 0) -> None:
    global _BENCH  # one workbench (browser, embedder) per worker process, built once
    from multiprocessing import util
    from pathlib import Path

    if threads:  # the cores shared out, as Ray does for its actors: N workers × all cores' threads thrash
        os.environ["OMP_NUM_THREADS"] = str(threads)  # read by the e5 engine when it loads (results identical)

    adopt_orphans()  # for the worker's life: what its browser leaves when its driver dies stays in its tree
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the main process, which stops the pool
    signal.signal(signal.SIGTERM, _on_sigterm)
    _BENCH = Workbench(EvalSpec.model_validate_json(spec_json), RunDir(Path(run_path)),
                       GuimemSettings.model_validate_json(settings_json), store_url)
    util.Finalize(None, _close_bench, exitpriority=100)  # a normal worker exit closes the browser too
    try:  # its own model, loaded before its first episode (a worker runs no preflight)
        _BENCH.warm()
    except GuimemError as exc:  # the first recall that needs it reports the failure where it happens
        log.warning("worker could not load memory's embedding model ahead: %s", exc)


def _work(job: EpisodeJob) -> tuple[str, str]:
    assert _BENCH is not None
    try:
        result, traj = _BENCH.run(job, fresh_memory=True)
    except Exception as exc:
        raise sendable(exc) from None
    return result.model_dump_json(), traj.model_dump_json()


def sendable(exc: BaseException) -> BaseException:
    """``exc`` if the evaluation can re-make it from a pickle, else a `RuntimeError` that names it and carries its
    traceback. The pool re-makes a worker's error in its result thread: an error that cannot be re-made there
    kills that thread, and the run then waits for ever for the episode."""
    import pickle
    import traceback

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # any failure to re-make it is the reason to replace it
        where = "".join(traceback.format_exception(exc)).strip()
        return RuntimeError(f"a worker failed with {type(exc).__name__}: {exc}\n{where}")


class ProcessExecutor:
    """``--workers N``: N local processes, each with its own browser and a read-only view of memory."""

    def __init__(self, spec: EvalSpec, run_dir: RunDir, settings: GuimemSettings, workers: int,
                 store_url: str = "") -> None:
        ctx = mp.get_context("spawn")
        threads = max(1, (os.cpu_count() or 1) // workers)
        self._pool = ctx.Pool(workers, initializer=_init_worker,
                              initargs=(spec.model_dump_json(), str(run_dir.path), settings.model_dump_json(),
                                        store_url, threads))

    def run(self, jobs: list[EpisodeJob]) -> Iterator[Finished]:
        """Run jobs in parallel; yield as they finish."""
        for result_json, traj_json in self._pool.imap_unordered(_work, jobs):
            yield EpisodeResult.model_validate_json(result_json), Trajectory.model_validate_json(traj_json)

    def close(self, abort: bool = False) -> None:
        """Stop the workers; each closes its browser as it exits (on SIGTERM too, when aborting)."""
        if abort:
            terminate(self._pool)
        else:
            self._pool.close()
        self._pool.join()


def terminate(pool: Any) -> None:
    """``pool.terminate()``, which does not hang when a worker died holding the pool's task queue lock.

    An idle worker waits for work holding that lock; a SIGTERM sent to the whole process group (a CI timeout,
    ``kill -- -PGID``) kills it there, and ``Pool.terminate`` then waits for the lock forever (CPython takes it
    before it stops the workers). Past `LOCK_WAIT_S` the lock is released on the dead holder's behalf: the pool
    is being torn down, so nothing is read from the queue afterwards.
    """
    # a worker's browser orphaned as the worker dies comes here, and is stopped with the pool
    with orphans_adopted(stop_adopted=True):
        stopping = threading.Thread(target=pool.terminate, name="guimem-pool-terminate", daemon=True)
        stopping.start()
        stopping.join(LOCK_WAIT_S)
        if stopping.is_alive():
            log.warning("the worker pool waited %.0f s for its task queue's lock (a worker died holding it); "
                        "releasing it", LOCK_WAIT_S)
            with contextlib.suppress(ValueError, AttributeError):  # not held after all, or another Python's pool
                pool._inqueue._rlock.release()
            stopping.join(STOP_WAIT_S)
        if stopping.is_alive():
            log.error("the worker pool did not stop within %.0f s; stopping what is left", LOCK_WAIT_S + STOP_WAIT_S)
            stop_descendants(grace_s=3.0)


class RayExecutor:
    """``--backend ray``: episodes on Ray actors (one browser each), on a local instance or a cluster.

    With ``address`` the actors run wherever the cluster has CPUs; each reaches memory through the
    run's store, so on several machines the store must be a shared one (PostgreSQL). Jobs are handed
    out one at a time per actor; when an actor or its node dies, its episode runs again on another
    actor (a lost episode wrote nothing: results are recorded here, and learning waits for the round
    boundary, which this process runs), so nothing is counted twice.
    """

    def __init__(self, spec: EvalSpec, run_dir: RunDir, settings: GuimemSettings, workers: int,
                 address: str | None = None, store_url: str = "") -> None:
        ray_after_usearch = "ray._raylet" not in sys.modules and "usearch.compiled" in sys.modules
        try:
            import ray
        except ImportError as exc:
            from guimem.errors import MissingDependencyError

            raise MissingDependencyError("ray", "ray") from exc
        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns and ray_after_usearch:
            # usearch's wheel links its own C++ runtime and exports it: Ray loaded after it aborts the process
            # in `ray.init` (std::regex_error, usearch 2.26 / Ray 2.60), so say so instead
            from guimem.errors import ConfigError

            raise ConfigError("Ray cannot start in a process that loaded usearch (an HNSW index) before Ray: "
                              "its C++ runtime makes ray.init abort",
                              suggestion="run the evaluation in a new process (`guimem eval --backend ray`), "
                                         "or `import ray` before opening any memory")
        if self._owns:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no telemetry, and no network here anyway
            self._connect(address, workers)
        if address:  # another machine's folders: each node keeps its index cache where its own settings say
            settings = settings.model_copy(update={"cache_dir": None})
            workers = self._fit(workers)
        args = (spec.model_dump_json(), str(run_dir.path.resolve()), settings.model_dump_json(), store_url)
        actor: Any = ray.remote(num_cpus=1)(_RayWorker)
        self._actors: list[Any] = [actor.remote(*args) for _ in range(workers)]

    def _fit(self, workers: int) -> int:
        """As many actors as the cluster has CPUs for (an actor that can never be placed would hold its
        episode forever).

        Raises:
            ConfigError: The cluster offers no CPU.
        """
        cpus = int(self._ray.cluster_resources().get("CPU", 0))  # type: ignore[no-untyped-call]
        if cpus < 1:
            from guimem.errors import ConfigError

            raise ConfigError("the Ray cluster offers no CPU for episodes",
                              suggestion="add worker nodes (`ray start --address HEAD:PORT --num-cpus N`)")
        if workers > cpus:
            log.warning("the Ray cluster has %d CPUs: %d workers instead of %d", cpus, cpus, workers)
        return min(workers, cpus)

    def _connect(self, address: str | None, workers: int) -> None:
        ray = self._ray
        if not address:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            return
        host = address.removeprefix("ray://").rsplit(":", 1)[0]
        loopback = host in ("127.0.0.1", "localhost")
        try:
            with _loopback_driver(loopback):
                ray.init(address=address, log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            from guimem.errors import ConfigError

            raise ConfigError(f"cannot join the Ray cluster at {address}: {str(exc).splitlines()[0][:200]}",
                              suggestion="start it with `ray start --head` and give its address "
                                         "(host:6379), or leave --address out for a local Ray") from None

    def run(self, jobs: list[EpisodeJob]) -> Iterator[Finished]:
        """Hand each idle actor the next job; yield as they finish; re-run a lost actor's job elsewhere.

        Raises:
            RunStoppedError: Every actor was lost.
        """
        ray = self._ray
        from ray.exceptions import RayActorError, RayTaskError, WorkerCrashedError

        queue = list(reversed(jobs))
        running: dict[Any, tuple[Any, EpisodeJob]] = {}

        def feed(actor: Any) -> None:
            if queue:
                job = queue.pop()
                running[actor.run.remote(job)] = (actor, job)

        for actor in self._actors:
            feed(actor)
        while running:
            ready, _ = ray.wait(list(running), num_returns=1)
            actor, job = running.pop(ready[0])
            try:
                result_json, traj_json = ray.get(ready[0])
            except RayTaskError as exc:  # the episode code raised: a defect, not a lost worker
                raise exc.as_instanceof_cause() from None  # type: ignore[no-untyped-call]
            except (RayActorError, WorkerCrashedError) as exc:
                self._lose(actor, job, exc)
                queue.append(job)
                for other in [a for a in self._actors if not any(a is r[0] for r in running.values())]:
                    feed(other)
                continue
            yield EpisodeResult.model_validate_json(result_json), Trajectory.model_validate_json(traj_json)
            feed(actor)

    def _lose(self, actor: Any, job: EpisodeJob, exc: Exception) -> None:
        self._actors = [a for a in self._actors if a is not actor]
        log.warning("a Ray worker was lost (%s); %s round %d %s runs again on another worker (%d left)",
                    type(exc).__name__, job.method, job.round + 1, job.entry.task, len(self._actors))
        if not self._actors:
            from guimem.errors import RunStoppedError

            raise RunStoppedError("every Ray worker was lost", failures=1, first=str(exc).splitlines()[0][:300],
                                  suggestion="check the cluster's nodes (`ray status`), then rerun to resume")

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


@contextmanager
def _loopback_driver(loopback: bool) -> Iterator[None]:
    """Keep a driver joining a loopback cluster on 127.0.0.1 (Ray rewrites a loopback address to the
    machine's interface address, where a cluster whose nodes all run on 127.0.0.1 is not listening;
    Ray skips that rewrite when multi-node clusters are off, which this turns on for ``ray.init``)."""
    if not loopback:
        yield
        return
    from ray._private import ray_constants

    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


class _RayWorker:
    def __init__(self, spec_json: str, run_path: str, settings_json: str, store_url: str) -> None:
        _init_worker(spec_json, run_path, settings_json, store_url)

    def run(self, job: EpisodeJob) -> tuple[str, str]:
        return _work(job)

    def close(self) -> None:
        _close_bench()
        stop_descendants(grace_s=3.0)  # an actor is killed after this: nothing it started may outlive it


def make_executor(backend: str, workers: int, bench: Workbench, spec: EvalSpec, run_dir: RunDir,
                  settings: GuimemSettings, address: str | None = None) -> Executor:
    """The executor for ``--backend``, ``--workers`` and ``--address`` (a Ray cluster to join)."""
    url = bench.store_url
    builders: dict[str, Callable[[], Executor]] = {
        "local": lambda: SequentialExecutor(bench) if workers <= 1 else ProcessExecutor(spec, run_dir, settings,
                                                                                         workers, url),
        "ray": lambda: RayExecutor(spec, run_dir, settings, workers, address, url),
    }
    if backend not in builders:
        from guimem.errors import UnknownBackendError

        raise UnknownBackendError("backend", backend, sorted(builders), difflib.get_close_matches(backend, BACKENDS))
    return builders[backend]()
