from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guimem.errors import FileConflictError, TrajectoryFormatError
from guimem.types import (
    Action,
    ActionKind,
    Outcome,
    Role,
    Selector,
    Step,
    Task,
    Trajectory,
    append_trajectory,
    read_trajectories,
    write_atomic,
    write_trajectories,
)
from tests.conftest import login_screen


def make_trajectory(success: bool = True, username: str = "alice") -> Trajectory:
    obs = login_screen()
    steps = (
        Step(index=0, observation=obs, action=Action(kind=ActionKind.TYPE, ref="2", text=username,
             selector=Selector(role=Role.TEXTBOX, label="Username"))),
        Step(index=1, observation=obs, action=Action(kind=ActionKind.TAP, ref="5",
             selector=Selector(role=Role.BUTTON, text="Login"))),
    )
    task = Task(id="login-user", goal=f'Log in as "{username}"', app="miniwob", params={"username": username})
    return Trajectory(task=task, steps=steps, outcome=Outcome(success=success, score=1.0 if success else -1.0))


def test_trajectories_round_trip_through_jsonl(tmp_path):
    path = tmp_path / "t.jsonl"
    trajs = [make_trajectory(), make_trajectory(success=False)]
    write_trajectories(path, trajs)
    append_trajectory(path, make_trajectory(username="bob"))
    back = read_trajectories(path)
    assert back[:2] == trajs and back[2].task.params["username"] == "bob"


def test_an_atomic_write_replaces_a_link_never_writing_through_it(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "out.json").symlink_to(victim)
    write_atomic(tmp_path / "out.json", "new")
    assert victim.read_text() == "keep me" and not (tmp_path / "out.json").is_symlink()
    assert (tmp_path / "out.json").read_text() == "new" and len(list(tmp_path.iterdir())) == 2, "no temp file left"


def test_an_atomic_write_under_a_file_names_the_path_and_leaves_it_alone(tmp_path):
    (tmp_path / "plain").write_text("a file")
    with pytest.raises(FileConflictError) as info:
        write_atomic(tmp_path / "plain" / "out.json", b"{}")
    assert "plain" in str(info.value) and (tmp_path / "plain").read_text() == "a file"


def test_a_failed_atomic_write_keeps_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "spec.json"
    write_atomic(path, "old")
    monkeypatch.setattr("os.replace", lambda *_: (_ for _ in ()).throw(OSError("disk gone")))
    with pytest.raises(OSError):
        write_atomic(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["spec.json"]


@settings(max_examples=30)
@given(st.text(max_size=30), st.booleans(), st.floats(-1, 1, allow_nan=False))
def test_any_trajectory_round_trips(username, success, score):
    t = make_trajectory(success=success, username=username)
    t = t.model_copy(update={"outcome": Outcome(success=success, score=score)})
    assert Trajectory.model_validate_json(t.model_dump_json()) == t


def test_malformed_json_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(make_trajectory().model_dump_json() + "\n{not json\n")
    with pytest.raises(TrajectoryFormatError) as info:
        read_trajectories(path)
    assert info.value.line == 2 and str(path) in str(info.value)


def test_wrong_field_names_the_field(tmp_path):
    raw = json.loads(make_trajectory().model_dump_json())
    raw["steps"][1]["action"]["kind"] = "teleport"
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(raw) + "\n")
    with pytest.raises(TrajectoryFormatError) as info:
        read_trajectories(path)
    assert info.value.field == "steps.1.action.kind"
    assert "bad.jsonl:1" in str(info.value)


def test_future_format_version_is_refused(tmp_path):
    raw = json.loads(make_trajectory().model_dump_json())
    raw["version"] = 99
    path = tmp_path / "v.jsonl"
    path.write_text(json.dumps(raw) + "\n")
    with pytest.raises(TrajectoryFormatError, match="version 99"):
        read_trajectories(path)


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity"])
def test_a_number_that_is_not_finite_fails_its_line(tmp_path, number):
    good = make_trajectory().model_dump_json()
    path = tmp_path / "inf.jsonl"
    path.write_text(good + "\n" + good.replace('"wall_ms":0.0', f'"wall_ms":{number}') + "\n")
    with pytest.raises(TrajectoryFormatError) as info:
        read_trajectories(path)
    assert info.value.line == 2 and "number" in info.value.message


def test_a_model_refuses_infinity_given_in_python_too():
    with pytest.raises(ValueError, match="finite"):
        make_trajectory().model_validate({**make_trajectory().model_dump(), "wall_ms": float("inf")})


@pytest.mark.parametrize("opening", ["[", '{"a":'])
def test_a_line_nested_100k_deep_fails_its_line_without_recursion(tmp_path, opening):
    path = tmp_path / "deep.jsonl"
    path.write_text(opening * 100_000 + "\n")
    with pytest.raises(TrajectoryFormatError, match="nested deeper") as info:
        read_trajectories(path)
    assert info.value.line == 1
