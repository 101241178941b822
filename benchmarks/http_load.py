"""Recall over HTTP on loopback: requests/second and latency with 1 and 4 concurrent clients.

A `steer` memory with admitted knowledge is served by the real app (uvicorn, one process); bounded
Python clients (httpx, one thread each) post recall requests for a fixed time. The embedder is the
default e5 unless --embedder hashing is given.

Usage: python benchmarks/http_load.py [--seconds 10] [--clients 1,4] [--embedder e5]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import httpx
from _support import seed_memory
from _synthetic import percentiles

from guimem.service.core import MemoryService, ServiceSettings
from guimem.service.http import create_app
from guimem.service.models import RecallRequest
from guimem.settings import GuimemSettings
from guimem.testing import FormEnv
from guimem.testing.server import live_http
from guimem.types import Task


def requests(n: int) -> list[bytes]:
    out = []
    env = FormEnv()
    for seed in range(n):
        obs = env.reset(Task(id="form", goal="", app="form", seed=seed))
        out.append(RecallRequest(goal=env.task.goal, observation=obs, task_id="form",
                                 params=env.task.params).model_dump_json().encode())
    return out


def load(url: str, bodies: list[bytes], clients: int, seconds: float) -> tuple[int, list[float], int]:
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(offset: int) -> None:
        nonlocal errors
        with httpx.Client(timeout=30) as c:
            i = offset
            while time.monotonic() < stop:
                start = time.perf_counter()
                r = c.post(f"{url}/v1/recall", content=bodies[i % len(bodies)],
                           headers={"Content-Type": "application/json"})
                ms = (time.perf_counter() - start) * 1000
                with lock:
                    latencies.append(ms)
                    errors += r.status_code != 200
                i += clients

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(latencies), latencies, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", default="1,4")
    parser.add_argument("--embedder", default="e5")
    args = parser.parse_args()
    process = GuimemSettings()
    process.embedder.name = args.embedder
    with tempfile.TemporaryDirectory() as tmp:
        svc = MemoryService(ServiceSettings(store=str(Path(tmp) / "m.sqlite"), method="steer"), process)
        seed_memory(svc)
        bodies = requests(200)
        with live_http(create_app(svc)) as url:
            for clients in (int(c) for c in args.clients.split(",")):
                count, latencies, errors = load(url, bodies, clients, args.seconds)
                p50, p95 = percentiles(latencies)
                print(f"{clients} client(s): {count / args.seconds:.0f} recall req/s, p50 {p50:.1f} ms, "
                      f"p95 {p95:.1f} ms, {errors} errors ({count} requests in {args.seconds:.0f} s, "
                      f"embedder {args.embedder})")
        svc.close()


if __name__ == "__main__":
    main()
