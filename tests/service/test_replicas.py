"""Two `guimem serve` processes on one PostgreSQL store: what one commits at a round boundary, the other
recalls after it; concurrent writers on both lose nothing and learn nothing twice."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager

import httpx
import pytest

from guimem.storage import create_store
from guimem.testing.server import free_port
from tests.memory.conftest import LOGIN, PASS, USER, episode
from tests.service.test_core import request

pytest.importorskip("psycopg", reason="the postgres extra is installed by make setup")


@contextmanager
def replica(dsn: str, method: str, tmp_path):
    port = free_port()
    env = {**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing"}
    proc = subprocess.Popen([sys.executable, "-m", "guimem.cli", "serve", "--store", dsn, "--method", method,
                             "--http", f"127.0.0.1:{port}"], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"guimem serve did not start: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def _recall(url: str, seed: int = 5) -> dict:
    reply = httpx.post(f"{url}/v1/recall", json=request(seed).model_dump(mode="json"), timeout=30)
    assert reply.status_code == 200, reply.text
    return reply.json()["injection"]


def _learn(url: str, trajectories: list, end_round: bool = False) -> dict:
    reply = httpx.post(f"{url}/v1/learn", json={"trajectories": [t.model_dump(mode="json") for t in trajectories],
                                                "end_round": end_round}, timeout=60)
    assert reply.status_code == 200, reply.text
    return reply.json()


@pytest.mark.slow
def test_what_one_replica_commits_at_a_boundary_the_other_recalls_after_it(pg_dsn, tmp_path):
    with ExitStack() as stack:
        a = stack.enter_context(replica(pg_dsn, "graph", tmp_path))
        b = stack.enter_context(replica(pg_dsn, "graph", tmp_path))
        assert _recall(b)["items"] == []
        _learn(a, [episode([USER, PASS, LOGIN], seed=1)])
        assert _recall(b)["items"] == [], "learned, not yet committed: nothing until the boundary"
        assert httpx.get(f"{b}/v1/stats", timeout=30).json()["queued"] == 1, "the queue is in the store"
        assert httpx.post(f"{a}/v1/end_round", json={}, timeout=60).status_code == 200
        seen = _recall(b)["items"]
        assert seen and seen == _recall(a)["items"]


@pytest.mark.slow
def test_concurrent_writers_on_two_replicas_lose_nothing(pg_dsn, tmp_path):
    episodes = [episode([USER, PASS, LOGIN] if seed % 2 else [LOGIN], seed=seed) for seed in range(1, 25)]
    with ExitStack() as stack:
        urls = [stack.enter_context(replica(pg_dsn, "steer", tmp_path)) for _ in range(2)]

        def send(i: int) -> None:
            _learn(urls[i % 2], [episodes[i]], end_round=i % 3 != 0)  # boundaries race with learning

        with ThreadPoolExecutor(6) as pool:
            list(pool.map(send, range(len(episodes))))
        for url in urls:
            assert httpx.post(f"{url}/v1/end_round", json={}, timeout=60).status_code == 200
        stats = [httpx.get(f"{u}/v1/stats", timeout=30).json() for u in urls]
    assert stats[0]["queued"] == stats[1]["queued"] == 0
    assert stats[0]["items"] == stats[1]["items"] and stats[0]["boundaries_applied"] == stats[1]["boundaries_applied"]
    store = create_store(pg_dsn)
    queue = store.query("steer.queue", "episode")
    assert len(queue) == len(episodes) and {r.status for r in queue} == {"learned"}
    assert all(len(store.history(r.id)) == 2 for r in queue), "each episode learned exactly once"
    learned = {store.history(r.id)[0].body for r in queue}
    assert learned == {t.model_dump_json() for t in episodes}
    store.close()
