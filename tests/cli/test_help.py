"""Help and counts say what is true: the registered names, flags without a type, extras as in pyproject."""

from __future__ import annotations

import re
import tomllib

import pytest

from guimem.registry import default_registry
from tests.shell import ROOT, run_guimem


@pytest.mark.parametrize("command", ["run", "eval"])
def test_help_lists_the_registered_envs_and_policies_and_shows_flags_without_a_type(tmp_path, command):
    done = run_guimem(command, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    reg = default_registry()
    for kind in ("env", "policy"):
        assert ", ".join(reg.names(kind)) in text, (kind, text)
    assert "<bool>" not in done.stdout


@pytest.mark.parametrize("command", [(), ("run",), ("eval",), ("serve",), ("recall",), ("compare",), ("report",),
                                     ("doctor",), ("memory",), ("memory", "stats"), ("memory", "export")])
def test_no_help_shows_a_type_beside_a_flag_not_even_beside_help(tmp_path, command):
    done = run_guimem(*command, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "--help" in done.stdout
    flags = [line for line in done.stdout.splitlines() if "<bool>" in line]
    assert flags == [], flags


def test_the_readme_names_every_extra_of_the_project():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    listed = re.search(r"\(extras: ([^)]*)\)", " ".join((ROOT / "README.md").read_text().split())).group(1)
    assert set(re.findall(r"`([a-z]+)`", listed)) == extras
