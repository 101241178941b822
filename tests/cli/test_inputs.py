"""Every bad CLI input gets one line naming the problem and the fix, exit code 2, and no traceback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from guimem.cli.app import app

runner = CliRunner()
SUITE = str(Path(__file__).parent.parent / "data" / "form_suite.json")


@pytest.fixture(autouse=True)
def hashing(monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")


def refused(args: list[str], *words: str) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "fix:" in lines[0], result.output
    for w in words:
        assert w in result.output, result.output
    return result.output


def _eval(out: Path, *extra: str) -> list[str]:
    return ["eval", "--env", "form", "--suite", SUITE, "--rounds", "2", "--out", str(out), *extra]


def test_empty_methods_are_refused_not_run_as_none_only(tmp_path):
    refused(_eval(tmp_path / "run", "--methods", ""), "names no method")
    refused(_eval(tmp_path / "run", "--methods", " , "), "names no method")
    assert not (tmp_path / "run").exists()


def test_out_that_is_a_file_or_cannot_be_created_is_refused(tmp_path):
    existing = tmp_path / "file.txt"
    existing.write_text("x")
    refused(_eval(existing, "--methods", "graph"), "is a file")
    refused(_eval(Path("/proc/nope"), "--methods", "graph"), "cannot create the run folder")


def test_read_only_commands_never_create_a_store(tmp_path):
    missing = tmp_path / "sub" / "missing.sqlite"
    obs = tmp_path / "obs.json"
    obs.write_text('{"app": "form", "elements": []}')
    for args in (["memory", "stats"], ["memory", "list"], ["recall", "--goal", "g", "--observation", str(obs)],
                 ["memory", "export", str(tmp_path / "x.jsonl")], ["memory", "history", "i1"]):
        refused([*args, "--store", str(missing)], "no memory store at this path")
    assert not missing.exists() and not missing.parent.exists()


def test_an_empty_or_foreign_file_is_not_turned_into_a_store(tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    refused(["memory", "stats", "--store", str(empty)], "empty file (0 bytes)")
    assert empty.stat().st_size == 0
    foreign = tmp_path / "notes.txt"
    foreign.write_text("these are my notes, not a database\n" * 100)
    refused(["memory", "stats", "--store", str(foreign)], "not a SQLite database")
    assert foreign.read_text().startswith("these are my notes")


def test_recall_param_must_be_key_value(tmp_path):
    obs = tmp_path / "obs.json"
    obs.write_text('{"app": "form", "elements": []}')
    refused(["recall", "--goal", "g", "--observation", str(obs), "--store", str(tmp_path / "s.sqlite"),
             "--param", "notkv"], "'notkv' is not key=value")


def test_serve_refuses_a_port_out_of_range_and_a_busy_port_before_saying_serving(tmp_path):
    refused(["serve", "--store", str(tmp_path / "s.sqlite"), "--http", "127.0.0.1:99999"], "1 to 65535")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        out = refused(["serve", "--store", str(tmp_path / "s.sqlite"), "--http", f"127.0.0.1:{port}"],
                      "cannot listen", "in use")
    assert "serving" not in out


def test_suites_name_with_tasks_lists_that_suites_tasks():
    result = runner.invoke(app, ["suites", "smoke", "--tasks", "--json"])
    assert result.exit_code == 0
    names = json.loads(result.output)
    from guimem.tasks import load_suite

    assert names == load_suite("smoke").task_names() and len(names) < 10


def test_jsonl_errors_name_the_column_the_parser_saw(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('\n{"version": 1, "task": nope}\n')
    out = refused(["learn", str(bad), "--store", str(tmp_path / "s.sqlite")], "bad.jsonl:2")
    assert f"column {bad.read_text().splitlines()[1].index('nope') + 1}" in out
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b'\n\xff\xfe\n')
    refused(["learn", str(binary), "--store", str(tmp_path / "s.sqlite")], "binary.jsonl:2", "not UTF-8")


@pytest.fixture
def steer_store(tmp_path) -> str:
    result = runner.invoke(app, _eval(tmp_path / "run", "--methods", "steer", "--json"))
    assert result.exit_code == 0, result.output
    return str(tmp_path / "run" / "memory" / "steer.sqlite")


def test_curation_refusals_say_which_transitions_are_allowed(steer_store):
    items = json.loads(runner.invoke(app, ["memory", "list", "--store", steer_store, "--json"]).output)
    trial = next(i for i in items if i["status"] == "trial")
    refused(["memory", "retire", trial["id"], "--store", steer_store],
            "trial -> retired is not allowed", "from trial it can be curated: admit it",
            "rejected is decided by its trials at a round boundary")


def test_importing_the_same_export_twice_gives_the_same_store_and_keeps_the_round(steer_store, tmp_path):
    export = tmp_path / "export.jsonl"
    assert runner.invoke(app, ["memory", "export", str(export), "--store", steer_store]).exit_code == 0
    target = str(tmp_path / "copy.sqlite")

    def snapshot() -> tuple:
        stats = json.loads(runner.invoke(app, ["memory", "stats", "--store", target, "--json"]).output)
        again = tmp_path / "again.jsonl"
        runner.invoke(app, ["memory", "export", str(again), "--store", target])
        return stats, again.read_text()

    first = runner.invoke(app, ["memory", "import", str(export), "--store", target, "--json"])
    assert first.exit_code == 0, first.output
    once = snapshot()
    second = json.loads(runner.invoke(app, ["memory", "import", str(export), "--store", target, "--json"]).output)
    assert second["records"] == 0 and second["events"] == 0
    assert snapshot() == once
    original = json.loads(runner.invoke(app, ["memory", "stats", "--store", steer_store, "--json"]).output)
    assert once[0]["boundaries_applied"] == original["boundaries_applied"] == 2
    # imports are untrusted: what was on trial or admitted there is a candidate here, the same items
    assert {k.replace(":trial", ":candidate").replace(":admitted", ":candidate"): n
            for k, n in original["items"].items()} == once[0]["items"]
    assert once[0]["events"] == original["events"]
    ended = json.loads(runner.invoke(app, ["memory", "end-round", "--store", target, "--json"]).output)
    assert ended["boundaries_applied"] == 3


def test_compare_refuses_runs_of_different_rounds_unless_forced(tmp_path):
    assert runner.invoke(app, _eval(tmp_path / "a", "--methods", "graph")).exit_code == 0
    three = ["eval", "--env", "form", "--suite", SUITE, "--rounds", "3", "--methods", "graph", "--out",
             str(tmp_path / "b")]
    assert runner.invoke(app, three).exit_code == 0
    refused(["compare", str(tmp_path / "a"), str(tmp_path / "b")], "not comparable", "rounds: 2 vs 3", "--force")
    forced = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--force", "--json"])
    assert forced.exit_code == 0
    data = json.loads(forced.output)
    assert data["k"] == 2 and data["mismatches"] == ["rounds: 2 vs 3"]
    assert all(len(m["ci"]) == 2 and m["ci"][0] <= m["difference"] <= m["ci"][1] for m in data["methods"])


@pytest.fixture
def graph_store(tmp_path) -> str:
    result = runner.invoke(app, _eval(tmp_path / "run", "--methods", "graph", "--json"))
    assert result.exit_code == 0, result.output
    return str(tmp_path / "run" / "memory" / "graph.sqlite")


def _held(store: str) -> list[str]:
    from guimem.cli.lookup import held

    return [m.namespace for m in held(store)]


def test_read_only_commands_never_add_a_memory_to_a_store(graph_store, tmp_path):
    obs = tmp_path / "obs.json"
    obs.write_text('{"app": "form", "elements": []}')
    for args in (["memory", "stats", "--method", "steer"], ["memory", "list", "--method", "skills"],
                 ["recall", "--goal", "g", "--observation", str(obs), "--method", "stack"],
                 ["memory", "export", str(tmp_path / "x.jsonl"), "--method", "steer"],
                 ["memory", "history", "i1", "--method", "steer"], ["memory", "end-round", "--method", "skills"],
                 ["memory", "admit", "i1", "--method", "steer"]):
        refused([*args, "--store", graph_store], "holds no", "graph")
    assert _held(graph_store) == ["graph"]
    assert not (tmp_path / "x.jsonl").exists()
    # the store's only memory is still found without --method
    found = runner.invoke(app, ["recall", "--goal", "g", "--observation", str(obs), "--store", graph_store, "--json"])
    assert found.exit_code == 0, found.output


def test_a_store_that_holds_no_memory_yet_is_said_so_by_read_only_commands(tmp_path):
    from guimem.storage import create_store

    empty = tmp_path / "empty.sqlite"
    create_store(str(empty)).close()
    for args in (["memory", "list"], ["memory", "export", str(tmp_path / "x.jsonl")], ["memory", "end-round"]):
        refused([*args, "--store", str(empty)], "holds no memory yet", "guimem learn")
    assert _held(str(empty)) == []


def test_learn_export_and_import_default_to_the_stores_only_memory(graph_store, tmp_path):
    export = tmp_path / "graph.jsonl"
    done = runner.invoke(app, ["memory", "export", str(export), "--store", graph_store, "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["records"] > 0
    # into a new store, an import without --method is the export's own memory
    copy = str(tmp_path / "copy.sqlite")
    imported = runner.invoke(app, ["memory", "import", str(export), "--store", copy, "--json"])
    assert imported.exit_code == 0, imported.output
    assert _held(copy) == ["graph"]
    # every exported version, then one more for each edge (marked imported here)
    assert json.loads(imported.output)["records"] > json.loads(done.output)["records"]

    def items(store: str) -> dict:
        return json.loads(runner.invoke(app, ["memory", "stats", "--store", store, "--json"]).stdout)["items"]

    assert items(copy) == items(graph_store)


def test_failed_learn_and_import_leave_no_store_behind(graph_store, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"header": tru}\n')
    refused(["learn", str(tmp_path / "missing.jsonl"), "--store", str(tmp_path / "l.sqlite"), "--method", "graph"],
            "missing.jsonl")
    refused(["memory", "import", str(bad), "--store", str(tmp_path / "i.sqlite")], "bad.jsonl:1")
    export = tmp_path / "graph.jsonl"
    assert runner.invoke(app, ["memory", "export", str(export), "--store", graph_store]).exit_code == 0
    refused(["memory", "import", str(export), "--store", str(tmp_path / "m.sqlite"), "--method", "steer"],
            "an export of a graph memory")
    assert not [p.name for p in tmp_path.glob("*.sqlite*")]


def test_a_near_miss_method_is_suggested_once(steer_store):
    out = refused(["memory", "stats", "--store", steer_store, "--method", "stek"], "did you mean")
    assert out.count("'steer'") == 1, out


def test_serve_says_when_it_makes_a_new_store(tmp_path):
    import os
    import subprocess
    import sys

    def serve(store: Path) -> str:
        proc = subprocess.run([sys.executable, "-m", "guimem.cli", "serve", "--store", str(store), "--mcp", "stdio"],
                              input="", capture_output=True, text=True, timeout=120,
                              env={**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing"})
        assert proc.returncode == 0, proc.stderr
        return proc.stderr

    typo = tmp_path / "stoer.sqlite"
    assert f"there was no store at {typo}" in serve(typo).replace("\n", "")
    assert "there was no store" not in serve(typo)  # now it is there


def test_recall_options_out_of_bounds_are_one_line_naming_the_option(steer_store, tmp_path):
    obs = tmp_path / "obs.json"
    obs.write_text('{"app": "form", "elements": []}')
    base = ["recall", "--observation", str(obs), "--store", steer_store]
    refused([*base, "--goal", ""], "--goal", "at least 1 character")
    refused([*base, "--goal", "g" * 4001], "--goal", "at most 4000 characters")
    refused([*base, "--goal", "g", "--task", "t" * 201], "--task", "at most 200 characters")


def test_a_mistyped_list_filter_is_refused_not_answered_with_nothing(steer_store):
    refused(["memory", "list", "--store", steer_store, "--kind", "knowlege"], "unknown kind", "'knowledge'")
    refused(["memory", "list", "--store", steer_store, "--status", "admited"], "unknown status", "'admitted'")
    listed = runner.invoke(app, ["memory", "list", "--store", steer_store, "--kind", "procedure", "--json"])
    assert listed.exit_code == 0 and json.loads(listed.output), listed.output


def test_run_refuses_an_out_that_cannot_hold_its_file_before_the_episode(tmp_path):
    existing = tmp_path / "afile"
    existing.write_text("x")
    refused(["run", "--task", "click-test-2", "--env", "form", "--out", str(existing)], "is a file")
    refused(["run", "--task", "click-test-2", "--env", "form", "--out", "/proc/nope"], "cannot create the run folder")
    (tmp_path / "run" / "trajectories.jsonl").mkdir(parents=True)
    refused(["run", "--task", "click-test-2", "--env", "form", "--out", str(tmp_path / "run")], "is a folder")


def test_report_of_a_run_with_no_finished_episode_or_no_run_is_refused_not_invented(tmp_path):
    run = tmp_path / "run"
    assert runner.invoke(app, _eval(run, "--methods", "graph")).exit_code == 0
    (run / "results.jsonl").unlink()
    (run / "summary.json").unlink()
    refused(["report", str(run)], "no episode of this run has finished yet")
    assert not (run / "summary.json").exists()
    refused(["report", str(tmp_path / "nope")], "no run here")
    refused(["compare", str(run), str(tmp_path / "nope")], "no run here")


def test_refusals_that_said_no_fix_or_the_wrong_one_say_the_right_one(steer_store, tmp_path):
    refused(["memory", "admit", "nope", "--store", steer_store], "item with id 'nope'", "guimem memory list")
    refused(["learn", str(tmp_path / "missing.jsonl"), "--store", str(tmp_path / "s.sqlite")],
            "file does not exist", "there is no such file")
    episodes = tmp_path / "none.jsonl"
    episodes.write_text("")
    refused(["learn", str(episodes), "--store", str(tmp_path)], "is a folder, not a memory store")
    out = refused(["memory", "export", str(tmp_path / "out.txt"), "--store", steer_store], "out.jsonl")
    assert "steer.jsonl" not in out
    out = refused(_eval(tmp_path / "run", "--methods", "graph", "--drift-to", "bogus"), "v0", "v1")
    assert "--drift v1" not in out


@pytest.mark.parametrize("bad", ["-5", "-1"])
def test_report_skips_a_result_line_with_a_negative_round(tmp_path, bad):
    run = tmp_path / "run"
    assert runner.invoke(app, _eval(run, "--methods", "steer")).exit_code == 0
    lines = (run / "results.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    lines[0] = lines[0].replace(f'"round_index":{first["round_index"]}', f'"round_index":{bad}', 1)
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    from guimem.harness.runfiles import RunDir

    assert len(RunDir(run).results()) == len(lines) - 1  # never read as the last round
    result = runner.invoke(app, ["report", str(run), "--json"])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output


def test_a_store_path_that_is_a_device_or_too_long_is_one_line(tmp_path):
    episodes = tmp_path / "none.jsonl"
    episodes.write_text("")
    refused(["learn", str(episodes), "--store", "/dev/null"], "is a device, FIFO or socket")
    refused(["memory", "stats", "--store", str(tmp_path / ("x" * 300 + ".sqlite"))], "cannot use this path")
