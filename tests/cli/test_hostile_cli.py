"""Issue 29: hostile CLI inputs end in one line and exit 2 (1 for infrastructure), never a traceback or a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from guimem.cli.app import app
from guimem.types import write_trajectories
from tests.memory.conftest import LOGIN, PASS, USER, episode

runner = CliRunner()


@pytest.fixture(autouse=True)
def hashing(monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")


def one_line(args: list[str], code: int = 2, env: dict[str, str] | None = None) -> str:
    """Run the real console script (a subprocess, bounded in time): one error line, exit ``code``."""
    proc = subprocess.run([sys.executable, "-m", "guimem.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing", **(env or {})})
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    return lines[0]


def test_learn_of_an_infinite_number_is_one_line_and_the_store_keeps_learning(tmp_path):
    good = episode([USER, PASS, LOGIN], seed=1)
    bad = tmp_path / "inf.jsonl"
    line = json.dumps({**good.model_dump(mode="json"), "wall_ms": 0.5})
    bad.write_text(line.replace('"wall_ms": 0.5', '"wall_ms": 1e400') + "\n")
    store = str(tmp_path / "s.sqlite")
    assert "inf.jsonl:1" in one_line(["learn", str(bad), "--store", store, "--method", "graph"])
    path = tmp_path / "good.jsonl"
    write_trajectories(path, [good])
    assert not (tmp_path / "s.sqlite").exists()  # the file is checked whole before a store is made
    result = runner.invoke(app, ["learn", str(path), "--store", store, "--method", "graph"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["--json", "memory", "stats", "--store", store, "--method", "graph"])
    stats = json.loads(result.output)
    assert stats["queued"] == 0 and stats["committed_round_index"] == 0 and stats["items"]["edge:active"] >= 1


def test_a_malformed_postgres_url_is_one_line_exit_2():
    line = one_line(["memory", "stats", "--store", "postgresql://u:pw@[::1/db"])
    assert "not a valid PostgreSQL URL" in line and "pw" not in line


def test_a_bad_setting_in_the_environment_is_one_line_naming_it(tmp_path):
    args = ["memory", "stats", "--store", str(tmp_path / "s.sqlite")]
    line = one_line(args, env={"GUIMEM_RUN__INFRA_BREAKER": "abc"})
    assert "GUIMEM_RUN__INFRA_BREAKER" in line and "abc" not in line
    result = runner.invoke(app, args, env={"GUIMEM_RUN__INFRA_BREAKER": "abc"})
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_learn_on_an_immutable_store_is_one_line_exit_1(tmp_path):
    store = tmp_path / "s.sqlite"
    path = tmp_path / "t.jsonl"
    write_trajectories(path, [episode([LOGIN], seed=1)])
    assert runner.invoke(app, ["learn", str(path), "--store", str(store), "--method", "graph"]).exit_code == 0
    for extra in ("-wal", "-shm"):
        (tmp_path / f"s.sqlite{extra}").unlink(missing_ok=True)
    if subprocess.run(["chattr", "+i", str(store)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root on a file system that supports it)")
    try:
        line = one_line(["learn", str(path), "--store", str(store), "--method", "graph"], code=1)
        assert "refused a write" in line or "cannot open" in line
    finally:
        subprocess.run(["chattr", "-i", str(store)], check=True)


def test_a_read_only_sqlite_connection_refuses_writes_as_a_store_error(tmp_path):
    from guimem.errors import StoreError
    from guimem.storage import Record
    from guimem.storage.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "s.sqlite")
    store._conn.execute("PRAGMA query_only = ON")
    with pytest.raises(StoreError, match="refused a write"):
        store.put(Record("a", "k", "n", "s", "{}"))
    store.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store that exists, so recall gets as far as reading the observation."""
    folder = tmp_path_factory.mktemp("recall")
    path = folder / "t.jsonl"
    write_trajectories(path, [episode([LOGIN], seed=1)])
    proc = subprocess.run([sys.executable, "-m", "guimem.cli", "learn", str(path), "--store", str(folder / "s.sqlite")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing"})
    assert proc.returncode == 0, proc.stderr
    return str(folder / "s.sqlite")


@pytest.mark.parametrize(("kind", "words"), [("zero", "regular file"), ("fifo", "regular file"),
                                             ("folder", "regular file"), ("bad-utf8", "UTF-8"),
                                             ("huge", "larger than"), ("deep", "nested deeper")])
def test_recall_reads_only_a_bounded_regular_utf8_observation(tmp_path, store, kind, words):
    path = tmp_path / "obs.json"
    if kind == "zero":
        path = "/dev/zero"
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "bad-utf8":
        path.write_bytes(b'{"app": "\xff\xfe"}')
    elif kind == "huge":
        with open(path, "wb") as fh:
            fh.truncate(30_000_000)
    else:
        path.write_text('{"a":' * 100_000)
    line = one_line(["recall", "--goal", "g", "--observation", str(path), "--store", store])
    assert words in line


def test_a_trajectory_line_longer_than_the_bound_is_refused_without_reading_it_whole(tmp_path, monkeypatch):
    import guimem.types.files as files

    monkeypatch.setattr(files, "MAX_TRAJECTORY_LINE", 1000)
    huge = tmp_path / "huge.jsonl"
    huge.write_bytes(b"{" + b" " * 5000)  # no newline at all
    with pytest.raises(files.TrajectoryFormatError, match="longer than 1,000 bytes") as caught:
        files.read_trajectories(huge)
    assert caught.value.line == 1
