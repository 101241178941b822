"""The worked examples of docs/extending.md run as written: a memory method, an env, an LLM backend, a suite."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from guimem.cli.app import app
from guimem.harness.factory import make_env, make_policy
from guimem.settings import GuimemSettings
from guimem.tasks import load_suite
from guimem.testing import check_env, check_memory
from guimem.types import Task

ROOT = Path(__file__).parent.parent
SUITE = str(ROOT / "examples" / "extending" / "counter_suite.json")
MEMORY = "examples.extending.tally_memory:TallyMemory"
ENV = "examples.extending.counter_env:CounterEnv"
runner = CliRunner()


def test_the_doc_names_every_example_file():
    doc = (ROOT / "docs" / "extending.md").read_text()
    for name in ("tally_memory.py", "counter_env.py", "echo_llm.py", "counter_suite.json", "check_memory",
                 "check_env", "test_extending.py"):
        assert name in doc


def test_the_example_memory_keeps_the_contract(tmp_path):
    assert check_memory(MEMORY, tmp_path) == []


def test_check_memory_run_twice_on_one_work_folder_starts_from_an_empty_memory_each_time(tmp_path):
    assert check_memory(MEMORY, tmp_path) == []
    assert check_memory(MEMORY, tmp_path) == []


def test_the_example_env_keeps_the_env_contract():
    env = make_env(ENV, GuimemSettings())
    assert check_env(env, Task(id="counter", goal="", app="counter", seed=1)) == []


def test_the_example_llm_backend_is_built_by_the_registry_and_drives_the_llm_policy(monkeypatch):
    from guimem.harness.episode import run_episode

    settings = GuimemSettings()
    settings.llm.backend = "examples.extending.echo_llm:WaitingLLM"
    policy = make_policy("llm", settings)
    traj = run_episode(make_env(ENV, settings), policy, Task(id="counter", goal="", app="counter", seed=0,
                                                             max_steps=2))
    assert [s.action.kind.value for s in traj.steps] == ["wait", "wait"] and traj.outcome.infra is None


def test_the_example_suite_runs_the_example_memory_on_the_example_env_through_guimem_eval(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    assert load_suite(SUITE).env == ENV
    result = runner.invoke(app, ["eval", "--env", ENV, "--suite", SUITE, "--rounds", "2", "--methods", MEMORY,
                                 "--out", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)["methods"]
    assert set(summary) == {"none", MEMORY}
