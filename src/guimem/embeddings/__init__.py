"""Text embedders: the bundled e5 model by default, feature hashing for tests, any OpenAI-compatible server."""

from guimem.embeddings.base import (
    CachedEmbedder,
    Embedder,
    EmbedRole,
    Prefetching,
    cosine,
    create_embedder,
    embedding_ms,
)

__all__ = ["CachedEmbedder", "EmbedRole", "Embedder", "Prefetching", "cosine", "create_embedder", "embedding_ms"]
