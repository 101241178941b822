"""Skill recall latency at 1k, 10k and 100k skills: embeddings (state + goal) vs the rest, and MMR alone.

Synthetic verified skills with random 384-d description vectors are written to a store and loaded
by `SkillMemory`; "rest" is `recall` with both embeddings replaced by a precomputed vector (one
search for α·s + (1−α)·g over the pool of max(3K, 20), MMR to K = 5, rendering code, BPE counting).

Usage: python benchmarks/skills_recall.py [--sizes 1000,10000,100000] [--queries 100]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from _synthetic import FixedEmbedder, percentiles, sample_screen, unit

from guimem.embeddings.e5 import E5Embedder
from guimem.memory.base import RecallQuery
from guimem.memory.generalise import state_text
from guimem.memory.kit import MemoryKit
from guimem.memory.program import SkillProgram
from guimem.memory.ranking import mmr
from guimem.memory.skills.induce import SkillSource
from guimem.memory.skills.library import SkillBody, SkillMemory
from guimem.storage import Record
from guimem.storage.base import pack_vector
from guimem.storage.sqlite import SQLiteStore
from guimem.tokens import TiktokenCounter
from guimem.types import Action, ActionKind, Role, Selector

DIM = 384


def build(store: SQLiteStore, n: int, rng: np.random.Generator) -> np.ndarray:
    vecs = unit(rng, n, DIM)
    program = SkillProgram.from_templates((
        Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="username"), text="{username}"),
        Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="Login")),
    ))
    source = SkillSource(task="t", seed=0, episode_id="e", params={}, prefix=(), expected_state="", ends_episode=True)
    with store.transaction():
        for i in range(n):
            body = SkillBody(name=f"skill_{i}", description=f"type the username and log in ({i})", program=program,
                             source=source, key=f"k{i}")
            store.put(Record(f"s{i}", "skill", "skills", "verified", body.model_dump_json(), pack_vector(vecs[i])))
    return vecs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    task, obs = sample_screen()
    e5 = E5Embedder()
    e5.embed(["warm up"])
    both = []
    for i in range(30):
        start = time.perf_counter()
        e5.embed([state_text(obs, task) + f" {i}"])
        e5.embed([task.goal + f" {i}"])
        both.append((time.perf_counter() - start) * 1000)
    e_p50, _ = percentiles(both)
    print(f"embeddings per recall (state + goal, e5): p50 {e_p50:.2f} ms")
    rng = np.random.default_rng(1)
    pool = unit(rng, 20, DIM)
    scores = rng.random(20).astype(np.float32)
    start = time.perf_counter()
    for _ in range(1000):
        mmr(scores, pool, 5, 0.7)
    print(f"MMR (pool 20 -> K 5): {(time.perf_counter() - start):.3f} ms per call")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLiteStore(Path(tmp) / "s.sqlite")
            vecs = build(store, size, rng)
            kit = MemoryKit(store, FixedEmbedder(vecs[0]), TiktokenCounter(), "skills")
            start = time.perf_counter()
            mem = SkillMemory(kit)
            loaded = time.perf_counter() - start
            rest = []
            for q in range(args.queries):
                target = vecs[q % size] + 0.05 * unit(rng, 1, DIM)[0]
                mem.kit = MemoryKit(store, FixedEmbedder(target / np.linalg.norm(target)), kit.counter, "skills")
                start = time.perf_counter()
                mem.recall(RecallQuery(task=task, observation=obs))
                rest.append((time.perf_counter() - start) * 1000)
            r_p50, r_p95 = percentiles(rest)
            store.close()
        print(f"{size:>7} skills: load {loaded:.1f} s; recall without embeddings p50 {r_p50:.3f} ms, "
              f"p95 {r_p95:.3f} ms = {100 * r_p50 / e_p50:.1f}% of the two e5 embeddings")


if __name__ == "__main__":
    main()
