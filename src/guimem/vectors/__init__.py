"""Nearest-neighbour search over embeddings: exact (NumPy) by default, HNSW (usearch) for large stores."""

from guimem.vectors.base import Hit, VectorIndex, create_index

__all__ = ["Hit", "VectorIndex", "create_index"]
