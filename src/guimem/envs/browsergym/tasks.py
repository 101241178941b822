"""BrowserGym task ids and benchmarks: how guimem names a task, which gymnasium id and benchmark it is
of, its goal and parameters, and what each benchmark needs installed and served."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from guimem.errors import EnvNotReadyError, MissingDependencyError

# The URL variables each benchmark's BrowserGym package reads (BrowserGym's documented names).
SERVER_VARIABLES: dict[str, tuple[str, ...]] = {
    "webarena": ("WA_SHOPPING", "WA_SHOPPING_ADMIN", "WA_REDDIT", "WA_GITLAB", "WA_WIKIPEDIA", "WA_MAP",
                 "WA_HOMEPAGE"),
    "visualwebarena": ("VWA_CLASSIFIEDS", "VWA_CLASSIFIEDS_RESET_TOKEN", "VWA_SHOPPING", "VWA_REDDIT",
                       "VWA_WIKIPEDIA", "VWA_HOMEPAGE"),
    "workarena": ("SNOW_INSTANCE_URL", "SNOW_INSTANCE_UNAME", "SNOW_INSTANCE_PWD"),
}
PACKAGES = {"miniwob": "browsergym.miniwob", "webarena": "browsergym.webarena",
            "visualwebarena": "browsergym.visualwebarena", "workarena": "browsergym.workarena",
            "assistantbench": "browsergym.assistantbench", "weblinx": "weblinx_browsergym"}
PIP_NAMES = {"miniwob": "browsergym-miniwob", "webarena": "browsergym-webarena",
             "visualwebarena": "browsergym-visualwebarena", "workarena": "browsergym-workarena",
             "assistantbench": "browsergym-assistantbench", "weblinx": "weblinx-browsergym"}


def normalise_task_id(task_id: str) -> str:
    """The task's id for memory: ``browsergym/miniwob.click-test-2`` and ``miniwob.click-test-2`` are
    ``click-test-2`` (guimem's ``miniwob`` env names MiniWoB tasks without a prefix); other benchmarks
    keep theirs (``webarena.310``)."""
    out = task_id.strip()
    if out.startswith("browsergym/"):
        out = out[len("browsergym/"):]
    if out.startswith("miniwob."):
        out = out[len("miniwob."):]
    return out


def benchmark_of(task_id: str) -> str:
    """The BrowserGym benchmark of a task id: the part before the first dot, ``miniwob`` when there is none."""
    name = normalise_task_id(task_id)
    return name.split(".", 1)[0] if "." in name else "miniwob"


def gym_id(task_id: str) -> str:
    """The gymnasium id BrowserGym registers the task under (``browsergym/miniwob.click-test-2``)."""
    name = normalise_task_id(task_id)
    return f"browsergym/{name}" if "." in name else f"browsergym/miniwob.{name}"


def goal_and_params(task_id: str, obs: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """The goal in a BrowserGym observation and its parameters: MiniWoB's own field extractor for its
    tasks, quoted substrings (``q0``, ``q1``, ...) for other benchmarks."""
    from guimem.envs.miniwob import extract_fields, quoted_fields

    raw = obs.get("goal")
    goal = raw if isinstance(raw, str) else ""
    if benchmark_of(task_id) == "miniwob":
        return extract_fields(normalise_task_id(task_id), goal)
    return goal, quoted_fields(goal)


def miniwob_url() -> str:
    """``file://`` URL of the ``miniwob`` package's task pages (what BrowserGym's ``MINIWOB_URL`` expects)."""
    from guimem.envs.miniwob import miniwob_html_dir

    return miniwob_html_dir().as_uri() + "/"


def check_benchmark(benchmark: str) -> None:
    """Import the benchmark's BrowserGym package and check its server variables.

    Raises:
        MissingDependencyError: The benchmark's package is not installed.
        EnvNotReadyError: A server URL variable the benchmark needs is not set.
    """
    import importlib

    module = PACKAGES.get(benchmark, f"browsergym.{benchmark}")
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if benchmark == "miniwob":
            raise MissingDependencyError("browsergym-miniwob", "browsergym") from exc
        raise MissingDependencyError(PIP_NAMES.get(benchmark, f"browsergym-{benchmark}"), None) from exc
    if benchmark == "miniwob" and not os.environ.get("MINIWOB_URL"):
        os.environ["MINIWOB_URL"] = miniwob_url()
    missing = [v for v in SERVER_VARIABLES.get(benchmark, ()) if not os.environ.get(v)]
    if missing:
        raise EnvNotReadyError(
            f"{benchmark} needs its servers: {', '.join(missing)} not set",
            suggestion=f"export {missing[0]}=<URL of your {benchmark} server> (see docs/browsergym.md)")
