from __future__ import annotations

import numpy as np

from guimem.harness.metrics import bootstrap_indices, pass_at, success_matrix, summarise
from guimem.harness.runfiles import EpisodeResult, EvalSpec
from guimem.tasks import Suite, SuiteEntry


def result(method, rnd, task, seed, ok):
    return EpisodeResult(method=method, round=rnd, task=task, seed=seed, success=ok, score=float(ok), steps=2,
                         injected_tokens=10 if method != "none" else 0, recall_ms_p50=1.0, recall_ms=[1.0, 3.0])


SUITE = Suite(name="s", tasks=tuple(SuiteEntry(task=t, seed=s) for t in ("a", "b") for s in (1, 2)))


def test_pass_at_k_counts_a_pair_once_it_succeeded_in_any_earlier_round():
    m = np.array([[False, True, False], [False, False, False], [True, False, False]])
    assert pass_at(m, 1).tolist() == [False, False, True]
    assert pass_at(m, 2).tolist() == [True, False, True]


def test_bootstrap_resamples_whole_tasks():
    units = [("a", 1), ("a", 2), ("b", 1)]
    for sample in bootstrap_indices(units)[:50]:
        counts = np.bincount(sample, minlength=3)
        assert counts[0] == counts[1], "both seeds of a task come together"


def test_summary_pass_at_k_ci_and_paired_difference():
    results = [result("none", r, t, s, t == "a" and s == 1) for r in range(2) for t in "ab" for s in (1, 2)]
    results += [result("steer", r, t, s, r == 1 or (t == "a" and s == 1)) for r in range(2) for t in "ab"
                for s in (1, 2)]
    spec = EvalSpec(suite=SUITE, rounds=2, methods=["none", "steer"])
    summary = summarise(spec, results)
    steer = summary.methods["steer"]
    assert steer.pass_at_k == {"1": 0.25, "2": 1.0}
    assert steer.diff_vs_none["2"].mean == 0.75
    lo, hi = steer.pass_at_k_ci["2"]
    assert lo <= 1.0 <= hi
    assert steer.rounds[1].success_rate == 1.0 and steer.rounds[0].recall_ms_p95 > steer.rounds[0].recall_ms_p50
    assert summary.complete
    assert not summarise(spec, results[:-1]).complete


def test_missing_episodes_count_as_failures():
    m = success_matrix([result("x", 0, "a", 1, True)], [("a", 1), ("b", 1)], 2)
    assert m.tolist() == [[True, False], [False, False]]


def test_harm_lists_where_a_method_failed_and_none_succeeded_in_the_same_round():
    results = [result("none", r, t, s, t == "a") for r in range(2) for t in "ab" for s in (1, 2)]
    results += [result("steer", r, t, s, not (t == "a" and s == 2 and r == 1) and t != "b")
                for r in range(2) for t in "ab" for s in (1, 2)]
    summary = summarise(EvalSpec(suite=SUITE, rounds=2, methods=["none", "steer"]), results)
    assert [(c.task, c.seed, c.round) for c in summary.methods["steer"].harm] == [("a", 2, 1)]
    written = summary.model_dump(mode="json")["methods"]["steer"]["harm"]
    assert written == [{"task": "a", "seed": 2, "round_index": 1}], "an index is written as round_index"
    assert summary.methods["none"].harm == []
    missing = [r for r in results if not (r.method == "none" and r.task == "a" and r.seed == 2 and r.round == 1)]
    assert summarise(EvalSpec(suite=SUITE, rounds=2, methods=["none", "steer"]), missing).methods["steer"].harm == []
