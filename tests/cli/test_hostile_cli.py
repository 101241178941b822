"""Issue 29: hostile CLI inputs end in one line and exit 2 (1 for infrastructure), never a traceback or a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from guimem.cli.app import app
from guimem.types import write_trajectories
from tests.memory.conftest import LOGIN, PASS, USER, episode

runner = CliRunner()


@pytest.fixture(autouse=True)
def hashing(monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")


def one_line(args: list[str], code: int = 2, env: dict[str, str] | None = None) -> str:
    """Run the real console script (a subprocess, bounded in time): one error line, exit ``code``."""
    proc = subprocess.run([sys.executable, "-m", "guimem.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing", **(env or {})})
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    return lines[0]


def test_learn_of_an_infinite_number_is_one_line_and_the_store_keeps_learning(tmp_path):
    good = episode([USER, PASS, LOGIN], seed=1)
    bad = tmp_path / "inf.jsonl"
    line = json.dumps({**good.model_dump(mode="json"), "wall_ms": 0.5})
    bad.write_text(line.replace('"wall_ms": 0.5', '"wall_ms": 1e400') + "\n")
    store = str(tmp_path / "s.sqlite")
    assert "inf.jsonl:1" in one_line(["learn", str(bad), "--store", store, "--method", "graph"])
    path = tmp_path / "good.jsonl"
    write_trajectories(path, [good])
    result = runner.invoke(app, ["--json", "memory", "stats", "--store", store, "--method", "graph"])
    assert json.loads(result.output)["queued"] == 0
    result = runner.invoke(app, ["learn", str(path), "--store", store, "--method", "graph"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["--json", "memory", "stats", "--store", store, "--method", "graph"])
    stats = json.loads(result.output)
    assert stats["queued"] == 0 and stats["committed_round"] == 0 and stats["items"]["edge:active"] >= 1
