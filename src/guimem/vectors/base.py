"""The `VectorIndex` protocol: cosine search over string-keyed, L2-normalised vectors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from guimem.registry import Registry, default_registry


class Hit(NamedTuple):
    """One search result: the id and its cosine similarity to the query."""

    id: str
    score: float


@runtime_checkable
class VectorIndex(Protocol):
    """Add, remove and search vectors by string id. Vectors must be L2-normalised."""

    @property
    def dim(self) -> int:
        """The vector dimension."""
        ...

    def __len__(self) -> int:
        """How many vectors are indexed."""
        ...

    def __contains__(self, ident: object) -> bool:
        """Whether ``ident`` is indexed."""
        ...

    def add(self, ids: Sequence[str], vectors: NDArray[np.float32]) -> None:
        """Add (or replace) vectors under ``ids``."""
        ...

    def remove(self, ids: Sequence[str]) -> None:
        """Remove ids; unknown ids are ignored."""
        ...

    def search(self, query: NDArray[np.float32], k: int) -> list[Hit]:
        """The ``k`` nearest ids by cosine similarity, best first."""
        ...

    def save(self, path: Path) -> None:
        """Write the index to ``path`` (a folder)."""
        ...

    def load(self, path: Path) -> None:
        """Replace the contents with the index saved at ``path``."""
        ...


def create_index(name: str, dim: int, registry: Registry | None = None) -> VectorIndex:
    """Build the vector index backend ``name``."""
    index: VectorIndex = (registry or default_registry()).create("vector_index", name, dim=dim)
    return index
