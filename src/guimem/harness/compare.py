"""Compare two evaluation runs: paired differences of final Pass@k per method, with bootstrap CIs.

The difference is paired by (task, seed) and the CI resamples tasks, exactly as the differences
against ``none`` inside one run; so it needs both runs' ``results.jsonl``, not only their summaries.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from guimem.errors import ConfigError
from guimem.harness.metrics import bootstrap_indices, pass_at, success_matrix
from guimem.harness.runfiles import RunDir, judged


class MethodComparison(BaseModel):
    """B − A for one method present in both runs."""

    method: str
    pass_a: float
    pass_b: float
    difference: float
    ci: list[float]
    tokens_a: int
    tokens_b: int


class Comparison(BaseModel):
    """Every method both runs have; ``mismatches`` lists what differs when the comparison was forced."""

    a: str
    b: str
    k: int
    methods: list[MethodComparison]
    mismatches: list[str]


def mismatches(a: RunDir, b: RunDir) -> list[str]:
    """What makes two runs incomparable: suite, rounds, env, policy, context."""
    sa, sb = a.load_spec(), b.load_spec()
    out = []
    ta = [(e.task, e.seed) for e in sa.suite.tasks]
    tb = [(e.task, e.seed) for e in sb.suite.tasks]
    if ta != tb:
        out.append(f"suite: {sa.suite.name} ({len(ta)} episodes) vs {sb.suite.name} ({len(tb)} episodes)")
    for name in ("rounds", "env", "policy", "context", "learned_on"):
        va, vb = getattr(sa, name), getattr(sb, name)
        if va != vb:
            out.append(f"{name}: {va} vs {vb}")
    return out


def compare_runs(a: RunDir, b: RunDir, force: bool = False) -> Comparison:
    """Paired B − A differences of Pass@k at the last round both runs have.

    Raises:
        ConfigError: The runs differ in suite, rounds, env, policy or context (unless ``force``),
            or have no (task, seed) in common.
    """
    differ = mismatches(a, b)
    if differ and not force:
        raise ConfigError(f"the runs are not comparable ({'; '.join(differ)})",
                          suggestion="compare runs of the same suite, rounds and policy, or pass --force")
    sa, sb = a.load_spec(), b.load_spec()
    units_b = {(e.task, e.seed) for e in sb.suite.tasks}
    units = [u for u in dict.fromkeys((e.task, e.seed) for e in sa.suite.tasks) if u in units_b]
    if not units:
        raise ConfigError("the runs have no (task, seed) in common", suggestion="compare runs of the same suite")
    k = min(sa.rounds, sb.rounds)
    ra, rb = judged(a.results()), judged(b.results())
    samples = bootstrap_indices(units)
    rows = []
    for method in [m for m in sa.methods if m in sb.methods]:
        rows_a = [r for r in ra if r.method == method]
        rows_b = [r for r in rb if r.method == method]
        hits_a = pass_at(success_matrix(rows_a, units, k), k).astype(float)
        hits_b = pass_at(success_matrix(rows_b, units, k), k).astype(float)
        diffs = np.array([hits_b[s].mean() - hits_a[s].mean() for s in samples])
        rows.append(MethodComparison(
            method=method, pass_a=round(float(hits_a.mean()), 4), pass_b=round(float(hits_b.mean()), 4),
            difference=round(float(hits_b.mean() - hits_a.mean()), 4),
            ci=[round(float(np.percentile(diffs, 2.5)), 4), round(float(np.percentile(diffs, 97.5)), 4)],
            tokens_a=sum(r.injected_tokens for r in rows_a), tokens_b=sum(r.injected_tokens for r in rows_b)))
    return Comparison(a=str(a.path), b=str(b.path), k=k, methods=rows, mismatches=differ)
