"""The worked examples of docs/extending.md run as written: a memory method, an env, an LLM backend, a suite."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
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
GUIDE = ROOT / "docs" / "extending.md"


def test_the_doc_names_every_example_file():
    doc = (ROOT / "docs" / "extending.md").read_text()
    for name in ("tally_memory.py", "failures_memory.py", "counter_env.py", "echo_llm.py", "counter_suite.json",
                 "check_memory", "check_env", "test_extending.py"):
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


def test_the_guide_runs_as_written_from_a_fresh_folder(tmp_path):
    """Every ``bash`` and ``python`` block of docs/extending.md, in order, from a folder holding a copy of
    ``examples/`` (as a user's checkout or project would), through the real console script."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    from tests.shell import path_with_guimem

    env = {**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing", "PATH": path_with_guimem(tmp_path / "bin"),
           "COLUMNS": "200"}
    blocks = re.findall(r"```(bash|python)\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    assert sum(lang == "bash" for lang, _ in blocks) >= 3 and sum(lang == "python" for lang, _ in blocks) >= 3
    for number, (lang, code) in enumerate(blocks):
        if lang == "python":
            script = tmp_path / f"guide_{number}.py"
            script.write_text(code)
            command = [sys.executable, script.name]
        else:
            command = ["bash", "-e", "-c", code]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
                              check=False)
        assert done.returncode == 0, f"block {number} ({lang}):\n{code}\n{done.stdout}\n{done.stderr}"
    assert (tmp_path / "runs" / "python" / "summary.json").exists() and (tmp_path / "runs" / "counter").is_dir()


FAILURES = "examples.extending.failures_memory:FailuresMemory"


def test_the_failures_example_keeps_the_contract_and_helps_the_explorer_where_text_alone_cannot(tmp_path, monkeypatch):
    assert check_memory(FAILURES, tmp_path / "check") == []
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    result = runner.invoke(app, ["eval", "--env", ENV, "--suite", SUITE, "--rounds", "2", "--methods",
                                 f"{FAILURES},{MEMORY}", "--out", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 0, result.output
    final = {name: m["pass_at_k"]["2"] for name, m in json.loads(result.output)["methods"].items()}
    assert final[FAILURES] > final["none"] == final[MEMORY], final
