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
    body_cache: int = Field(default=100_000, ge=16)
    """Edge bodies kept in memory (the rest are read from the store when recall needs them)."""


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
    match_state: bool = True
    """Offer a skill only where it can start: its arguments are the task's and its first step finds its
    element on this screen."""


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


class AdmissionRules(BaseModel):
    """How the ``stack`` admits items beyond STEER's matched controls (``steer`` keeps the paper's rules).

    Attributes:
        fast_avoid: An avoid item about one screen of one task (a warning, a failed subgoal) acts from
            the round after it was learned, shown to every episode of its task (no control arm).
        history_controls: The task's own episodes before an item existed count as its controls; once an
            item has enough controls it is shown to every episode it fits (a task seen once per round
            is not starved of trials).
        retire_harmful: An item shown in an episode that failed where the same task and seed
            succeeded before the item existed (or where its matched control succeeded) is harmful: a
            pending item is rejected, an admitted one retired, at the next round boundary.
        fast_trials: A screen-specific avoid item shown (without a control arm) in this many episodes,
            none of which succeeded, has not helped and is rejected: a task memory cannot solve stops
            paying for it.
        history_per_task: How many past episodes of a task are kept as its history.
        transfer: A task's skills and successful subgoals are tried on the app's other tasks whose contract
            and screen they fit, as trials against those tasks' matched controls; their scope widens to the
            app on that evidence and narrows where they harm (`guimem.memory.steer.scope`).
    """

    fast_avoid: bool = True
    fast_trials: int = Field(default=3, ge=1)
    history_controls: bool = True
    retire_harmful: bool = True
    history_per_task: int = Field(default=20, ge=1)
    transfer: bool = True


class Defences(BaseModel):
    """What keeps page text written to steer the agent out of memory's advice (docs/security.md).

    Attributes:
        quote: Page-derived text in every injection is quoted, marked as page content and length-bounded,
            under headings that say what is memory's own advice and what is quoted from pages.
        quarantine: Text that addresses the agent (see `guimem.memory.hostile`) keeps the item carrying it
            out of every injection and out of admission by trials (a person can still admit it); an episode
            that acted on such text is set aside, not learned from.
        untrusted_imports: Imported items start untrusted (candidates) whatever status they were exported
            with, and earn admission here.
    """

    quote: bool = True
    quarantine: bool = True
    untrusted_imports: bool = True

    @classmethod
    def parse(cls, text: str) -> Defences:
        """``all``, ``none``, or ``all`` minus a comma list (``no-quote,no-quarantine``)."""
        names = [n.strip() for n in text.split(",") if n.strip()]
        if names == ["all"]:
            return cls()
        if names == ["none"]:
            return cls(quote=False, quarantine=False, untrusted_imports=False)
        fields = {f.replace("_", "-"): f for f in cls.model_fields}
        off: dict[str, bool] = {}
        for n in names:
            field = fields.get(n.removeprefix("no-"))
            if field is None or not n.startswith("no-"):
                raise ValueError(f"unknown defence setting {n!r}: use all, none or "
                                 + ", ".join(f"no-{f}" for f in fields))
            off[field] = False
        return cls(**off)

    def label(self) -> str:
        """The inverse of `parse`."""
        off = [f"no-{f.replace('_', '-')}" for f in type(self).model_fields if not getattr(self, f)]
        return "all" if not off else "none" if len(off) == len(type(self).model_fields) else ",".join(off)


class MemorySpec(BaseModel):
    """A serialisable recipe for any memory method (recorded in run specs).

    Attributes:
        extractor: ``offline`` (deterministic, the default) or ``llm`` (segmenter, annotator,
            STEER proposer and contract parser ask the configured model).
        exclude_source_task: Leave-one-task-out: nothing learned from a task is recalled for it.
        token_budget: Tokens per step the stack may inject.
        admission: The stack's admission rules (`AdmissionRules`).
        defences: What guards memory against hostile page text (`Defences`).
    """

    graph: GraphSettings = Field(default_factory=GraphSettings)
    skills: SkillSettings = Field(default_factory=SkillSettings)
    steer: SteerSettings = Field(default_factory=SteerSettings)
    admission: AdmissionRules = Field(default_factory=AdmissionRules)
    append_all_k: int = 5
    extractor: str = "offline"
    exclude_source_task: bool = False
    token_budget: int = 400
    defences: Defences = Field(default_factory=Defences)
