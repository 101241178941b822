"""The settings of every memory method in one place: `MemorySpec`, the recipe recorded in run specs."""

from __future__ import annotations

from pydantic import BaseModel, Field

from guimem.memory.graph import GraphSettings
from guimem.memory.skills.library import SkillSettings
from guimem.memory.steer.memory import SteerSettings

__all__ = ["GraphSettings", "MemorySpec", "SkillSettings", "SteerSettings"]


class MemorySpec(BaseModel):
    """A serialisable recipe for any memory method (recorded in run specs).

    Attributes:
        extractor: ``offline`` (deterministic, the default) or ``llm`` (segmenter, annotator,
            STEER proposer and contract parser ask the configured model).
        exclude_source_task: Leave-one-task-out: nothing learned from a task is recalled for it.
        token_budget: Tokens per step the stack may inject.
    """

    graph: GraphSettings = Field(default_factory=GraphSettings)
    skills: SkillSettings = Field(default_factory=SkillSettings)
    steer: SteerSettings = Field(default_factory=SteerSettings)
    append_all_k: int = 5
    extractor: str = "offline"
    exclude_source_task: bool = False
    token_budget: int = 400
