"""Graph recall latency at 1k, 10k and 100k edges: the query embedding vs everything else.

A synthetic graph (edges / 10 nodes, random 384-d state vectors, two-action behaviours) is written
to a SQLite store and loaded by `GraphMemory`. "Rest" is `recall` with the embedding replaced by a
precomputed vector (nearest-node search, collecting all outgoing edges, rendering, BPE counting);
"embedding" is e5 on the real signature of a login screen.

Usage: python benchmarks/graph_recall.py [--sizes 1000,10000,100000] [--queries 200]
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
from guimem.memory.graph import EdgeBody, GraphMemory, NodeBody
from guimem.memory.kit import MemoryKit
from guimem.memory.settings import GraphSettings
from guimem.storage import Record
from guimem.storage.base import pack_vector
from guimem.storage.sqlite import SQLiteStore
from guimem.tokens import TiktokenCounter
from guimem.types import Action, ActionKind, Behaviour, Role, Selector

DIM = 384


def build(store: SQLiteStore, edges: int, rng: np.random.Generator) -> np.ndarray:
    nodes = max(edges // 10, 1)
    vecs = unit(rng, nodes, DIM)
    behaviour = Behaviour(actions=(
        Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="username"), text="{username}"),
        Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="Login")),
    ))
    with store.transaction():
        for i in range(nodes):
            store.put(Record(f"n{i}", "node", "graph", "active",
                             NodeBody(signature=f"screen {i}", app="miniwob").model_dump_json(), pack_vector(vecs[i])))
        for j in range(edges):
            src, dst = int(rng.integers(nodes)), int(rng.integers(nodes))
            body = EdgeBody(source=f"n{src}", target=f"n{dst}", text=f"fill the form and submit {j}",
                            effect="shows the next screen", behaviour=behaviour,
                            success="yes" if j % 3 else "no", task="t", episode_id="e")
            store.put(Record(f"e{j}", "edge", "graph", "active", body.model_dump_json(), pack_vector(vecs[src])))
    return vecs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    task, obs = sample_screen()
    e5 = E5Embedder()
    e5.embed(["warm up"])
    embed_ms = []
    for i in range(50):
        start = time.perf_counter()
        e5.embed([state_text(obs, task) + f"\nbutton extra {i}"])
        embed_ms.append((time.perf_counter() - start) * 1000)
    e_p50, e_p95 = percentiles(embed_ms)
    print(f"query embedding (e5, one screen signature): p50 {e_p50:.2f} ms, p95 {e_p95:.2f} ms")
    rng = np.random.default_rng(0)
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLiteStore(Path(tmp) / "g.sqlite")
            start = time.perf_counter()
            vecs = build(store, size, rng)
            built = time.perf_counter() - start
            rest = []
            for q in range(args.queries):
                target = vecs[q % len(vecs)] + 0.05 * unit(rng, 1, DIM)[0]
                kit = MemoryKit(store, FixedEmbedder(target / np.linalg.norm(target)), TiktokenCounter(), "graph")
                if q == 0:
                    start = time.perf_counter()
                    graph = GraphMemory(kit, GraphSettings(tau=0.996))
                    loaded = time.perf_counter() - start
                graph.kit = kit
                start = time.perf_counter()
                graph.recall(RecallQuery(task=task, observation=obs))
                rest.append((time.perf_counter() - start) * 1000)
            r_p50, r_p95 = percentiles(rest)
            store.close()
        print(f"{size:>7} edges ({size // 10} nodes): build {built:.1f} s, load {loaded:.1f} s; recall without "
              f"embedding p50 {r_p50:.3f} ms, p95 {r_p95:.3f} ms = {100 * r_p50 / e_p50:.1f}% of one e5 query")


if __name__ == "__main__":
    main()
