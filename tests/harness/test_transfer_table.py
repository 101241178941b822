"""benchmarks/transfer_families.py: Δ vs none with a CI over all tasks and over the tasks without a twin,
harm counted per (task, seed, round), and the share of the within-task gain transfer keeps."""

from __future__ import annotations

from guimem.harness.runfiles import EpisodeResult
from tests.harness.benchmark_module import load

table = load("transfer_families")


def _r(method: str, task: str, rnd: int, ok: bool, seed: int = 1) -> EpisodeResult:
    return EpisodeResult(method=method, round=rnd, task=task, seed=seed, success=ok, score=1.0 if ok else 0.0,
                         steps=1, injected_tokens=0, recall_ms_p50=0.0)


def test_twins_are_set_apart_and_the_gain_and_harm_are_counted():
    tasks = {"pie", "pie-nodelay", "inbox-reply", "inbox-forward"}
    assert table.untwinned(tasks) == {"inbox-reply", "inbox-forward"}
    rows = [_r("none", t, k, False) for t in sorted(tasks) for k in range(2)]
    rows[rows.index(_r("none", "inbox-reply", 0, False))] = _r("none", "inbox-reply", 0, True)
    rows += [_r("m", "pie", 1, True), _r("m", "pie-nodelay", 1, True), _r("m", "inbox-forward", 1, True),
             _r("m", "inbox-reply", 0, False), _r("m", "inbox-reply", 1, True), _r("m", "pie-nodelay", 0, False),
             _r("m", "pie", 0, False), _r("m", "inbox-forward", 0, False)]
    everything = table.delta(rows, "m", 2)
    assert (everything.none, everything.method, everything.delta) == (25.0, 100.0, 75.0)
    assert everything.harmed == (("inbox-reply", 1, 0),), "failed where none succeeded that round"
    solo = table.delta(rows, "m", 2, table.untwinned(tasks))
    assert (solo.units, solo.delta) == (2, 50.0) and solo.ci[0] <= 50.0 <= solo.ci[1]
    assert table.kept(everything, solo) == 0.67 and table.kept(solo, everything) == 1.5
    assert table.kept(table.delta(rows, "none", 2), everything) is None, "no within-task gain: nothing to keep"
