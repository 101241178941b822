from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from guimem.cli.app import app
from guimem.types import read_trajectories

runner = CliRunner()


def test_help_lists_the_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("doctor", "run", "suites"):
        assert command in result.output


@pytest.mark.browser
def test_doctor_json_reports_the_required_parts_working():
    result = runner.invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    checks = {c["name"]: c for c in report["checks"]}
    assert report["ok"]
    for name in ("chromium", "chromedriver", "headless browser", "embedder e5"):
        assert checks[name]["ok"], checks[name]


def test_doctor_exits_1_and_names_the_fix_when_chromium_is_missing(monkeypatch):
    monkeypatch.setenv("GUIMEM_BROWSER__CHROME_BINARY", "/nonexistent/chromium")
    result = runner.invoke(app, ["--json", "doctor", "--no-browser"])
    assert result.exit_code == 1
    checks = {c["name"]: c for c in json.loads(result.output)["checks"]}
    assert not checks["chromium"]["ok"] and "apt-get install" in checks["chromium"]["fix"]


@pytest.mark.browser
def test_run_one_episode_as_json_and_load_the_trajectory(tmp_path):
    result = runner.invoke(app, ["run", "--env", "miniwob", "--task", "click-test-2", "--seed", "0",
                                 "--policy", "explorer", "--json", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["success"] is True and out["steps"] >= 1
    assert set(out) == {"task", "seed", "success", "score", "steps", "trajectory"}
    (traj,) = read_trajectories(out["trajectory"])
    assert traj.task.id == "click-test-2" and traj.outcome.success


def test_run_unknown_env_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["run", "--env", "miniwb", "--task", "x", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "unknown env 'miniwb'" in result.output and "did you mean 'miniwob'" in result.output


def test_suites_json_lists_the_shipped_suites():
    result = runner.invoke(app, ["--json", "suites"])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["default"]["episodes"] == 40
