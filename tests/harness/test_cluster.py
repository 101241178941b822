"""An evaluation on a multi-node Ray cluster: a head and two worker nodes, each its own process tree in its
own folder, all on 127.0.0.1, reaching memory only through a shared PostgreSQL store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guimem.harness.evaluate import Evaluation
from guimem.harness.runfiles import RunDir
from tests.harness.test_evaluate import DATA, settings, spec, strip_timing

pytest.importorskip("ray", reason="the ray extra is installed by make setup")
pytest.importorskip("psycopg", reason="the postgres extra is installed by make setup")
METHODS = ["graph", "skills", "steer", "stack"]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """The reference: the same evaluation in one process, each method in its own SQLite file."""
    out = tmp_path_factory.mktemp("one")
    summary = Evaluation(spec(methods=["none", *METHODS]), out, settings()).run()
    assert summary is not None
    return strip_timing(summary.model_dump(mode="json")["methods"])


def _eval(out: Path, address: str, dsn: str, workers: int = 2) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "guimem.cli", "eval", "--env", "form", "--suite", str(DATA / "form_suite.json"),
           "--rounds", "3", "--methods", ",".join(METHODS), "--backend", "ray", "--address", address,
           "--workers", str(workers), "--store", dsn, "--out", str(out), "--json"]
    env = {**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing"}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=out.parent)


def _cluster(tmp_path, delay: str = "0"):
    from guimem.testing.raynode import LoopbackCluster

    return LoopbackCluster(tmp_path / "cluster", workers=2, cpus=1, object_store_mb=100,
                           env={"GUIMEM_EMBEDDER__NAME": "hashing", "GUIMEM_FORM_STEP_DELAY_S": delay})


def _nodes(address: str) -> list[tuple[str, float]]:
    code = ("import json, ray\nfrom guimem.harness.executors import _loopback_driver\n"
            f"with _loopback_driver(True):\n    ray.init(address={address!r}, log_to_driver=False)\n"
            "print(json.dumps([(n['NodeManagerAddress'], n['Resources'].get('CPU', 0)) for n in ray.nodes() "
            "if n['Alive']]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return [tuple(x) for x in json.loads(out.stdout.strip().splitlines()[-1])]


@pytest.mark.slow
def test_an_evaluation_on_three_ray_nodes_equals_one_process(tmp_path, pg_dsn, one_process):
    with _cluster(tmp_path) as cluster:
        nodes = _nodes(cluster.address)
        assert sorted(nodes) == [("127.0.0.1", 0.0), ("127.0.0.1", 1.0), ("127.0.0.1", 1.0)]
        proc = _eval(tmp_path / "run", cluster.address, pg_dsn)
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-3000:]
        for i in (1, 2):  # both worker nodes opened the run's memories, each in its own cache
            assert any((cluster.folder(f"node-{i}") / "cache" / "index").iterdir())
    assert strip_timing(json.loads(stdout)["methods"]) == one_process
    assert not (tmp_path / "run" / "memory").exists()


@pytest.mark.slow
def test_a_worker_node_killed_mid_round_changes_nothing_in_the_summary(tmp_path, pg_dsn, one_process):
    with _cluster(tmp_path, delay="0.05") as cluster:
        out = tmp_path / "run"
        proc = _eval(out, cluster.address, pg_dsn)
        results = out / "results.jsonl"
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:
            if results.exists() and len(results.read_text().splitlines()) >= 12:
                break
            time.sleep(0.05)
        cluster.kill(1)  # the first worker node: its running episode is lost
        killed_at = len(results.read_text().splitlines())
        stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    assert killed_at < 60, "the node should have died mid-run"
    assert "a Ray worker was lost" in stderr, stderr[-3000:]
    assert strip_timing(json.loads(stdout)["methods"]) == one_process
    keys = [r.key for r in RunDir(out).results()]
    assert len(keys) == len(set(keys)) == 60, "no episode counted twice, none lost"


@pytest.mark.slow
def test_more_workers_than_the_cluster_has_cpus_run_on_the_cpus_there_are(tmp_path, pg_dsn, one_process):
    with _cluster(tmp_path) as cluster:
        proc = _eval(tmp_path / "run", cluster.address, pg_dsn, workers=5)
        stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    assert "the Ray cluster has 2 CPUs: 2 workers instead of 5" in stderr
    assert strip_timing(json.loads(stdout)["methods"]) == one_process
