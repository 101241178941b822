"""Issue 29, item 9: odd run folders, torn trace lines and 4xx bodies that echo nothing of the request."""

from __future__ import annotations

import httpx
import pytest

from guimem.service.http import create_app
from guimem.testing.server import live_http
from guimem.types import write_trajectories
from tests.memory.conftest import LOGIN, PASS, USER, episode
from tests.service.test_core import service


@pytest.fixture
def served(tmp_path):
    run = tmp_path / "run"
    traces = run / "traces" / "graph"
    traces.mkdir(parents=True)
    (traces / "round-abc.jsonl").write_text("{}\n")
    (traces / "round-1.jsonl.bak").write_text("{}\n")
    good = [episode([USER, PASS, LOGIN], seed=1), episode([LOGIN], seed=2)]
    write_trajectories(traces / "round-0.jsonl", good)
    with (traces / "round-0.jsonl").open("a") as fh:  # a process killed mid-write, then one more line
        fh.write(good[0].model_dump_json()[:150] + "\n" + episode([LOGIN], seed=3).model_dump_json() + "\n")
    data = tmp_path / "data"
    data.mkdir()
    svc = service(tmp_path, method="graph", data_dir=data)
    with live_http(create_app(svc, run_dir=run)) as url:
        yield url, data
    svc.close()


def test_runs_ignore_files_that_are_not_rounds(served):
    url, _ = served
    r = httpx.get(f"{url}/v1/runs")
    assert r.status_code == 200 and r.json() == [{"method": "graph", "round_indexes": [0]}]


def test_one_torn_trace_line_does_not_hide_its_round(served):
    url, _ = served
    r = httpx.get(f"{url}/v1/runs/graph/0")
    assert r.status_code == 200 and [e["seed"] for e in r.json()] == [1, 2, 3]


def test_4xx_bodies_echo_no_input_id_and_no_absolute_folder(served):
    url, data = served
    for path in ("/v1/items/secret-id-4711", "/v1/items/secret-id-4711/history"):
        r = httpx.get(f"{url}{path}")
        assert r.status_code == 404 and "secret-id-4711" not in r.text
    r = httpx.post(f"{url}/v1/import", json={"path": "nowhere/secret-file.jsonl"})
    assert r.status_code == 404 and "secret-file" not in r.text and str(data) not in r.text
    (data / "bad.jsonl").write_text("not json\n")
    r = httpx.post(f"{url}/v1/import", json={"path": "bad.jsonl"})
    assert r.status_code == 422 and str(data) not in r.text and str(data.parent) not in r.text


def test_the_csp_lets_the_inspector_show_screenshots_loaded_as_blobs(served):
    url, _ = served
    csp = httpx.get(f"{url}/").headers["content-security-policy"]
    assert "img-src 'self' data: blob:" in csp and "default-src 'none'" in csp


def test_the_episodes_of_an_import_path_methods_round_are_served(tmp_path):
    own = "mypkg.last_success:LastSuccessMemory"
    (tmp_path / "run" / "traces" / own).mkdir(parents=True)
    (tmp_path / "run" / "traces" / own / "round-1.jsonl").write_text("")
    svc = service(tmp_path)
    try:
        with live_http(create_app(svc, run_dir=tmp_path / "run")) as url:
            assert httpx.get(f"{url}/v1/runs").json() == [{"method": own, "round_indexes": [1]}]
            reply = httpx.get(f"{url}/v1/runs/{own}/1")
            assert reply.status_code == 200 and reply.json() == [], reply.text
            assert httpx.get(f"{url}/v1/runs/{own}/0").status_code == 404
            assert httpx.get(f"{url}/v1/runs/..%2Fmemory/1").status_code in (404, 422)
    finally:
        svc.close()
