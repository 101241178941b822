"""Suite files (JSON or YAML): ``{"name": ..., "env": "miniwob", "tasks": [{"task", "seed", "max_steps"}]}``."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from guimem.errors import SuiteError
from guimem.types import Task

DEFAULT_MAX_STEPS = 15


class SuiteEntry(BaseModel):
    """One (task, seed) pair of a suite."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str = Field(min_length=1)
    seed: int = 0
    max_steps: int | None = Field(default=None, ge=1, le=500)

    def to_task(self, app: str, default_max_steps: int = DEFAULT_MAX_STEPS) -> Task:
        """The `Task` to reset an env with (goal and params are filled in by the env)."""
        return Task(id=self.task, goal="", app=app, seed=self.seed, max_steps=self.max_steps or default_max_steps)

    @property
    def key(self) -> str:
        """``task#seed``, unique within a suite."""
        return f"{self.task}#{self.seed}"


class Suite(BaseModel):
    """An ordered list of (task, seed) pairs; every round of an evaluation replays it in order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    env: str = "miniwob"
    description: str = ""
    drift_at: int = Field(default=0, ge=0, le=1000)
    """The round (from 1) from which its pages show a later UI version (`guimem.envs.drift`); 0: never."""
    tasks: tuple[SuiteEntry, ...] = Field(min_length=1)

    def task_names(self) -> list[str]:
        """Distinct task names, in first-appearance order."""
        return list(dict.fromkeys(e.task for e in self.tasks))

    def check_tasks(self, known: Iterable[str]) -> None:
        """Fail on task names the env does not have, with "did you mean".

        Raises:
            SuiteError: A task name is unknown.
        """
        known_list = sorted(known)
        for i, entry in enumerate(self.tasks):
            if entry.task not in known_list:
                close = difflib.get_close_matches(entry.task, known_list, n=3)
                hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else "see `guimem suites --tasks`"
                raise SuiteError(f"unknown {self.env} task {entry.task!r}", field=f"tasks.{i}.task", suggestion=hint)


def builtin_suites() -> dict[str, Path]:
    """The suites shipped with guimem, by name."""
    folder = Path(str(resources.files("guimem.tasks") / "suites"))
    return {p.stem: p for p in sorted(folder.iterdir()) if p.suffix in (".json", ".yaml", ".yml")}


def _parse(path: Path) -> Suite:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteError(f"cannot read suite file: {exc.strerror}", path=str(path)) from None
    try:
        raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        line = getattr(exc, "lineno", None) or getattr(getattr(exc, "problem_mark", None), "line", None)
        raise SuiteError(f"not valid {path.suffix.lstrip('.').upper() or 'JSON'}: {exc}", path=str(path),
                         line=line) from None
    if isinstance(raw, dict) and "name" not in raw:
        raw = {**raw, "name": path.stem}
    try:
        return Suite.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise SuiteError(first["msg"], path=str(path), field=field) from None


def load_suite(name_or_path: str) -> Suite:
    """A shipped suite by name, or a suite file by path.

    Raises:
        SuiteError: Unknown name (with "did you mean"), unreadable or malformed file.
    """
    shipped = builtin_suites()
    if name_or_path in shipped:
        return _parse(shipped[name_or_path])
    path = Path(name_or_path)
    if path.exists():
        return _parse(path)
    close = difflib.get_close_matches(name_or_path, list(shipped), n=3)
    hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else f"shipped: {', '.join(shipped)}"
    raise SuiteError(f"no suite named {name_or_path!r} and no such file", suggestion=hint)


def check_suite_tasks(suite: Suite, env: str) -> None:
    """Fail early on task names ``env`` does not have (MiniWoB++ tasks, directly or through BrowserGym, and
    desktop tasks).

    Tasks of other BrowserGym benchmarks are checked when their env is made (their package and servers).

    Raises:
        SuiteError: A MiniWoB++ or desktop task name is unknown.
    """
    if env == "desktop":
        from guimem.envs.desktop.tasks import TASKS

        suite.check_tasks(TASKS)
        return
    if env not in ("miniwob", "poison-miniwob", "browsergym"):
        return
    from guimem.envs.miniwob import available_tasks

    if env != "browsergym":
        suite.check_tasks(available_tasks())
        return
    from guimem.envs.bgym_obs import benchmark_of, normalise_task_id

    mini = [e.model_copy(update={"task": normalise_task_id(e.task)}) for e in suite.tasks
            if benchmark_of(e.task) == "miniwob"]
    if mini:
        suite.model_copy(update={"tasks": tuple(mini)}).check_tasks(available_tasks())
