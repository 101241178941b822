"""The observation format `recall` takes: documented, shipped as an example, and used as written."""

from __future__ import annotations

import json
import re

import pytest

from guimem.types import Observation
from tests.shell import ROOT, run_guimem

EXAMPLE = ROOT / "examples" / "observation.json"


def test_the_formats_doc_shows_the_shipped_observation_example_and_it_is_an_observation():
    doc = (ROOT / "docs" / "formats.md").read_text()
    section = doc.split("## Observations", 1)[1].split("\n## ", 1)[0]
    shown = json.loads(re.search(r"```json\n(.*?)```", section, re.DOTALL).group(1))
    assert shown == json.loads(EXAMPLE.read_text())
    assert Observation.model_validate(shown).elements
    assert "examples/observation.json" in section and "--task" in section


@pytest.fixture(scope="module")
def form_memory(tmp_path_factory):
    out = tmp_path_factory.mktemp("recall")
    suite = str(ROOT / "tests" / "data" / "form_suite.json")
    done = run_guimem("eval", "--env", "form", "--suite", suite, "--rounds", "2", "--methods", "stack",
                      "--out", "run", cwd=out)
    assert done.returncode == 0, done.stderr
    return out, "run/memory/stack.sqlite"


def test_recall_reads_the_example_observation_and_recalls_for_the_task_it_learned(form_memory):
    cwd, store = form_memory
    done = run_guimem("recall", "--store", store, "--goal", 'Enter the username "ann" and the password "x1", then '
                      "press Login.", "--observation", str(EXAMPLE), "--task", "form", "--param", "username=ann",
                      "--param", "password=x1", "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["injection"]["items"], done.stdout
    assert "nothing recalled" not in done.stderr


def test_recall_without_task_says_in_one_line_why_it_recalled_nothing(form_memory):
    cwd, store = form_memory
    done = run_guimem("recall", "--store", store, "--goal", "Log in.", "--observation", str(EXAMPLE), cwd=cwd)
    assert done.returncode == 0 and done.stdout.startswith("(nothing injected"), done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no --task was given" in lines[0], done.stderr


def test_recall_warns_about_an_observation_without_elements(form_memory, tmp_path):
    cwd, store = form_memory
    bare = tmp_path / "bare.json"
    bare.write_text('{"app": "miniwob"}')
    done = run_guimem("recall", "--store", store, "--goal", "g", "--observation", str(bare), "--task", "form",
                      cwd=cwd)
    assert done.returncode == 0 and "the observation has no elements" in done.stderr, done.stderr
