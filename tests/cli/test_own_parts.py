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


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """A user's project after ``guimem eval`` ran its own method for two rounds."""
    project = user_project(tmp_path_factory.mktemp("ran") / "project")
    done = run_guimem("eval", "--env", ENV, "--suite", "suite.json", "--rounds", "2", "--methods", MEMORY,
                      "--out", "runs/mine", cwd=project)
    assert done.returncode == 0, done.stderr
    return project


STORE = "runs/mine/memory/mypkg.last_success.LastSuccessMemory.sqlite"


@pytest.mark.parametrize("name", [MEMORY, "lastsuccessmemory", "last-success"])
def test_a_custom_methods_memory_is_found_by_its_import_path_namespace_or_own_name(ran, name):
    done = run_guimem("memory", "stats", "--store", STORE, "--method", name, "--json", cwd=ran)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    # every episode of the two rounds (3 tasks each) was logged as one event at its round's boundary
    assert (stats["method"], stats["namespace"], stats["events"], stats["committed_round_index"]) == (
        "last-success", "lastsuccessmemory", 6, 1)


def test_memory_stats_without_a_method_shows_the_stores_only_memory(ran):
    done = run_guimem("memory", "stats", "--store", STORE, "--json", cwd=ran)
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["namespace"], json.loads(done.stdout)["events"]) == ("lastsuccessmemory", 6)
    text = run_guimem("memory", "stats", "--store", STORE, cwd=ran)
    assert text.stdout.startswith("last-success (lastsuccessmemory): 6 events"), text.stdout


def test_a_name_the_store_does_not_hold_says_what_it_holds(ran):
    done = run_guimem("memory", "list", "--store", STORE, "--method", "lastsucces", cwd=ran)
    assert done.returncode == 2 and "did you mean" in done.stderr and "'lastsuccessmemory'" in done.stderr, done.stderr


def _learned(path, *methods: str) -> None:
    from guimem.memory.factory import open_memory
    from guimem.settings import GuimemSettings
    from guimem.storage import create_store
    from guimem.testing.memory import form_episodes

    settings = GuimemSettings()
    settings.embedder.name = "hashing"
    for method in methods:
        memory = open_memory(method, create_store(str(path)), settings)
        memory.commit_round(0, form_episodes())
        memory.close()


def test_a_store_of_a_shipped_method_other_than_steer_is_read_without_method(tmp_path):
    _learned(tmp_path / "m.sqlite", "append_all_similarity")
    stats = run_guimem("memory", "stats", "--store", "m.sqlite", cwd=tmp_path)
    assert stats.stdout.startswith("append_all_similarity (append_all_similarity): "), stats.stdout
    items = run_guimem("memory", "list", "--store", "m.sqlite", "--json", cwd=tmp_path)
    assert items.returncode == 0 and json.loads(items.stdout), items.stderr


def test_memory_stats_without_a_method_lists_the_memories_of_a_store_holding_several(tmp_path):
    _learned(tmp_path / "m.sqlite", "append_all_similarity", "append_all_operational")
    listed = run_guimem("memory", "stats", "--store", "m.sqlite", "--json", cwd=tmp_path)
    assert [(m["namespace"], m["method"]) for m in json.loads(listed.stdout)] == [
        ("append_all_operational", "append_all_operational"), ("append_all_similarity", "append_all_similarity")]
    text = run_guimem("memory", "stats", "--store", "m.sqlite", cwd=tmp_path).stdout
    assert "holds 2 memories (give --method to see one)" in text and "steer" not in text, text
    chosen = run_guimem("memory", "list", "--store", "m.sqlite", cwd=tmp_path)
    assert chosen.returncode == 2 and "give --method" in chosen.stderr, chosen.stderr


BROKEN = '''
from guimem.memory.base import RoundLog, StoredRounds


class BadCtor:
    def __init__(self, store):
        self.store = store


class NoRecall(StoredRounds):
    def __init__(self, kit, spec, env_factory=None):
        self.rounds = RoundLog(kit.store, kit.namespace)


def plain():
    return None


class NoKw:
    def __init__(self):
        pass


NOT_CALLABLE = 3
'''


@pytest.mark.parametrize(("args", "said"), [
    (("--methods", "mypkg.broken:BadCtor"), "cannot be built as a memory"),
    (("--methods", "mypkg.broken:NoRecall"), "is abstract: it does not implement"),
    (("--methods", "mypkg.broken:plain"), "cannot be built as a memory"),
    (("--methods", "mypkg.broken:NOT_CALLABLE"), "is a int, not a class or function"),
    (("--methods", MEMORY, "--policy", "mypkg.broken:NoKw"), "cannot be built as a policy"),
    (("--methods", MEMORY, "--context", "conac"), "unknown context strategy 'conac'"),
    (("--methods", MEMORY, "--backend", "rey"), "unknown backend 'rey'"),
])
def test_an_own_part_that_imports_but_cannot_be_built_and_a_mistyped_option_are_one_line_before_anything(
        project, args, said):
    (project / "mypkg" / "broken.py").write_text(BROKEN)
    done = run_guimem("eval", "--env", ENV, "--suite", "suite.json", "--rounds", "1", "--out", "runs/bad", *args,
                      cwd=project)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "fix:" in lines[0], done.stderr
    assert not (project / "runs" / "bad").exists()  # no spec, no results, no store: the fixed command runs


def test_learn_with_an_own_memory_that_cannot_be_built_is_one_line_and_makes_no_store(project, tmp_path):
    (project / "mypkg" / "broken.py").write_text(BROKEN)
    episodes = tmp_path / "none.jsonl"
    episodes.write_text("")
    done = run_guimem("learn", str(episodes), "--store", "s.sqlite", "--method", "mypkg.broken:BadCtor", cwd=project)
    assert done.returncode == 2 and "cannot be built as a memory" in done.stderr, done.stderr
    assert not (project / "s.sqlite").exists()


def test_a_class_name_with_no_near_miss_lists_what_the_module_defines(project):
    done = run_guimem("eval", "--env", ENV, "--suite", "suite.json", "--methods", "mypkg.last_success:Zzz",
                      "--out", "runs/bad", cwd=project)
    assert done.returncode == 2 and "fix: it defines LastSuccessMemory" in done.stderr.replace("\n", " "), done.stderr
