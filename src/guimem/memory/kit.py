"""What every memory method is built with: a store, an embedder, a token counter, optional LLM."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from guimem.embeddings import Embedder, EmbedRole
from guimem.llm import LLMClient
from guimem.memory.generalise import state_text
from guimem.memory.settings import Defences
from guimem.storage import Store
from guimem.tokens import TokenCounter
from guimem.types import InjectedItem, Injection, Observation, Task


@dataclass
class MemoryKit:
    """Shared dependencies of memory methods.

    Attributes:
        store: Where items and events live.
        embedder: Text embedder (states, intents, descriptions, goals).
        counter: Token counter for injected text.
        namespace: The store namespace this memory owns.
        llm: A model for ``llm`` extractors, when configured.
        vector_index: Vector index backend name (``exact``, ``hnsw`` or ``auto``).
        cache_dir: Where derived index files are cached (None: rebuilt from the store at every open).
        defences: What guards this memory against hostile page text (`Defences`).
    """

    store: Store
    embedder: Embedder
    counter: TokenCounter
    namespace: str
    llm: LLMClient | None = None
    vector_index: str = "auto"
    cache_dir: Path | None = None
    defences: Defences = field(default_factory=Defences)

    def counts(self, kind: str) -> dict[str, int]:
        """This memory's current items of ``kind`` by status: one grouped count in the store, not a read."""
        by = self.store.stats(self.namespace).by_kind_status
        return {status: n for (k, status), n in by.items() if k == kind}

    def embed_state(self, obs: Observation, task: Task) -> NDArray[np.float32]:
        """The embedding of a screen (masked signature, symmetric ``query:`` role)."""
        vec: NDArray[np.float32] = self.embedder.embed([state_text(obs, task)], EmbedRole.QUERY)[0]
        return vec

    def embed_text(self, text: str, role: EmbedRole = EmbedRole.QUERY) -> NDArray[np.float32]:
        """The embedding of one text."""
        vec: NDArray[np.float32] = self.embedder.embed([text], role)[0]
        return vec

    def injection(self, method: str, title: str, items: list[InjectedItem], *, abstained: bool = False,
                  note: str = "", withheld: tuple[str, ...] = ()) -> Injection:
        """Render items into one text block and count its tokens."""
        text = render_block(title, items) if items else ""
        return Injection(method=method, items=tuple(items), text=text, tokens=self.counter.count(text),
                         abstained=abstained, note=note, withheld=withheld)


TRIAL_TITLE = "Under trial (not yet verified; shown to test whether it helps):"
MANUAL_TITLE = "Admitted by hand (not verified by trials):"


def render_block(title: str, items: list[InjectedItem]) -> str:
    """``title`` then one line per item (its own text, already rendered); items admitted by a person follow
    under `MANUAL_TITLE` and items still under trial under `TRIAL_TITLE`, never under ``title``."""
    groups = [(title, [i for i in items if not i.trial and not i.manual]),
              (MANUAL_TITLE, [i for i in items if i.manual and not i.trial]),
              (TRIAL_TITLE, [i for i in items if i.trial])]
    return "\n".join(line for heading, group in groups if group
                     for line in (heading, *(f"- {item.text}" for item in group)))
