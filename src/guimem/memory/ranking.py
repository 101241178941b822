"""Ranking shared by memory methods: maximal marginal relevance, and the state-merge threshold τ per embedder."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

# Merge thresholds chosen per embedder by benchmarks/calibrate_tau.py on recorded MiniWoB++ screens
# (best F1, ties to the higher τ); the table and the procedure are in docs/calibration.md. An
# embedder without a calibration falls back to the paper's 0.9 — calibrate it before relying on it.
CALIBRATED_TAU = {"e5": 0.996, "hashing": 0.97}


def tau_for(embedder_name: str) -> float:
    """The calibrated merge threshold for an embedder (by backend prefix)."""
    return CALIBRATED_TAU.get(embedder_name.split(":", 1)[0], 0.9)


def mmr(query_scores: NDArray[np.float32], vectors: NDArray[np.float32], k: int, lam: float) -> list[int]:
    """Maximal marginal relevance: indices of ``k`` items balancing relevance and novelty."""
    chosen: list[int] = []
    rest = list(range(len(query_scores)))
    sims = vectors @ vectors.T
    while rest and len(chosen) < k:
        best = max(rest, key=lambda i: lam * query_scores[i] - (1 - lam) * max((sims[i, j] for j in chosen),
                                                                              default=0.0))
        chosen.append(best)
        rest.remove(best)
    return chosen
