"""Issue 29, item 5: half-open connections cannot stop the server. A real ``guimem serve --http`` whose
descriptor limit is lowered to 256 gets a few hundred connections that never finish their headers (and
one that stalls its body); ``/health`` keeps answering, the stalled ones are closed, the log stays small."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from guimem.testing.server import free_port

NOFILE = 256


@dataclass
class HalfOpenFigures:
    """What `/health` did while the half-open connections were held."""

    opened: int
    answered: int
    probes: int
    worst_ms: float
    median_ms: float
    closed_by_server: int
    stalled_body_answer: str
    log_bytes: int


def _lower_nofile() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def _wait_up(url: str, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError("the server exited")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("the server did not start")


def _open_half(port: int, count: int, deadline: float) -> list[socket.socket]:
    """Connections that send a request line and one header, never the blank line that ends the headers."""
    socks = []
    for _ in range(count):
        if time.monotonic() > deadline:
            break
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        socks.append(s)
    return socks


def _probe(url: str, probes: int) -> list[float | None]:
    out: list[float | None] = []
    for _ in range(probes):
        start = time.monotonic()
        try:
            ok = httpx.get(f"{url}/health", timeout=3).status_code == 200
        except httpx.HTTPError:
            ok = False
        out.append((time.monotonic() - start) * 1000 if ok else None)
        time.sleep(0.2)
    return out


def _stalled_body(port: int) -> str:
    """A POST that promises 100 body bytes and sends 10: what the server does within 20 s."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(b"POST /v1/end_round HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{\"a\": 1234")
        try:
            data = s.recv(4096)
        except TimeoutError:
            return "no answer in 20 s"
    return data.split(b"\r\n", 1)[0].decode() if data else "closed"


def _closed(socks: list[socket.socket]) -> int:
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            closed += s.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def measure(tmp_path: Path, count: int = 400, hold_s: float = 15.0, src: str | None = None) -> HalfOpenFigures:
    """Start a server (descriptor limit 256), hold ``count`` half-open connections, probe ``/health``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    env = {**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing", **({"PYTHONPATH": src} if src else {})}
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "guimem.cli", "serve", "--http", f"127.0.0.1:{port}",
                                 "--store", str(tmp_path / "m.sqlite"), "--method", "graph"],
                                stdout=subprocess.DEVNULL, stderr=err, env=env, preexec_fn=_lower_nofile)
        socks: list[socket.socket] = []
        try:
            _wait_up(url, proc, time.monotonic() + 60)
            socks = _open_half(port, count, time.monotonic() + 30)
            times = _probe(url, probes=max(5, int(hold_s / 1.5)))
            stalled = _stalled_body(port)
            closed = _closed(socks)
        finally:
            for s in socks:
                s.close()
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    ok = sorted(t for t in times if t is not None)
    return HalfOpenFigures(opened=len(socks), answered=len(ok), probes=len(times),
                           worst_ms=ok[-1] if ok else float("nan"), median_ms=ok[len(ok) // 2] if ok else float("nan"),
                           closed_by_server=closed, stalled_body_answer=stalled, log_bytes=log.stat().st_size)


@pytest.mark.slow
def test_health_keeps_answering_while_half_open_connections_exceed_the_descriptor_limit(tmp_path):
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1024:
        pytest.skip("the test process itself needs more than 1024 descriptors")
    figures = measure(tmp_path)
    assert figures.opened == 400
    assert figures.answered == figures.probes, figures
    assert figures.closed_by_server > 0, figures
    assert not figures.stalled_body_answer.startswith("HTTP/1.1 5"), figures
    assert figures.stalled_body_answer != "no answer in 20 s", figures
    assert figures.log_bytes < 200_000, figures
