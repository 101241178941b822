"""Build a memory method by name, with its options, from one `MemorySpec`."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from pydantic import BaseModel, Field

from guimem.envs.base import Env
from guimem.errors import UnknownBackendError
from guimem.memory.base import Memory
from guimem.memory.graph import GraphSettings
from guimem.memory.kit import MemoryKit
from guimem.memory.skills.library import SkillSettings
from guimem.memory.steer.memory import SteerSettings

METHODS = ("none", "graph", "skills", "steer", "append_all_similarity", "append_all_operational", "stack")


class MemorySpec(BaseModel):
    """A serialisable recipe for any memory method (recorded in run specs)."""

    graph: GraphSettings = Field(default_factory=GraphSettings)
    skills: SkillSettings = Field(default_factory=SkillSettings)
    steer: SteerSettings = Field(default_factory=SteerSettings)
    append_all_k: int = 5
    extractor: str = "offline"
    exclude_source_task: bool = False
    token_budget: int = 400


def _none(kit: MemoryKit, spec: MemorySpec, env_factory: Callable[[], Env] | None) -> Memory:
    from guimem.memory.base import NoMemory

    return NoMemory()


def _graph(kit: MemoryKit, spec: MemorySpec, env_factory: Callable[[], Env] | None) -> Memory:
    from guimem.memory.graph import GraphMemory

    return GraphMemory(kit, spec.graph.model_copy(update={"extractor": spec.extractor}))


def _skills(kit: MemoryKit, spec: MemorySpec, env_factory: Callable[[], Env] | None) -> Memory:
    from guimem.memory.skills.library import SkillMemory

    return SkillMemory(kit, spec.skills, env_factory)


def _steer(kit: MemoryKit, spec: MemorySpec, env_factory: Callable[[], Env] | None) -> Memory:
    from guimem.memory.steer.memory import SteerMemory

    settings = spec.steer.model_copy(update={"extractor": spec.extractor,
                                             "exclude_source_task": spec.exclude_source_task})
    return SteerMemory(kit, settings)


def _append_all(variant: str) -> Callable[[MemoryKit, MemorySpec, Callable[[], Env] | None], Memory]:
    def build(kit: MemoryKit, spec: MemorySpec, env_factory: Callable[[], Env] | None) -> Memory:
        from guimem.memory.steer.baselines import AppendAllMemory

        return AppendAllMemory(kit, variant, spec.append_all_k, spec.extractor,  # type: ignore[arg-type]
                               spec.exclude_source_task)

    return build


def _stack(kit: MemoryKit, spec: MemorySpec, env_factory: Callable[[], Env] | None) -> Memory:
    from guimem.memory.stack import StackMemory

    return StackMemory(kit, spec, env_factory)


BUILDERS: dict[str, Callable[[MemoryKit, MemorySpec, Callable[[], Env] | None], Memory]] = {
    "none": _none, "graph": _graph, "skills": _skills, "steer": _steer,
    "append_all_similarity": _append_all("similarity"), "append_all_operational": _append_all("operational"),
    "stack": _stack,
}


def create_memory(name: str, kit: MemoryKit, spec: MemorySpec | None = None,
                  env_factory: Callable[[], Env] | None = None) -> Memory:
    """The memory method ``name``.

    Raises:
        UnknownBackendError: ``name`` is not a method (with "did you mean").
    """
    if name not in BUILDERS:
        close = difflib.get_close_matches(name, METHODS, n=3)
        raise UnknownBackendError("memory method", name, list(METHODS), close)
    return BUILDERS[name](kit, spec or MemorySpec(), env_factory)
