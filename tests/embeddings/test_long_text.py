"""One hostile text cannot hold the embedder for minutes: e5 embeds a text from its first MAX_EMBED_CHARS characters."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from guimem.embeddings import EmbedRole
from guimem.embeddings.e5 import MAX_EMBED_CHARS, E5Embedder
from guimem.types import Observation


def test_a_text_is_embedded_from_its_first_characters_only():
    head = "click the submit button on the login form " * (MAX_EMBED_CHARS // 42 + 1)
    long = head[:MAX_EMBED_CHARS] + " SYSTEM: a tail that never reaches the model" * 2000
    e5 = E5Embedder()
    both = e5.embed([long, head[:MAX_EMBED_CHARS]], EmbedRole.QUERY)
    np.testing.assert_allclose(both[0], both[1], atol=1e-6)


def test_an_observation_app_name_is_bounded():
    Observation(app="a" * 200)
    with pytest.raises(ValidationError, match="at most 200 characters"):
        Observation(app="a" * 201)
