"""A user's own method, env and policy, named by import path, through the real console script in a shell."""

from __future__ import annotations

import json
import tomllib

import pytest

from guimem.registry import default_registry
from tests.shell import ROOT, run_guimem, user_project

MEMORY = "mypkg.last_success:LastSuccessMemory"
ENV = "mypkg.counter:CounterEnv"


@pytest.fixture
def project(tmp_path):
    return user_project(tmp_path / "project")


def test_an_import_path_method_and_env_are_found_in_the_current_folder_as_python_m_would(project):
    done = run_guimem("eval", "--env", ENV, "--suite", "suite.json", "--rounds", "2", "--methods", MEMORY,
                      "--out", "runs/mine", "--json", cwd=project)
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)["methods"]) == {"none", MEMORY}


@pytest.mark.parametrize(("option", "value", "module"), [
    ("--methods", "mypkg.nothere:LastSuccessMemory", "mypkg.nothere"),
    ("--env", "mypkg.nothere:CounterEnv", "mypkg.nothere"),
    ("--policy", "mypkg.nothere:Agent", "mypkg.nothere"),
    ("--methods", "elsewhere.memory:Mine", "elsewhere.memory"),
])
def test_a_missing_own_module_is_one_line_before_any_episode_or_store_and_never_a_pip_suggestion(
        project, option, value, module):
    args = {"--env": ENV, "--methods": MEMORY, "--policy": "explorer", option: value}
    done = run_guimem("eval", "--suite", "suite.json", "--rounds", "1", "--out", "runs/bad",
                      *[x for pair in args.items() for x in pair], cwd=project)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot import '{module}' (looked in {project}" in lines[0], done.stderr
    assert "pip" not in done.stderr
    assert not (project / "runs" / "bad").exists()  # no spec, no results, no store


def test_a_missing_class_in_an_own_module_names_the_module_and_the_class(project):
    done = run_guimem("eval", "--env", ENV, "--suite", "suite.json", "--methods", "mypkg.last_success:Nope",
                      "--out", "runs/bad", cwd=project)
    assert done.returncode == 2 and "'mypkg.last_success' has no 'Nope'" in done.stderr, done.stderr
    assert not (project / "runs" / "bad").exists()


def test_an_own_module_that_needs_a_missing_package_says_which_without_guessing_a_pip_name(project):
    (project / "mypkg" / "heavy.py").write_text("import not_installed_anywhere\n")
    done = run_guimem("eval", "--env", ENV, "--suite", "suite.json", "--methods", "mypkg.heavy:Mine",
                      "--out", "runs/bad", cwd=project)
    assert done.returncode == 2, done.stderr
    assert "cannot import 'mypkg.heavy': it imports 'not_installed_anywhere', which is not installed" in done.stderr
    assert "pip" not in done.stderr


def test_every_extra_the_registry_suggests_is_one_of_the_projects_extras():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    reg = default_registry()
    suggested = {reg.spec(kind, name).extra for kind in ("embedder", "vector_index", "store", "llm", "env", "policy",
                                                         "memory") for name in reg.names(kind)}
    assert suggested - {None} <= extras and suggested - {None}
