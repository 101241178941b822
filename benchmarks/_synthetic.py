"""Shared pieces of the recall benchmarks: a fixed-vector embedder and a sample screen."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from guimem.embeddings import EmbedRole
from guimem.types import Bounds, Observation, Role, Task, UIElement


class FixedEmbedder:
    """Returns one precomputed vector for any text: isolates everything but the embedding."""

    def __init__(self, vector: np.ndarray, name: str = "e5:fixed") -> None:
        self.vector = vector.astype(np.float32)
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return int(self.vector.shape[0])

    def embed(self, texts: Sequence[str], role: EmbedRole = EmbedRole.QUERY) -> np.ndarray:
        return np.tile(self.vector, (len(texts), 1))


def sample_screen() -> tuple[Task, Observation]:
    task = Task(id="login-user", goal='Enter the username "ann" and the password "x1" and press login.',
                app="miniwob", params={"username": "ann", "password": "x1"})
    obs = Observation(app="miniwob", location="login-user", elements=(
        UIElement(ref="1", role=Role.TEXTBOX, label="username", resource_id="username", editable=True,
                  bounds=Bounds(w=100, h=20)),
        UIElement(ref="2", role=Role.TEXTBOX, label="password", resource_id="password", editable=True),
        UIElement(ref="3", role=Role.BUTTON, text="Login", resource_id="subbtn", clickable=True),
    ))
    return task, obs


def unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    v = rng.standard_normal((n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[max(0, int(0.95 * len(ordered)) - 1)]
