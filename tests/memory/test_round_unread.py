"""A round boundary reads only what the round touched: with not every item held (a memory opened from its index
cache, or a first open, which reads a chunk at a time), the gate, the merges and the next round's buckets come from
the items the round's evidence and proposals name, and what is recalled after is the same as with every item held
(before, `Admission.end_round` read every item twice: 21 GB for the stack at a million items)."""

from __future__ import annotations

import re

from guimem.agents.explorer import ExplorerPolicy
from guimem.embeddings import CachedEmbedder
from guimem.embeddings.hashing import HashingEmbedder
from guimem.harness.episode import EpisodeSettings, run_episode
from guimem.memory.factory import open_memory
from guimem.settings import GuimemSettings
from guimem.testing import FormEnv
from guimem.types import Task


def _run(tmp_path, method: str, hold_all: bool, cache: bool):
    settings = GuimemSettings(cache_dir=tmp_path / f"cache-{method}-{hold_all}-{cache}" if cache else None)
    embedder = CachedEmbedder(HashingEmbedder(settings.embedder.dim))
    path = str(tmp_path / f"{method}-{hold_all}-{cache}.sqlite")
    env = FormEnv()
    out, loaded = [], []
    for round_index in range(4):
        memory = open_memory(method, path, settings, embedder=embedder, env_factory=FormEnv)  # reopened each round
        try:
            if hold_all:
                memory.items()  # reads every item: the boundary then works on them
            batch = []
            for slot, seed in enumerate((1, 2, 3, 4)):
                task = Task(id="form", goal="", app="form", seed=seed + round_index, max_steps=6)
                batch.append(run_episode(env, ExplorerPolicy(seed=seed + 7 * round_index), task, memory=memory,
                                         settings=EpisodeSettings(max_steps=6), round_index=round_index, slot=slot,
                                         skill_runner=getattr(memory, "run_skill", None)))
            memory.commit_round(round_index, batch)
            loaded.append(memory.lifecycle.loaded)
            out.extend(batch)
            stats = memory.stats()
        finally:
            memory.close()
    embedder.close()
    return out, stats, loaded


def _steps(trajectories):
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"id{len(names)}")

    return [re.sub(r"\b[a-z]{1,3}-[0-9a-f]{12,}\b", rename,
                   s.action.describe() + "\n" + s.injection.model_dump_json(exclude={"latency_ms"}))
            for t in trajectories for s in t.steps]


def test_a_round_boundary_with_not_every_item_held_recalls_what_one_with_every_item_held_does(tmp_path):
    for method in ("steer", "stack"):
        for cache in (False, True):
            held, held_stats, held_loaded = _run(tmp_path, method, hold_all=True, cache=cache)
            lazy, lazy_stats, lazy_loaded = _run(tmp_path, method, hold_all=False, cache=cache)
            assert all(held_loaded) and not any(lazy_loaded), (method, cache)  # the boundary read no item beyond
            assert _steps(lazy) == _steps(held), (method, cache)
            assert lazy_stats == held_stats, (method, cache)
            assert any(s.injection.items for t in lazy for s in t.steps), f"{method} recalled nothing"
            assert lazy_stats.get("admitted", 0) > 0, lazy_stats  # items were proposed, merged and judged
