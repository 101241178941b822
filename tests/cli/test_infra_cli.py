"""A missing browser or a dead model endpoint stops the CLI loudly: exit 1, nothing counted, resumable."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from guimem.cli.app import app
from guimem.harness.runfiles import RunDir
from tests.harness.test_evaluate import strip_timing

runner = CliRunner()


def _eval(out: Path) -> list[str]:
    return ["eval", "--suite", "smoke", "--rounds", "2", "--methods", "graph", "--out", str(out), "--json"]


@pytest.mark.browser
@pytest.mark.slow
def test_eval_with_a_missing_browser_stops_at_once_then_resumes_to_the_uninterrupted_summary(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    full = runner.invoke(app, _eval(tmp_path / "full"))
    assert full.exit_code == 0, full.output
    monkeypatch.setenv("GUIMEM_BROWSER__CHROME_BINARY", "/nonexistent/chromium")
    start = time.monotonic()
    stopped = runner.invoke(app, _eval(tmp_path / "run"))
    assert stopped.exit_code == 1 and time.monotonic() - start < 10
    error = json.loads(stopped.output)
    assert error["error"] == "EnvNotReadyError" and "apt-get install" in error["suggestion"]
    assert RunDir(tmp_path / "run").results() == []
    monkeypatch.delenv("GUIMEM_BROWSER__CHROME_BINARY")
    resumed = runner.invoke(app, _eval(tmp_path / "run"))
    assert resumed.exit_code == 0, resumed.output
    assert strip_timing(json.loads(resumed.output)["methods"]) == strip_timing(json.loads(full.output)["methods"])


def test_run_with_a_missing_browser_exits_1_and_records_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_BROWSER__CHROME_BINARY", "/nonexistent/chromium")
    result = runner.invoke(app, ["run", "--task", "click-test-2", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "chromium not found" in result.output and "fix:" in result.output
    assert not (tmp_path / "trajectories.jsonl").exists()


def test_run_with_no_model_server_exits_1_quickly_and_records_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_LLM__BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("GUIMEM_LLM__MAX_RETRIES", "1")
    start = time.monotonic()
    result = runner.invoke(app, ["run", "--env", "form", "--task", "form", "--policy", "llm", "--out", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert time.monotonic() - start < 15
    assert "model failed" in result.output and "GUIMEM_LLM__BASE_URL" in result.output
    assert not (tmp_path / "trajectories.jsonl").exists()


def test_doctor_fails_when_chromedriver_does_not_match_the_browser(tmp_path, monkeypatch):
    fake = tmp_path / "chromedriver"
    fake.write_text("#!/bin/sh\necho 'ChromeDriver 99.0.4844.51'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    chrome = tmp_path / "chromium"
    chrome.write_text("#!/bin/sh\necho 'Chromium 156.0.8078.108'\n")
    chrome.chmod(chrome.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("GUIMEM_BROWSER__CHROMEDRIVER", str(fake))
    monkeypatch.setenv("GUIMEM_BROWSER__CHROME_BINARY", str(chrome))
    result = runner.invoke(app, ["--json", "doctor", "--no-browser"])
    assert result.exit_code == 1
    check = {c["name"]: c for c in json.loads(result.output)["checks"]}["driver matches browser"]
    assert not check["ok"] and "99" in check["detail"] and "156" in check["detail"]


def test_doctor_model_checks_the_endpoint(monkeypatch):
    from guimem.testing import ScriptedOpenAIServer

    with ScriptedOpenAIServer(default='{"ok": true}', refuse_formats=["json_schema"]) as server:
        monkeypatch.setenv("GUIMEM_LLM__BASE_URL", server.base_url)
        wrong = runner.invoke(app, ["--json", "doctor", "--no-browser", "--model"])
        check = {c["name"]: c for c in json.loads(wrong.output)["checks"]}["model endpoint"]
        assert not check["ok"] and "'default' is not served" in check["detail"] and "scripted" in check["detail"]
        monkeypatch.setenv("GUIMEM_LLM__MODEL", "scripted")
        result = runner.invoke(app, ["--json", "doctor", "--no-browser", "--model"])
        check = {c["name"]: c for c in json.loads(result.output)["checks"]}["model endpoint"]
        assert check["ok"] and "scripted" in check["detail"] and "structured output: json_object" in check["detail"]
    monkeypatch.setenv("GUIMEM_LLM__BASE_URL", "http://127.0.0.1:9/v1")
    result = runner.invoke(app, ["--json", "doctor", "--no-browser", "--model"])
    assert result.exit_code == 1
    check = {c["name"]: c for c in json.loads(result.output)["checks"]}["model endpoint"]
    assert not check["ok"] and "no model server answers" in check["detail"]


def test_make_demo_runs_doctor_with_the_browser():
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    demo = makefile[makefile.index("\ndemo:"):].split("\n\n")[0]
    assert "guimem doctor" in demo and "--no-browser" not in demo
    assert os.path.exists(Path(__file__).parents[2] / "Makefile")
