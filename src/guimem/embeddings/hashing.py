"""A deterministic embedder with no model: hashed word and character-trigram features (tests only)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from guimem.embeddings.base import EmbedRole, Vectors, normalise_rows

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Feature hashing of words and character trigrams into ``dim`` buckets, signed, normalised."""

    def __init__(self, dim: int = 384) -> None:
        self._dim = dim

    @property
    def name(self) -> str:
        """Backend identity."""
        return f"hashing:{self._dim}"

    @property
    def dim(self) -> int:
        """The configured dimension."""
        return self._dim

    def _features(self, text: str) -> list[str]:
        words = [w.casefold() for w in _WORD.findall(text)]
        grams = [f"#{w[i:i + 3]}" for w in words for i in range(max(1, len(w) - 2))]
        return words + grams

    def embed(self, texts: Sequence[str], role: EmbedRole = EmbedRole.QUERY) -> Vectors:
        """Embed a batch (the role does not change the vector)."""
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat in self._features(text):
                digest = hashlib.blake2b(feat.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self._dim
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
        return normalise_rows(out)
