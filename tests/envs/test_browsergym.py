"""BrowserGym in real headless Chromium: Playwright drives Debian's chromium (nothing downloaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from guimem.cli.app import app
from guimem.envs.bgym_obs import parse_observation
from guimem.envs.browsergym import BrowserGymEnv, check_benchmark, use_system_chromium
from guimem.envs.miniwob import MiniWoBEnv
from guimem.errors import EnvNotReadyError, MissingDependencyError, SuiteError
from guimem.harness.runfiles import RunDir
from guimem.testing import check_env
from guimem.types import Action, ActionErrorCode, ActionKind, Task, screen_signature

pytestmark = pytest.mark.browser
ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def env():
    e = BrowserGymEnv()
    yield e
    e.close()


def test_browsergym_env_passes_the_env_contract() -> None:
    assert check_env(BrowserGymEnv(), Task(id="miniwob.click-test-2", goal="", app="browsergym", seed=3)) == []


def test_guimem_run_solves_click_test_2_with_the_explorer(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--json", "run", "--env", "browsergym", "--task", "miniwob.click-test-2",
                                      "--seed", "3", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    traj = json.loads((tmp_path / "trajectories.jsonl").read_text().splitlines()[0])
    assert traj["outcome"]["success"] is True and traj["task"]["id"] == "click-test-2"


def test_guimem_eval_on_a_two_task_suite_writes_a_complete_run(tmp_path: Path) -> None:
    suite = tmp_path / "two.json"
    suite.write_text(json.dumps({"name": "two", "env": "browsergym", "tasks": [
        {"task": "miniwob.click-test-2", "seed": 1, "max_steps": 3},
        {"task": "miniwob.click-button", "seed": 1, "max_steps": 4}]}))
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["eval", "--suite", str(suite), "--rounds", "2", "--methods", "steer",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    results = RunDir(out).results()
    assert len(results) == 2 * 2 * 2 and all(r.infra is None for r in results)
    for name in ("summary.json", "report.html", "run_spec.json"):
        assert (out / name).is_file()
    assert json.loads((out / "run_spec.json").read_text())["env"] == "browsergym"


def test_action_errors_are_values_and_typing_fills_the_field(env: BrowserGymEnv) -> None:
    obs = env.reset(Task(id="enter-text", goal="", app="x", seed=2))
    field = next(e for e in obs.elements if e.editable)
    out = env.step(Action(kind=ActionKind.TYPE, ref=field.ref, text="it's \"odd\" \\ text"))
    assert out.error is None
    assert next(e for e in out.observation.elements if e.ref == field.ref).value == "it's \"odd\" \\ text"
    button = next(e for e in obs.elements if e.role.value == "button")
    bad = env.step(Action(kind=ActionKind.TYPE, ref=button.ref, text="x"))
    assert bad.error is not None and bad.error.code is ActionErrorCode.NOT_EDITABLE


def test_the_same_screen_reads_the_same_in_both_envs(env: BrowserGymEnv) -> None:
    """BrowserGym seeds its pages its own way; re-seeding its page as the miniwob env does shows the same
    instance, and then both envs must give the same screen signature."""
    mini = MiniWoBEnv()
    try:
        for name in ("login-user", "choose-list", "click-tab-2", "click-checkboxes"):
            ours = mini.reset(Task(id=name, goal="", app="miniwob", seed=4))
            env.reset(Task(id=name, goal="", app="x", seed=4))
            page = env.gym_env.unwrapped.page
            page.evaluate("() => { core.endEpisode(0); Math.seedrandom(4); core.setDataMode('train'); "
                          "core.EPISODE_MAX_TIME = 1e9; core.startEpisodeReal(); }")
            page.wait_for_function("() => WOB_TASK_READY")
            theirs = parse_observation(env.gym_env.unwrapped._get_obs(), app="miniwob").observation
            masks = list(mini.task.params.values())
            assert screen_signature(theirs, masks) == screen_signature(ours, masks), name
    finally:
        mini.close()


def test_unknown_tasks_and_missing_servers_are_named() -> None:
    with pytest.raises(SuiteError, match="no task"):
        BrowserGymEnv().reset(Task(id="miniwob.no-such-task", goal="", app="x"))
    with pytest.raises(MissingDependencyError, match="browsergym-webarena"):
        check_benchmark("webarena")
    sys.modules["browsergym.webarena"] = types.ModuleType("browsergym.webarena")
    try:
        saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("WA_")}
        with pytest.raises(EnvNotReadyError, match="WA_SHOPPING"):
            check_benchmark("webarena")
        os.environ.update(saved)
    finally:
        del sys.modules["browsergym.webarena"]


def test_a_missing_browser_is_an_infrastructure_error() -> None:
    with pytest.raises(EnvNotReadyError, match="chromium not found"):
        use_system_chromium("/nonexistent/chromium")


def test_the_wrapper_example_runs_as_written(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "browsergym_memory.py")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line for line in out.stdout.splitlines() if line.startswith("seed ")]
    assert len(lines) == 3 and all("reward 1.0" in line for line in lines)
    assert (tmp_path / "bgym-memory.sqlite").is_file()
