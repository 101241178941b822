"""A policy's parsed reply, whatever protocol produced it (JSON or ConAct's five parts): the neutral value
the context strategies and the protocols share, so neither imports the other for it."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from guimem.types import Action


class Fold(BaseModel):
    """``{"range": [s, t], "summary": "..."}``."""

    range: tuple[int, int]
    summary: str


@dataclass
class Reply:
    """A parsed policy output; ``errors`` says what was missing or malformed (and is shown next step)."""

    thinking: str = ""
    fold: Fold | None = None
    action: Action | None = None
    ui_observation: str = ""
    action_intent: str = ""
    errors: list[str] = field(default_factory=list)
