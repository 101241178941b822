"""Train/test transfer (`guimem eval --learn-suite A --suite B`): memory learned over A's rounds, then used on
B with leave-one-task-out, resumable, and said so in the summary and the report."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from guimem.cli.app import app

runner = CliRunner()


def _suite(path, name, task, seeds):
    path.write_text(json.dumps({"name": name, "env": "form",
                                "tasks": [{"task": task, "seed": s, "max_steps": 5} for s in seeds]}))
    return str(path)


def test_memory_learned_on_one_suite_is_used_on_another_and_the_run_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    learn = _suite(tmp_path / "a.json", "form-a", "form-a", [1, 2])
    test = _suite(tmp_path / "b.json", "form-b", "form-b", [3, 4])
    out = tmp_path / "run"
    args = ["eval", "--env", "form", "--learn-suite", learn, "--suite", test, "--rounds", "2", "--methods",
            "graph,stack", "--out", str(out), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["run"]["suite"] == "form-b" and summary["run"]["learned_on"] == "form-a"
    assert summary["run"]["exclude_source_task"] is True
    learned = [json.loads(x) for x in (out / "learn" / "results.jsonl").read_text().splitlines()]
    assert {r["task"] for r in learned} == {"form-a"} and len(learned) == 2 * 2 * 3
    tested = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    first = [r for r in tested if r["round_index"] == 0 and r["method"] == "graph"]
    assert first and all(r["injected_tokens"] > 0 for r in first), "round 1 of B already recalls what A taught"
    assert "learned on <b>form-a</b>" in (out / "report.html").read_text()
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert len((out / "results.jsonl").read_text().splitlines()) == len(tested), "a rerun resumes, repeats nothing"


def test_train_test_refuses_a_shared_store(tmp_path):
    learn = _suite(tmp_path / "a.json", "form-a", "form-a", [1])
    result = runner.invoke(app, ["eval", "--env", "form", "--learn-suite", learn, "--suite", learn, "--store",
                                 "postgresql://u@127.0.0.1:9/db", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "--learn-suite" in result.output


def test_the_report_shows_which_other_tasks_items_reached_each_task(tmp_path, monkeypatch):
    from guimem.harness.reportdata import EpisodeView
    from guimem.harness.transfermatrix import transfer_rows, transfer_section

    views = [EpisodeView(method="graph", round=1, task="b", seed=1, success=True, sources=["a"]),
             EpisodeView(method="graph", round=1, task="b", seed=2, success=False, sources=["a", "<c>"]),
             EpisodeView(method="graph", round=1, task="a", seed=1, success=True)]
    assert transfer_rows(views) == [("graph", "b", "<c>", 1, 0), ("graph", "b", "a", 2, 1)]
    html = transfer_section(views)
    assert "&lt;c&gt;" in html and "<c>" not in html
    assert transfer_section(views[2:]) == ""


def test_a_train_test_report_holds_the_transfer_matrix(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    learn = _suite(tmp_path / "a.json", "form-a", "form-a", [1, 2])
    test = _suite(tmp_path / "b.json", "form-b", "form-b", [3])
    out = tmp_path / "run"
    assert runner.invoke(app, ["eval", "--env", "form", "--learn-suite", learn, "--suite", test, "--rounds", "1",
                               "--methods", "graph", "--out", str(out)]).exit_code == 0
    page = (out / "report.html").read_text()
    assert "Transfer: items from other tasks" in page and "<td>form-b</td><td>form-a</td><td>other</td>" in page


def test_twins_are_told_apart_from_siblings_and_unrelated_tasks():
    from guimem.harness.transfermatrix import relation

    assert relation("click-pie-nodelay", "click-pie") == "twin" and relation("login-user", "login-user-popup") == "twin"
    assert relation("email-inbox-reply", "email-inbox-forward") == "sibling"
    assert relation("click-pie", "click-dialog") == "other"
