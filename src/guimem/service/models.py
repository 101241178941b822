"""Typed requests and replies of the service operations (shared by CLI, HTTP and MCP)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from guimem.types import Injection, Observation


class RecallRequest(BaseModel):
    """What an agent asks memory before a step."""

    model_config = ConfigDict(extra="forbid")

    goal: str = Field(min_length=1, max_length=4000)
    observation: Observation
    task_id: str = Field(default="adhoc", max_length=200)
    app: str | None = Field(default=None, max_length=200)
    params: dict[str, str] = Field(default_factory=dict)
    step: int = Field(default=0, ge=0)
    slot: int = Field(default=0, ge=0)


class RecallReply(BaseModel):
    """The injection, plus which method answered."""

    method: str
    injection: Injection


class LearnReply(BaseModel):
    """What learning did (``queued``: episodes kept in the store for the next round boundary, as every
    method's contract says: what is learned is recalled after ``end_round``; ``added``/``merged``/
    ``dropped``: what the boundary did with them, when the same call ended the round; ``quarantined``:
    queued episodes that boundary could not learn and set aside, see `Stats.quarantine`; ``repeated``:
    episodes this memory already held, by episode id — a retried learn — not learned again)."""

    episodes: int
    added: int
    merged: int
    dropped: int
    queued: int = 0
    quarantined: int = 0
    repeated: int = 0


class ItemSummary(BaseModel):
    """One line of ``memory list``."""

    id: str
    kind: str
    """The stored record's kind, as counted: ``node``, ``edge``, ``skill``, ``knowledge``."""
    what: str = ""
    """What it is: ``node``, ``edge``, ``skill``, ``procedure`` or ``warning`` (a stack's skill is a ``skill``
    stored as ``knowledge``)."""
    status: str
    version: int
    summary: str
    manual: bool = False
    """Its status was set by a person, not by trials."""
    origin: str = "action"
    """Who wrote its words: ``action`` (guimem's template over the agent's actions), ``model``, ``human``."""
    imported: bool = False
    """It came from another memory's export (untrusted until admitted here)."""
    page: list[str] = []
    """The page text it carries (labels, values, screen lines): data, never advice."""
    quarantine: str = ""
    """Why it is quarantined: it carries page text that addresses the agent."""


class ItemDetail(ItemSummary):
    """``memory show``: the whole body, and a skill's code."""

    body: dict[str, object]
    code: str | None = None


class EventView(BaseModel):
    """One event of an item's history."""

    seq: int
    type: str
    item_id: str | None
    payload: dict[str, object]
    created_at: float


class QuarantinedEpisode(BaseModel):
    """A queued episode a round boundary could not learn: set aside (kept in the store) with the reason."""

    id: str
    episode: str
    reason: str


STATS_VERSION = 2
"""Version 2 named its round fields by their base (version 1: ``round`` a count, ``committed_round`` an index)."""


class Stats(BaseModel):
    """Counts of a memory (format version 2; a version 1 reply still reads).

    ``committed_round_index``: the 0-based index of the last round boundary committed (-1 for none).
    ``boundaries_applied``: a count, the round boundaries the admission lifecycle has passed (steer, stack; None
    for others).
    ``queued``: episodes learned and waiting in the store for the next round boundary.
    ``quarantined``: queued episodes a boundary could not learn (``quarantine``: the latest 100, with why).
    """

    version: int = STATS_VERSION
    method: str
    namespace: str
    items: dict[str, int]
    events: int
    boundaries_applied: int | None = None
    committed_round_index: int = -1
    queued: int = 0
    quarantined: int = 0
    quarantine: list[QuarantinedEpisode] = []

    @model_validator(mode="before")
    @classmethod
    def _from_version_1(cls, data: object) -> object:
        """A version 1 reply (no ``version``, or 1): ``round`` was the count, ``committed_round`` the index."""
        if isinstance(data, dict) and data.get("version", 1) == 1:
            old = dict(data)
            if "round" in old:
                old["boundaries_applied"] = old.pop("round")
            if "committed_round" in old:
                old["committed_round_index"] = old.pop("committed_round")
            return {**old, "version": STATS_VERSION}
        return data


class RunTraces(BaseModel):
    """A method with traces in the served run (``GET /v1/runs``), and the 0-based indexes of its traced rounds
    (the page shows them counted from 1)."""

    method: str
    round_indexes: list[int]


class TransferReply(BaseModel):
    """Export / import result."""

    path: str
    records: int
    events: int
