from __future__ import annotations

import json

import pytest

from guimem.errors import SuiteError
from guimem.tasks import builtin_suites, load_suite


def test_shipped_suites_load_and_have_the_promised_sizes():
    assert {"smoke", "default", "demo"} <= set(builtin_suites())
    assert len(load_suite("smoke").tasks) == 10
    default = load_suite("default")
    assert len(default.task_names()) == 20 and len(default.tasks) == 40


def test_custom_suite_files_in_json_and_yaml(tmp_path):
    (tmp_path / "mine.json").write_text(json.dumps({"name": "mine", "tasks": [{"task": "click-link", "seed": 77}]}))
    (tmp_path / "other.yaml").write_text("tasks:\n  - task: enter-text\n    seed: 9\n    max_steps: 4\n")
    assert load_suite(str(tmp_path / "mine.json")).tasks[0].seed == 77
    other = load_suite(str(tmp_path / "other.yaml"))
    assert other.name == "other" and other.tasks[0].max_steps == 4


def test_malformed_suite_names_the_field(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", "tasks": [{"task": "x", "seed": "many"}]}))
    with pytest.raises(SuiteError) as info:
        load_suite(str(path))
    assert info.value.field == "tasks.0.seed" and "bad.json" in str(info.value)


def test_unparseable_suite_file_is_a_clear_error(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"tasks": [')
    with pytest.raises(SuiteError, match="not valid JSON"):
        load_suite(str(path))


def test_unknown_task_names_get_did_you_mean():
    suite = load_suite("smoke")
    bad = suite.model_copy(update={"tasks": (*suite.tasks, suite.tasks[0].model_copy(update={"task": "login-usr"}))})
    with pytest.raises(SuiteError, match="did you mean 'login-user'"):
        bad.check_tasks(["login-user", "click-test-2", "click-button", "enter-text", "choose-list"])


def test_unknown_suite_name_suggests_a_shipped_one():
    with pytest.raises(SuiteError, match="did you mean 'default'"):
        load_suite("defualt")
