from __future__ import annotations

import json
from pathlib import Path

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


@pytest.mark.parametrize(("name", "ok"), [("bogus", False), ("hashing", True)])
def test_doctor_checks_the_embedder_memory_is_configured_with(monkeypatch, name, ok):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", name)
    result = runner.invoke(app, ["--json", "doctor", "--no-browser"])
    checks = {c["name"]: c for c in json.loads(result.output)["checks"]}
    assert "embedder e5" not in checks and checks[f"embedder {name}"]["ok"] is ok, checks
    if not ok:
        assert result.exit_code == 1 and "GUIMEM_EMBEDDER__NAME" in checks[f"embedder {name}"]["fix"]


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


@pytest.mark.browser
def test_eval_with_a_custom_suite_file_on_miniwob(tmp_path):
    suite = tmp_path / "mine.yaml"
    suite.write_text("name: mine\ntasks:\n  - {task: click-test-2, seed: 101, max_steps: 3}\n"
                     "  - {task: enter-text, seed: 102, max_steps: 5}\n")
    out = tmp_path / "run"
    result = runner.invoke(app, ["eval", "--suite", str(suite), "--rounds", "2", "--methods", "steer",
                                 "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert set(summary["methods"]) == {"none", "steer"} and summary["complete"]
    assert summary["run"]["suite"] == "mine"
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert {(r["task"], r["seed"]) for r in rows} == {("click-test-2", 101), ("enter-text", 102)}
    assert len(rows) == 2 * 2 * 2


def test_eval_rejects_unknown_methods_with_a_suggestion(tmp_path):
    result = runner.invoke(app, ["eval", "--env", "form", "--methods", "stak", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "did you mean 'stack'" in result.output


def test_report_rebuilds_and_compare_prints_differences(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    suite = str(Path(__file__).parent.parent / "data" / "form_suite.json")
    for name, methods in (("a", "graph"), ("b", "graph")):
        assert runner.invoke(app, ["eval", "--env", "form", "--suite", suite, "--rounds", "2", "--methods", methods,
                                   "--out", str(tmp_path / name), "--json"]).exit_code == 0
    (tmp_path / "a" / "report.html").unlink()
    assert runner.invoke(app, ["report", str(tmp_path / "a")]).exit_code == 0
    assert (tmp_path / "a" / "report.html").exists()
    result = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"])
    rows = json.loads(result.output)["methods"]
    assert {r["method"] for r in rows} == {"none", "graph"} and all(r["difference"] == 0 for r in rows)
    assert all(r["ci"] == [0.0, 0.0] for r in rows)


def test_learn_recall_and_memory_commands(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    from guimem.testing import FormEnv
    from guimem.types import Task, write_trajectories
    from tests.memory.conftest import LOGIN, PASS, USER, episode

    traj = tmp_path / "t.jsonl"
    write_trajectories(traj, [episode([USER, PASS, LOGIN], seed=1), episode([LOGIN], seed=2)])
    store = str(tmp_path / "m.sqlite")
    result = runner.invoke(app, ["learn", str(traj), "--store", store, "--method", "graph", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["episodes"] == 2
    env = FormEnv()
    obs_file = tmp_path / "obs.json"
    obs_file.write_text(env.reset(Task(id="form", goal="", app="form", seed=3)).model_dump_json())
    ask = ["recall", "--store", store, "--method", "graph", "--goal", env.task.goal, "--observation", str(obs_file)]
    values = [a for k, v in env.task.params.items() for a in ("--param", f"{k}={v}")]
    result = runner.invoke(app, [*ask, "--task", "form", *values, "--json"])
    injection = json.loads(result.output)["injection"]
    assert {i["success"] for i in injection["items"]} == {True, False}
    adhoc = runner.invoke(app, ask)  # another task, no values: typing {username} cannot act here
    assert adhoc.exit_code == 0 and "withheld as unfit" in adhoc.output, adhoc.output
    listed = json.loads(runner.invoke(app, ["memory", "list", "--store", store, "--method", "graph", "--kind", "edge",
                                            "--json"]).output)
    shown = runner.invoke(app, ["memory", "show", listed[0]["id"], "--store", store, "--method", "graph"])
    assert shown.exit_code == 0 and listed[0]["id"] in shown.output
    stats = json.loads(runner.invoke(app, ["memory", "stats", "--store", store, "--method", "graph",
                                           "--json"]).output)
    assert stats["items"]["node:active"] >= 1


def test_learn_reports_the_line_of_a_malformed_file(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    result = runner.invoke(app, ["learn", str(bad), "--store", str(tmp_path / "m.sqlite"), "--method", "graph"])
    assert result.exit_code == 2 and "bad.jsonl:1" in result.output
