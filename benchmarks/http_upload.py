"""Peak memory of `guimem serve` while a client streams an oversized chunked body (no Content-Length).

Starts the real server as its own process on loopback, reads its peak resident memory (VmHWM) before
and after a 200 MB chunked POST to /v1/recall, and prints both with the status the client got. The
body limit must hold while streaming: the server should answer 413 without buffering the body.

Usage: python benchmarks/http_upload.py [--mb 200]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200)
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing", "GUIMEM_DATA_DIR": tmp}
        server = subprocess.Popen([sys.executable, "-m", "guimem.cli", "serve", "--store", str(Path(tmp) / "m.sqlite"),
                                   "--http", f"127.0.0.1:{port}"], env=env, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(200):
                try:
                    httpx.get(url + "/health", timeout=1)
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            before = peak_mb(server.pid)
            chunk = b"x" * (1 << 20)

            def body():
                yield b'{"goal": "'
                for _ in range(args.mb):
                    yield chunk
                yield b'"}'

            start = time.perf_counter()
            try:
                status = httpx.post(url + "/v1/recall", content=body(), timeout=120,
                                    headers={"Content-Type": "application/json"}).status_code
            except httpx.TransportError as exc:  # the server may close the connection once it refused
                status = f"connection closed ({type(exc).__name__})"
            seconds = time.perf_counter() - start
            after = peak_mb(server.pid)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"{args.mb} MB chunked body: answer {status} in {seconds:.2f}s; "
          f"server peak RSS {before:.0f} MB before, {after:.0f} MB after (+{after - before:.0f} MB)")


if __name__ == "__main__":
    main()
