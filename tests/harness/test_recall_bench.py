"""benchmarks/recall_end_to_end.py's real-evaluation part: a run folder seeded with a memory of many items, and the
recall the agent waited for, read from a run's traces."""

from __future__ import annotations

from guimem.harness.episode import run_episode
from guimem.harness.runfiles import RunDir
from guimem.memory.keys import RoundClock
from guimem.storage import Record
from guimem.storage.sqlite import SQLiteStore
from guimem.testing import FormEnv
from guimem.testing.memory import LOGIN, PASSWORD, USER, ScriptedPolicy
from guimem.types import AheadUse, InjectedItem, Injection, ItemKind, Task
from guimem.types.files import append_trajectory
from tests.harness.benchmark_module import load

bench = load("recall_end_to_end")

GOAL = "Enter the username and the password, then press Login."


def test_a_seeded_run_starts_at_the_first_round_with_every_item_and_leaves_the_source_alone(tmp_path):
    source = tmp_path / "graph-3.sqlite"
    store = SQLiteStore(source)
    with store.transaction():
        for i in range(3):
            store.put(Record(f"e{i}", "edge", "graph", "active", "{}"))
        clock = RoundClock(store, "graph")
        clock.mark(0)
        clock.mark(1)
    store.close()

    path = bench.seed_run(source, tmp_path / "run", "graph")

    assert path == RunDir(tmp_path / "run").store_file("graph")
    seeded = SQLiteStore(path)
    assert RoundClock(seeded, "graph").committed() == -1
    assert RoundClock(seeded, "graph").applied() == 2  # trial slots go on
    assert len(seeded.query("graph", "edge")) == 3
    seeded.close()
    original = SQLiteStore(source)
    assert RoundClock(original, "graph").committed() == 1
    original.close()


def _step_with(step, items: int, recall: float, embed: float, use: AheadUse | None = None):
    shown = tuple(InjectedItem(id=f"i{k}", kind=ItemKind.EDGE, text="tap Login") for k in range(items))
    return step.model_copy(update={"injection": Injection(method="graph", items=shown), "recall_ahead": use,
                                   "timings_ms": {"recall": recall, "embed": embed, "env": 30.0}})


def test_waits_are_read_from_the_traces_apart_by_what_the_step_did(tmp_path):
    run = RunDir(tmp_path / "run")
    # (items shown, recall ms, of it embedding) per step, two episodes in round 0 and one in round 1
    # and how it used the recall done ahead
    taken, other = AheadUse.TAKEN, AheadUse.OTHER_SCREEN
    plans = {0: [[(1, 40.0, 38.0, other), (1, 2.0, 0.0, taken), (0, 0.1, 0.0)],
                 [(2, 3.0, 0.0, taken), (0, 0.2, 0.0), (1, 1.0, 0.0, taken)]],
             1: [[(0, 30.0, 29.0), (1, 4.0, 0.0), (1, 50.0, 47.0, other)]]}
    for r, episodes in plans.items():
        for seed, plan in enumerate(episodes):
            traj = run_episode(FormEnv(), ScriptedPolicy([USER, PASSWORD, LOGIN]),
                               Task(id="form-01", goal=GOAL, app="form", seed=seed + 10 * r, max_steps=5))
            assert len(traj.steps) == len(plan)
            steps = [_step_with(s, *p) for s, p in zip(traj.steps, plan, strict=True)]
            append_trajectory(run.trace_file("graph", r), traj.model_copy(update={"steps": tuple(steps)}))

    w = bench.agent_waits(run.path, "graph", rounds=2)

    assert (w["steps"], w["embedded"], w["first_steps"], w["nothing"]) == (6, 2, 2, 3)
    assert (w["shown_p50"], w["shown_p95"]) == (3.0, 50.0)
    assert (w["embedded_p50"], w["embedded_p95"]) == (40.0, 50.0)
    assert (w["rest_p50"], w["rest_p95"]) == (3.0, 4.0)
    assert (w["first_p50"], w["first_p95"]) == (3.0, 40.0)
    assert (w["later_p50"], w["later_p95"], w["later_under_half_ms"]) == (4.0, 50.0, 0)
    assert w["nothing_p95"] == 30.0
    assert w["slowest"] == [["form-01", 2, 50.0, 47.0, "other_screen"], ["form-01", 0, 40.0, 38.0, "other_screen"],
                            ["form-01", 1, 4.0, 0.0, "never"]]
    assert w["ahead"] == {"never": {"steps": 1, "p50": 4.0, "p95": 4.0},
                          "other_screen": {"steps": 2, "p50": 40.0, "p95": 50.0},
                          "taken": {"steps": 3, "p50": 2.0, "p95": 3.0}}
    # a round the run has not reached adds nothing
    assert bench.agent_waits(run.path, "graph", rounds=3) == w


def test_a_first_open_cut_short_is_logged_and_its_attempts_add_up(tmp_path, monkeypatch):
    """#34: the stack's 1M first open takes hours (longer than a session here): each attempt logs its progress,
    the next resumes from the text vectors the last one saved, and the figures add every attempt up."""
    import json

    import numpy as np

    class Inner:
        name, dim = "fake", 4

        def embed(self, texts, role="query"):
            return np.ones((len(texts), 4), dtype=np.float32) / 2

    log = tmp_path / "open.progress.jsonl"
    clock = iter([0.0, 30.0, 70.0, 100.0])
    monkeypatch.setattr(bench.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(bench.os, "getpid", lambda: 11)
    first = bench.Progress(Inner(), log, every_s=60.0)
    assert first.embed(["a", "b"]).shape == (2, 4)  # at 30 s: nothing logged yet
    first.embed(["c"])  # at 70 s: logged, then the attempt is killed
    assert [json.loads(x)["texts"] for x in log.read_text().splitlines()] == [3]
    monkeypatch.setattr(bench.time, "perf_counter", iter([0.0, 40.0]).__next__)
    monkeypatch.setattr(bench.os, "getpid", lambda: 12)
    second = bench.Progress(Inner(), log)
    second.texts = 5
    second.write(done=True)
    total = bench.resumed_open(log)
    assert total["attempts"] == 2 and total["texts"] == 8 and total["s"] == 140.0 and total["done"]
    assert total["texts_per_s"] == 8 / 140.0
    assert bench.resumed_open(tmp_path / "none.jsonl")["attempts"] == 0
    # CPU time too (an open run beside other work is slowed); an attempt logged without it is left out of it
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert all("cpu_s" in x for x in lines)
    lines[0].pop("cpu_s")
    lines[-1]["cpu_s"] = 2.0
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert bench.resumed_open(log)["cpu_ms_per_text"] == 1000 * 2.0 / 5


def test_resuming_keeps_only_the_saved_text_vectors(tmp_path):
    folder = tmp_path / "cache" / "index" / "b7dc"
    folder.mkdir(parents=True)
    for name in ("texts.entry", "texts-8819", "knowledge.entry", "knowledge-3143", "pool-61b7.entry", "pool-61b7-f3"):
        (folder / name).mkdir(parents=True) if "." not in name else (folder / name).write_text("{}")
    bench._keep_saved_texts(tmp_path / "cache")
    assert sorted(p.name for p in folder.iterdir()) == ["texts-8819", "texts.entry"]
    bench._keep_saved_texts(tmp_path / "absent")  # nothing there: nothing to do
