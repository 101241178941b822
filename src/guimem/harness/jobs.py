"""One episode of an evaluation as a self-contained job, runnable in this process or in a worker."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from guimem.agents.base import Policy
from guimem.embeddings import CachedEmbedder, create_embedder
from guimem.envs.base import Env
from guimem.envs.drift import DriftEnv, Versioned
from guimem.harness.episode import EpisodeSettings, run_episode
from guimem.harness.factory import make_env, make_policy
from guimem.harness.runfiles import EpisodeResult, EvalSpec, RunDir
from guimem.llm import create_llm
from guimem.memory.base import Memory, Refreshable, SkillRunner
from guimem.memory.factory import load_models, open_memory
from guimem.settings import GuimemSettings
from guimem.tasks import SuiteEntry
from guimem.types import ActionErrorCode, ActionKind, InfraComponent, Preflight, Trajectory


@dataclass(frozen=True)
class EpisodeJob:
    """Which episode to run: method, round, the task's occurrence number in the round, the suite entry."""

    method: str
    round: int
    slot: int
    entry: SuiteEntry


def result_of(job: EpisodeJob, traj: Trajectory) -> EpisodeResult:
    """The ``results.jsonl`` line for a finished episode."""
    latencies = [s.injection.latency_ms for s in traj.steps]
    calls = [c for s in traj.steps for c in s.model_calls]
    infra = traj.outcome.infra
    return EpisodeResult(
        method=job.method, round=job.round, task=job.entry.task, seed=job.entry.seed,
        success=traj.outcome.success, score=traj.outcome.score, steps=len(traj.steps),
        injected_tokens=sum(s.injection.tokens for s in traj.steps),
        recall_ms_p50=round(statistics.median(latencies), 3) if latencies else 0.0,
        error=traj.outcome.reason if infra else None, infra=infra, slot=job.slot, episode_id=traj.episode_id,
        wall_ms=traj.wall_ms, recall_ms=latencies, abstained_steps=sum(1 for s in traj.steps if s.injection.abstained),
        stale_items=len({i for s in traj.steps for i in s.injection.stale}),
        regrounded_items=len({i for s in traj.steps for i in s.injection.regrounded}),
        model_calls=len(calls), model_prompt_tokens=sum(c.prompt_tokens for c in calls),
        model_completion_tokens=sum(c.completion_tokens for c in calls),
        model_ms=round(sum(c.latency_ms for c in calls), 3),
        parse_failures=sum(1 for s in traj.steps if s.error and s.error.code is ActionErrorCode.PARSE_ERROR),
        context_overflow=any(s.error and s.error.code is ActionErrorCode.MODEL_ERROR for s in traj.steps),
        output_modes=sorted({c.mode for c in calls if c.mode}),
        skill_runs=sum(1 for s in traj.steps if s.action.kind is ActionKind.RUN_SKILL),
        skill_failures=sum(1 for s in traj.steps if s.action.kind is ActionKind.RUN_SKILL and s.error is not None),
    )


@dataclass
class Workbench:
    """What episodes need in one process: env, policy, embedder, counter, and memories by method.

    The env is created on first use and closed by `close`; memories are opened once from the run's
    stores: each method its own SQLite file in the run folder, or, with ``store_url`` (the spec's
    ``store`` with its password), one shared store with a namespace per run and method. The main
    process keeps its memory across rounds (it is the one that learns at each boundary); worker
    processes ask for ``fresh`` memory to see a new round's snapshot: a memory that can catch up
    with its store (`Refreshable`) reads only what the boundary wrote, another is reopened.
    """

    spec: EvalSpec
    run_dir: RunDir
    settings: GuimemSettings
    store_url: str = ""
    _env: Env | None = None
    _policy: Policy | None = None
    _embedder: CachedEmbedder | None = None
    _memories: dict[str, tuple[int, Memory]] = field(default_factory=dict)

    @property
    def env(self) -> Env:
        """The environment (started on first use)."""
        if self._env is None:
            shots = self.run_dir.path.resolve() / "screenshots" if self.spec.screenshots else None
            # only when asked: an env registered by a user need not take a screenshots folder
            env = make_env(self.spec.env, self.settings, shots) if shots else make_env(self.spec.env, self.settings)
            self._env = DriftEnv(env) if self.spec.drift_at else env
        return self._env

    def env_factory(self) -> Callable[[], Env]:
        """A factory handing out this process's env (for skill verification)."""
        return lambda: self.env

    @property
    def policy(self) -> Policy:
        """The frozen agent."""
        if self._policy is None:
            self._policy = make_policy(self.spec.policy, self.settings, seed=self.spec.policy_seed,
                                       context=self.spec.context)
        return self._policy

    @property
    def embedder(self) -> CachedEmbedder:
        """The shared, cached embedder."""
        if self._embedder is None:
            self._embedder = create_embedder(self.settings.embedder)
        return self._embedder

    def memory(self, method: str, round_index: int, fresh: bool = False) -> Memory:
        """The memory of ``method`` (reopened from its store when ``fresh`` and the round changed)."""
        cached = self._memories.get(method)
        if cached is not None and not (fresh and cached[0] != round_index):
            return cached[1]
        if cached is not None and isinstance(cached[1], Refreshable) and cached[1].refresh():
            self._memories[method] = (round_index, cached[1])  # caught up with the round: only its changes read
            return cached[1]
        if cached is not None:
            cached[1].close()
        if self.spec.store and not self.store_url:
            from guimem.errors import ConfigError

            raise ConfigError(f"this run keeps its memory in {self.spec.store}", suggestion="give --store with it")
        # a worker never creates a store: a missing one means it cannot see the run's (a remote node, a bad path)
        memory = open_memory(method, self.store_url or str(self.run_dir.store_file(method)), self.settings,
                             spec=self.spec.memory, namespace=self.spec.namespace(method), embedder=self.embedder,
                             env_factory=self.env_factory(), create=not fresh)
        self._memories[method] = (round_index, memory)
        return memory

    def preflight(self) -> list[str]:
        """Start the env, check the policy's endpoint and load memory's embedding model (`warm`) before any episode
        (what each checked).

        Raises:
            GuimemError: A part cannot work (browser missing, model endpoint down, an embedder that does not answer),
                with the fix.
        """
        checked = []
        parts: list[object] = [self.env, self.policy]
        if self.spec.memory.extractor == "llm":  # memory's extractors ask the model too
            parts.append(create_llm(self.settings.llm))
        for part in parts:
            if isinstance(part, Preflight):
                checked.append(part.preflight())
        warmed = self.warm()
        if warmed:
            checked.append(warmed)
        return checked

    def warm(self) -> str | None:
        """Load memory's embedding model and token encoding now (`load_models`), unless only the baseline runs, so
        that the first step's recall does not wait for them; what was loaded, or None.

        Raises:
            GuimemError: The embedder or the token encoding cannot work."""
        if all(method == "none" for method in self.spec.methods):
            return None
        return load_models(self.embedder, self.settings)

    def run(self, job: EpisodeJob, fresh_memory: bool = False) -> tuple[EpisodeResult, Trajectory]:
        """Run one job (an env the infrastructure failed is closed, so the next job starts a new one)."""
        memory = self.memory(job.method, job.round, fresh=fresh_memory)
        runner = memory.run_skill if isinstance(memory, SkillRunner) else None
        task = job.entry.to_task(self.spec.env, self.spec.max_steps)
        version = self.spec.ui_version(job.round)
        if isinstance(self.env, Versioned) and version:
            self.env.set_version(version)
        traj = run_episode(self.env, self.policy, task, memory=memory,
                           settings=EpisodeSettings(max_steps=task.max_steps or self.spec.max_steps,
                                                    speculate=self.spec.speculate),
                           skill_runner=runner, round_index=job.round, slot=job.slot)
        if traj.outcome.infra is not None and traj.outcome.infra.component is InfraComponent.ENV:
            self.close_env()
        result = result_of(job, traj)
        return (result.model_copy(update={"ui_version": version}) if version else result), traj

    def close_env(self) -> None:
        """Close the env (a new one starts on next use)."""
        if self._env is not None:
            env, self._env = self._env, None
            env.close()

    def close(self) -> None:
        """Close the env and the stores."""
        for _, memory in self._memories.values():
            memory.close()
        self._memories.clear()
        self.close_env()
        if self._embedder is not None:
            self._embedder.close()  # its embed-ahead thread

