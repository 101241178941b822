"""UI versions of the same task (`guimem.envs.drift`): each kind of change does what it says, the task stays
solvable, the goal and success check never change, and an evaluation shows v1 from the round asked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guimem.envs.drift import (
    DRIFT_KINDS,
    NOTICE_CONTAINER,
    DriftEnv,
    Rewrite,
    kinds_of,
    rewrite,
    version_for_round,
)
from guimem.errors import ConfigError
from guimem.testing import check_env
from guimem.testing.envs import FormEnv
from guimem.types import Action, ActionErrorCode, ActionKind, Observation, Role, Task, page_view

SCREENS = Path(__file__).parent.parent / "data" / "screens"
TASK = Task(id="form", goal="", app="form", seed=3)


def recorded(name: str) -> tuple[Observation, Task]:
    data = json.loads((SCREENS / f"{name}.json").read_text())
    return Observation.model_validate(data["observation"]), Task.model_validate(data["task"])


def solve(env: DriftEnv, obs: Observation) -> bool:
    """Fill the form as the goal says and press the button it names, reading only what this version shows."""
    notice = [el for el in obs.elements if el.container == NOTICE_CONTAINER and el.role is Role.BUTTON]
    if notice:
        obs = env.step(Action(kind=ActionKind.TAP, ref=notice[0].ref)).observation
    for field, value in env.task.params.items():
        box = next(el for el in obs.elements if el.role is Role.TEXTBOX and el.label == field)
        obs = env.step(Action(kind=ActionKind.TYPE, ref=box.ref, text=value)).observation
    press = next(el for el in obs.elements if el.role is Role.BUTTON and el.text == "Login")
    assert env.step(Action(kind=ActionKind.TAP, ref=press.ref)).done
    return env.evaluate().success


def test_v0_is_the_page_as_it_is():
    plain, drifted = FormEnv(), DriftEnv(FormEnv())
    assert drifted.reset(TASK) == plain.reset(TASK)


@pytest.mark.parametrize("kind", DRIFT_KINDS)
def test_each_kind_changes_what_it_says_and_the_task_is_still_solvable(kind):
    before = FormEnv().reset(TASK)
    env = DriftEnv(FormEnv(), "v1", frozenset({kind}))
    after = env.reset(TASK)
    assert after != before or kind == "move", kind  # the form has no geometry: move is checked on a real page
    if kind == "relabel":
        cancel = next(el for el in before.elements if el.text == "Cancel").ref
        assert next(el for el in after.elements if el.ref == cancel).text in ("Dismiss", "Never mind")
        assert any(el.text == "Login" for el in after.elements), "the goal says Login: never relabelled"
    if kind == "reorder":
        buttons = [el for el in after.elements if el.role is Role.BUTTON]
        assert [b.text for b in buttons] == ["Cancel", "Login"], "the two buttons swapped places"
    if kind == "rename":
        ids = {el.resource_id for el in after.elements if el.resource_id}
        assert ids and not ids & {"username", "password"} and all(i.startswith(("username-", "password-")) for i in ids)
    if kind == "interstitial":
        assert after.elements[0].container == NOTICE_CONTAINER and len(after.elements) == len(before.elements) + 2
    plain = FormEnv()
    plain.reset(TASK)
    assert env.task == plain.task, "the goal and values never change"
    assert solve(env, after), f"{kind}: the task is still solvable"


def test_a_notice_refuses_every_action_but_its_dismissal_as_data():
    env = DriftEnv(FormEnv(), "v1", frozenset({"interstitial"}))
    obs = env.reset(TASK)
    box = next(el for el in obs.elements if el.role is Role.TEXTBOX)
    result = env.step(Action(kind=ActionKind.TYPE, ref=box.ref, text="x"))
    assert result.error is not None and result.error.code is ActionErrorCode.ENV_REJECTED and not result.done
    assert env.inner.actions == [], "nothing reached the page under the notice"
    assert solve(env, result.observation)


def test_versions_are_deterministic_and_each_later_one_is_its_own():
    one = [DriftEnv(FormEnv(), "v1").reset(TASK) for _ in range(2)]
    assert one[0] == one[1]
    two = DriftEnv(FormEnv(), "v2").reset(TASK)
    assert {e.resource_id for e in two.elements} != {e.resource_id for e in one[0].elements}


def test_on_a_recorded_miniwob_page_ids_containers_and_layout_change_and_so_does_the_screen_s_identity():
    obs, task = recorded("email-inbox-reply-501-inbox")
    rw = Rewrite.of("v1", frozenset(DRIFT_KINDS), task)
    after = rewrite(obs, rw)
    assert after.location != obs.location and after.location == page_view(after.elements)
    moved = [(a.bounds.y - b.bounds.y) for a, b in zip(after.elements, obs.elements, strict=True)]
    assert min(moved) > 0, "the layout moved down"
    assert all(a.ref == b.ref for a, b in zip(after.elements, obs.elements, strict=True)), "refs are kept"
    relabelled = {b.name: a.name for a, b in zip(after.elements, obs.elements, strict=True) if a.name != b.name}
    assert "reply" not in {k.lower() for k in relabelled}, "the goal says reply: never relabelled"


def test_rounds_before_drift_show_v0_and_from_it_on_the_later_version_which_says_what_it_changes():
    assert [version_for_round(r, 3) for r in range(5)] == ["v0", "v0", "v1", "v1", "v1"]
    assert [version_for_round(r, 2, "v2") for r in range(3)] == ["v0", "v2", "v2"]
    assert [version_for_round(r, 0) for r in range(3)] == ["v0"] * 3
    assert kinds_of("v0") == frozenset() and "interstitial" not in kinds_of("v1")
    assert kinds_of("v2") == kinds_of("v7") == frozenset(DRIFT_KINDS)
    notice = DriftEnv(FormEnv(), "v2").reset(TASK).elements[0]
    assert notice.container == NOTICE_CONTAINER and DriftEnv(FormEnv(), "v1").reset(TASK).elements[0] != notice


def test_the_wrapped_env_passes_the_env_contract():
    assert check_env(DriftEnv(FormEnv(), "v1"), TASK) == []


@pytest.mark.parametrize("bad", ["v", "1", "v1a", "version1", "v1234"])
def test_a_version_that_is_not_vn_is_refused_with_the_form_it_takes(bad):
    with pytest.raises(ConfigError, match="v0, v1"):
        DriftEnv(FormEnv(), bad)
    with pytest.raises(ConfigError, match="unknown drift kinds"):
        DriftEnv(FormEnv(), "v1", frozenset({"recolour"}))


def test_an_evaluation_shows_v1_from_the_drift_round_on_and_says_so_in_every_result(tmp_path):
    from guimem.harness.evaluate import Evaluation
    from guimem.harness.runfiles import EvalSpec, RunDir
    from guimem.settings import GuimemSettings
    from guimem.tasks import load_suite

    settings = GuimemSettings()
    settings.embedder.name = "hashing"
    suite = load_suite(str(Path(__file__).parent.parent / "data" / "form_suite.json"))
    spec = EvalSpec(env="form", suite=suite, rounds=3, methods=["none", "graph"], embedder="hashing:384",
                    drift_at=2)
    Evaluation(spec, tmp_path, settings).run()
    results = RunDir(tmp_path).results()
    assert {(r.round, r.ui_version) for r in results} == {(0, "v0"), (1, "v1"), (2, "v1")}
    assert json.loads((tmp_path / "run_spec.json").read_text())["drift_at"] == 2
    with pytest.raises(Exception, match="different run"):  # a resumed run must not change the drift round
        Evaluation(spec.model_copy(update={"drift_at": 3}), tmp_path, settings).run()
    first, later = (_steps(tmp_path / "traces" / "none" / f"round-{k}.jsonl")[0].observation for k in (0, 1))
    assert {el.resource_id for el in first.elements} != {el.resource_id for el in later.elements}, "v1 was seen"


def _steps(path: Path):
    from guimem.types import read_trajectories

    return [s for t in read_trajectories(path) for s in t.steps]


def test_the_cli_refuses_a_drift_round_after_the_last_and_a_version_that_is_not_one(tmp_path):
    from typer.testing import CliRunner

    from guimem.cli.app import app

    got = CliRunner().invoke(app, ["eval", "--suite", "demo", "--rounds", "2", "--drift-at", "3", "--out",
                                   str(tmp_path / "run")])
    assert got.exit_code == 2 and "after the last of 2 rounds" in got.output, got.output
    got = CliRunner().invoke(app, ["run", "--task", "click-test", "--drift", "next", "--out", str(tmp_path / "r")])
    assert got.exit_code == 2 and "v0, v1" in got.output, got.output


@pytest.mark.browser
def test_a_real_miniwob_page_at_v1_passes_the_contract_and_is_still_solvable():
    from guimem.envs.miniwob import MiniWoBEnv

    env = DriftEnv(MiniWoBEnv(), "v2")
    task = Task(id="login-user", goal="", app="miniwob", seed=5)
    try:
        assert check_env(env, task) == []
        obs = env.reset(task)
        plain_ids = {"username", "password"}
        assert not plain_ids & {el.resource_id for el in obs.elements}, "ids renamed on the page the agent sees"
        notice = next(el for el in obs.elements if el.container == NOTICE_CONTAINER and el.role is Role.BUTTON)
        obs = env.step(Action(kind=ActionKind.TAP, ref=notice.ref)).observation
        for field in ("username", "password"):
            box = next(el for el in obs.elements if el.role is Role.TEXTBOX and el.label == field)
            obs = env.step(Action(kind=ActionKind.TYPE, ref=box.ref, text=env.task.params[field])).observation
        login = next(el for el in obs.elements if el.role is Role.BUTTON and el.text.lower() == "login")
        assert env.step(Action(kind=ActionKind.TAP, ref=login.ref)).done
        assert env.evaluate().success
    finally:
        env.close()


def test_the_summary_and_report_say_which_version_each_round_showed_and_pass_at_k_per_version(tmp_path):
    from guimem.harness.evaluate import Evaluation
    from guimem.harness.runfiles import EvalSpec
    from guimem.settings import GuimemSettings
    from guimem.tasks import load_suite

    settings = GuimemSettings()
    settings.embedder.name = "hashing"
    suite = load_suite(str(Path(__file__).parent.parent / "data" / "form_suite.json")).model_copy(
        update={"drift_at": 2})
    spec = EvalSpec(env="form", suite=suite, rounds=3, methods=["none"], embedder="hashing:384",
                    drift_at=suite.drift_at)
    summary = Evaluation(spec, tmp_path, settings).run()
    none = summary.methods["none"]
    assert [r.ui_version for r in none.rounds] == ["v0", "v1", "v1"] and summary.run["drift_at"] == 2
    assert set(none.pass_at_k_by_version) == {"v0", "v1"} and set(none.pass_at_k_by_version["v1"]) == {"1", "2"}
    html = (tmp_path / "report.html").read_text()
    assert "UI drift" in html and "round 2 (v1)" in html and "Pass@2 v1" in html


def test_a_skill_whose_second_step_s_target_was_relabelled_stops_with_a_recorded_error():
    from guimem.memory.program import SkillProgram, execute
    from guimem.types import Selector

    program = SkillProgram.from_templates((
        Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="username"), text="{username}"),
        Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="Cancel"))))
    for version, broken in (("v0", False), ("v1", True)):
        env = DriftEnv(FormEnv(), version, frozenset({"relabel"}))
        run = execute(env, program, {"username": "x"}, env.reset(TASK), name="s")
        assert len(run.performed) == (1 if broken else 2), version
        if broken:
            assert run.error is not None and run.error.code is ActionErrorCode.SKILL_FAILED
            assert "step 1" in run.error.message and not run.done
        else:
            assert run.error is None


def test_after_the_change_memory_re_grounds_what_it_can_and_the_summary_and_report_count_it(tmp_path):
    """The form's fields keep their labels at v1 but their ids are renamed: what graph learned at v0 is found
    again (re-grounded), counted per round in the summary and shown in the report's drift table."""
    from guimem.harness.evaluate import Evaluation
    from guimem.harness.runfiles import EvalSpec
    from guimem.settings import GuimemSettings
    from guimem.tasks import load_suite

    settings = GuimemSettings()
    settings.embedder.name = "hashing"
    suite = load_suite(str(Path(__file__).parent.parent / "data" / "form_suite.json"))
    spec = EvalSpec(env="form", suite=suite, rounds=3, methods=["graph"], embedder="hashing:384", drift_at=2)
    summary = Evaluation(spec, tmp_path, settings).run()
    rounds = summary.methods["graph"].rounds
    assert rounds[0].regrounded_items == 0 and rounds[0].stale_items == 0, "nothing changed in round 1"
    assert rounds[1].regrounded_items > 0, [r.model_dump() for r in rounds]
    html = (tmp_path / "report.html").read_text()
    assert "stale / re-grounded / retired" in html
