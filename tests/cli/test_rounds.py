"""Rounds are counted from 1 wherever a person reads them (CLI, log, report); files index them from 0."""

from __future__ import annotations

import json
import re

from tests.shell import ROOT, run_guimem, user_project


def test_a_one_round_run_speaks_of_round_1_to_people_and_indexes_it_0_in_files(tmp_path):
    project = user_project(tmp_path / "project")
    done = run_guimem("--verbose", "eval", "--env", "mypkg.counter:CounterEnv", "--suite", "suite.json", "--rounds",
                      "1", "--methods", "mypkg.last_success:LastSuccessMemory", "--out", "run", cwd=project)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "round 1 boundary" in said and not re.search(r"\bround 0\b", said), said
    assert "1 round," in done.stdout and "1 rounds" not in done.stdout, done.stdout
    stats = run_guimem("memory", "stats", "--store", "run/memory/mypkg.last_success.LastSuccessMemory.sqlite",
                       cwd=project)
    assert "learned through round 1" in stats.stdout, stats.stdout
    page = (project / "run" / "report.html").read_text()
    assert "round 1" in page and not re.search(r"\bround 0\b", page)
    results = (project / "run" / "results.jsonl").read_text().splitlines()
    assert {json.loads(line)["round_index"] for line in results} == {0}
    assert (project / "run" / "traces" / "none" / "round-0.jsonl").exists()


def test_the_formats_doc_says_the_base_of_every_round_field():
    doc = (ROOT / "docs" / "formats.md").read_text()
    section = doc.split("## Rounds", 1)[1].split("\n## ", 1)[0]
    for name in ("`round`", "round-<r>", "`round_index`", "`committed_round_index`", "`boundaries_applied`",
                 "`round_indexes`", "`/v1/stats`", "`/v1/runs`", "`rounds`", "version 2"):
        assert name in section, name
