"""The settings of every memory method in one module (the bottom of the memory layer: it imports no method).

`MemorySpec` is the recipe recorded in run specs; the method settings it holds are defined here too.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from guimem.memory.subgoals import Granularity

WINDOW_LENGTHS = (2, 3, 4, 5)


class Structure(StrEnum):
    """Graph (nearest node, all its edges) or flat (top-k edges by source-screen similarity)."""

    GRAPH = "graph"
    FLAT = "flat"


class GraphSettings(BaseModel):
    """Options of the graph memory (defaults are the paper's, τ calibrated for the embedder)."""

    tau: float | None = None
    theta: float = 0.9
    granularity: Granularity = Granularity.SUBGOAL
    structure: Structure = Structure.GRAPH
    flat_k: int = 5
    max_edges: int = 12
    extractor: Literal["offline", "llm"] = "offline"
    exclude_source_task: bool = False


class SkillSettings(BaseModel):
    """SGDR parameters (paper defaults; the authors' code uses α = 0.6 for the state term)."""

    alpha: float = 0.5
    k: int = 5
    mmr_lambda: float = 0.7
    pool_min: int = 20
    lengths: tuple[int, ...] = WINDOW_LENGTHS
    verify: bool = True
    recall_unverified: bool = False
    exclude_source_task: bool = False


class GateSettings(BaseModel):
    """Admission thresholds (DESIGN §4.3.5 defaults)."""

    min_trials: int = 2
    min_controls: int = 2
    min_difference: float = 0.0
    min_effective_uses: int = 2
    max_harms: int = 0


class SteerSettings(BaseModel):
    """STEER options."""

    gate: GateSettings = Field(default_factory=GateSettings)
    exclude_source_task: bool = False
    extractor: Literal["offline", "llm"] = "offline"


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
