"""Issue 29, item 8: learning is idempotent by episode id — a retried learn is a no-op that says so."""

from __future__ import annotations

import httpx
from typer.testing import CliRunner

from guimem.cli.app import app
from guimem.service.http import create_app
from guimem.testing.server import live_http
from guimem.types import write_trajectories
from tests.memory.conftest import LOGIN, PASS, USER, episode
from tests.service.test_core import service


def test_a_retried_learn_is_a_no_op_that_says_so(tmp_path):
    svc = service(tmp_path, method="graph")
    first, second = episode([USER, PASS, LOGIN], seed=1), episode([LOGIN], seed=2)
    body = {"trajectories": [first.model_dump(mode="json"), second.model_dump(mode="json")], "end_round": True}
    with live_http(create_app(svc)) as url:
        once = httpx.post(f"{url}/v1/learn", json=body).json()
        items = svc.stats().items
        again = httpx.post(f"{url}/v1/learn", json=body).json()
    assert once["repeated"] == 0 and once["episodes"] == 2
    assert again["repeated"] == 2 and again["queued"] == 0 and svc.stats().items == items
    assert svc.learn([first, first]).repeated == 2  # within one call too
    assert len(svc.store.query(svc.queue.namespace, "episode")) == 2
    svc.close()


def test_learning_the_same_file_twice_lists_each_episode_once(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    path = tmp_path / "t.jsonl"
    write_trajectories(path, [episode([USER, PASS, LOGIN], seed=1), episode([LOGIN], seed=2)])
    store = str(tmp_path / "s.sqlite")
    runner = CliRunner()
    assert runner.invoke(app, ["learn", str(path), "--store", store, "--method", "graph"]).exit_code == 0
    items = runner.invoke(app, ["--json", "memory", "list", "--store", store, "--method", "graph"]).output
    again = runner.invoke(app, ["learn", str(path), "--store", store, "--method", "graph"])
    assert again.exit_code == 0 and "2 already learned by episode id: not learned again" in again.output
    assert runner.invoke(app, ["--json", "memory", "list", "--store", store, "--method", "graph"]).output == items
