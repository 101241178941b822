from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guimem.harness.evaluate import Evaluation
from guimem.harness.runfiles import EvalSpec, RunDir
from guimem.memory.factory import METHODS
from guimem.settings import GuimemSettings
from guimem.tasks import load_suite
from guimem.types import read_trajectories

DATA = Path(__file__).parent.parent / "data"
ALL = list(METHODS)


def settings() -> GuimemSettings:
    s = GuimemSettings()
    s.embedder.name = "hashing"
    return s


def spec(rounds=3, methods=None, workers=1) -> EvalSpec:
    return EvalSpec(env="form", suite=load_suite(str(DATA / "form_suite.json")), rounds=rounds,
                    methods=methods or ALL, embedder="hashing:384", workers=workers)


def strip_timing(obj):
    if isinstance(obj, dict):
        return {k: strip_timing(v) for k, v in obj.items() if "_ms" not in k}
    if isinstance(obj, list):
        return [strip_timing(v) for v in obj]
    return obj


def test_evaluation_writes_every_output_in_the_stable_formats(tmp_path):
    summary = Evaluation(spec(), tmp_path, settings()).run()
    files = {p.name for p in tmp_path.iterdir()}
    assert {"run_spec.json", "results.jsonl", "summary.json", "report.html", "traces", "memory", "snapshots"} <= files
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 4 * 3 * len(ALL)
    assert {"version", "method", "round_index", "task", "seed", "success", "score", "steps", "injected_tokens",
            "recall_ms_p50", "error"} <= set(lines[0])
    data = json.loads((tmp_path / "summary.json").read_text())
    m = data["methods"]["steer"]
    assert set(m["rounds"][0]) >= {"round_index", "success_rate", "episodes", "injected_tokens", "recall_ms_p50",
                                   "recall_ms_p95", "memory"}
    assert set(m["pass_at_k"]) == {"1", "2", "3"} and "3" in m["pass_at_k_ci"] and "3" in m["diff_vs_none"]
    assert summary.complete and data["methods"]["none"]["injected_tokens_total"] == 0
    steps = read_trajectories(RunDir(tmp_path).trace_file("graph", 1))[0].steps
    assert all(s.injection.method == "graph" for s in steps)
    html = (tmp_path / "report.html").read_text()
    assert "<svg" in html and "Pass@3" in html


def test_round_zero_reads_an_empty_snapshot_for_every_method(tmp_path):
    Evaluation(spec(rounds=2), tmp_path, settings()).run()
    first = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert all(r["injected_tokens"] == 0 for r in first if r["round_index"] == 0)
    assert any(r["injected_tokens"] > 0 for r in first if r["round_index"] == 1 and r["method"] != "none")


def test_a_stopped_run_resumes_without_repeating_or_losing_episodes(tmp_path):
    assert Evaluation(spec(), tmp_path, settings(), stop_after=13).run() is None
    partial = RunDir(tmp_path).results()
    assert len(partial) == 13
    Evaluation(spec(), tmp_path, settings()).run()
    keys = [r.key for r in RunDir(tmp_path).results()]
    assert len(keys) == len(set(keys)) == 4 * 3 * len(ALL)


def test_a_different_spec_in_the_same_folder_is_refused(tmp_path):
    Evaluation(spec(rounds=1, methods=["graph"]), tmp_path, settings()).run()
    from guimem.errors import ConfigError

    with pytest.raises(ConfigError, match="different run"):
        Evaluation(spec(rounds=2, methods=["graph"]), tmp_path, settings()).run()


def _cli(out: Path) -> list[str]:
    return [sys.executable, "-m", "guimem.cli", "eval", "--env", "form", "--suite", str(DATA / "form_suite.json"),
            "--rounds", "3", "--methods", "graph,skills,steer,stack", "--out", str(out), "--json"]


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_equals_an_uninterrupted_run(tmp_path):
    env = {**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing"}
    full, killed = tmp_path / "full", tmp_path / "killed"
    subprocess.run(_cli(full), env=env, check=True, capture_output=True, timeout=600)
    proc = subprocess.Popen(_cli(killed), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = killed / "results.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline:
        if results.exists() and len(results.read_text().splitlines()) >= 25:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    interrupted = len(results.read_text().splitlines())
    assert 25 <= interrupted < 60, "the run should have been killed mid-way"
    resumed = subprocess.run(_cli(killed), env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a = json.loads((full / "summary.json").read_text())
    b = json.loads((killed / "summary.json").read_text())
    assert strip_timing(a["methods"]) == strip_timing(b["methods"])
    keys = [(r.method, r.round, r.task, r.seed) for r in RunDir(killed).results()]
    assert len(keys) == len(set(keys)) == 60


@pytest.mark.slow
def test_parallel_workers_give_the_same_results_as_one(tmp_path):
    one = Evaluation(spec(methods=["steer", "stack"]), tmp_path / "one", settings()).run()
    two = Evaluation(spec(methods=["steer", "stack"], workers=2), tmp_path / "two", settings()).run()
    assert strip_timing(one.model_dump()["methods"]) == strip_timing(two.model_dump()["methods"])


_RAY_EVAL = """
import sys
sys.path.insert(0, {root!r})
from tests.harness.test_evaluate import settings, spec
from pathlib import Path
from guimem.harness.evaluate import Evaluation
{before}
ray_spec = spec(methods=["steer", "stack"], workers=2).model_copy(update={{"backend": "ray"}})
print(Evaluation(ray_spec, Path({out!r}), settings()).run().model_dump_json())
"""


def _ray_eval(out: Path, before: str = "") -> subprocess.CompletedProcess[str]:
    """An evaluation on a local Ray, in a process of its own: what this test process loaded before (usearch, by
    another test) must not decide whether Ray can start (`test_ray_after_usearch_is_a_clear_error`)."""
    code = _RAY_EVAL.format(root=str(Path(__file__).parents[2]), before=before, out=str(out))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_ray_backend_gives_the_same_results_as_one_process(tmp_path):
    pytest.importorskip("ray", reason="the ray extra is installed by make setup")
    one = Evaluation(spec(methods=["steer", "stack"]), tmp_path / "one", settings()).run()
    done = _ray_eval(tmp_path / "ray")
    assert done.returncode == 0, done.stderr[-3000:]
    distributed = json.loads(done.stdout.strip().splitlines()[-1])
    assert strip_timing(one.model_dump()["methods"]) == strip_timing(distributed["methods"])


def test_ray_after_usearch_is_a_clear_error(tmp_path):
    """usearch 2.26's wheel carries its own C++ runtime: a process that loaded it before Ray aborted in
    `ray.init` (std::regex_error), which took a whole test run down; now it is refused with the fix."""
    pytest.importorskip("ray", reason="the ray extra is installed by make setup")
    pytest.importorskip("usearch", reason="the hnsw extra is installed by make setup")
    done = _ray_eval(tmp_path / "ray", before="import usearch.index")
    assert done.returncode == 1 and "Ray cannot start in a process that loaded usearch" in done.stderr, \
        done.stderr[-3000:]
    assert "import ray" in done.stderr and "Aborted" not in done.stderr


def test_lines_and_a_snapshot_torn_by_a_crash_do_not_stop_the_resume(tmp_path):
    full = Evaluation(spec(methods=["graph", "steer"]), tmp_path / "full", settings()).run()
    assert Evaluation(spec(methods=["graph", "steer"]), tmp_path / "run", settings(), stop_after=10).run() is None
    run = RunDir(tmp_path / "run")
    last = run.results()[-1]
    with run.trace_file(last.method, last.round).open("ab") as fh:
        fh.write(b'{"version": 1, "episode_id": "torn", "task": {"id": "fo')  # killed mid-line
    run.snapshot_file("graph", 0).write_text('{"torn')  # a snapshot written before writes were atomic
    with run.results_file.open("ab") as fh:
        fh.write(b'{"method": "steer", "round": 1, "ta')  # and the results line after it
    resumed = Evaluation(spec(methods=["graph", "steer"]), tmp_path / "run", settings()).run()
    assert strip_timing(resumed.model_dump()["methods"]) == strip_timing(full.model_dump()["methods"])


def test_local_workers_share_the_cores_out_for_the_embedder_threads(tmp_path):
    from guimem.harness.executors import ProcessExecutor

    executor = ProcessExecutor(spec(workers=2), RunDir(tmp_path), settings(), workers=2)
    try:
        threads = executor._pool.apply(os.getenv, ("OMP_NUM_THREADS",))
    finally:
        executor.close()
    assert threads == str(max(1, (os.cpu_count() or 1) // 2))
