"""The local model runtime is checked by a real decode in a child process: a llama.cpp that dies of SIGILL
is a one-line infrastructure error (doctor exit 1, model tests failing with the message), never a dead
Python process. The SIGILL is simulated by a stand-in ``llama_cpp`` package that kills itself with it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from guimem.errors import ModelRuntimeError
from guimem.llm.runtime import probe_runtime
from guimem.testing.isolated import ChildCrashedError, run_isolated

ROOT = Path(__file__).parents[2]


@pytest.fixture
def sigill_runtime(tmp_path, monkeypatch) -> Path:
    """A ``llama_cpp`` that dies of SIGILL when it is imported, first on this process's and children's path."""
    pkg = tmp_path / "fake" / "llama_cpp"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    monkeypatch.syspath_prepend(str(pkg.parent))
    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pkg.parent), str(ROOT / "src"),
                                                      os.environ.get("PYTHONPATH", "")]))
    return pkg.parent


def test_a_runtime_that_dies_of_sigill_is_a_one_line_model_runtime_error(sigill_runtime, tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(ModelRuntimeError) as caught:
        probe_runtime(model)
    message = str(caught.value)
    assert "died of SIGILL" in message and "llama_cpp" in message and "scripts/llama_build.py" in message
    assert "\n" not in message


def test_doctor_model_exits_1_naming_the_library_and_the_fix(sigill_runtime, tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    env = {**os.environ, "GUIMEM_RANK__MODEL_PATH": str(model), "GUIMEM_LLM__BASE_URL": "http://127.0.0.1:9/v1"}
    done = subprocess.run([sys.executable, "-m", "guimem.cli", "doctor", "--model", "--no-browser", "--json"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    check = next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "model runtime llama.cpp")
    assert not check["ok"] and check["required"] and "died of SIGILL" in check["detail"]
    assert "\n" not in check["detail"] and "llama_build.py" in check["fix"]


def _die_of_sigill() -> None:
    os.kill(os.getpid(), signal.SIGILL)


def test_a_child_that_dies_of_sigill_fails_with_its_signal_named():
    with pytest.raises(ChildCrashedError, match=r"died of SIGILL .*illegal instruction"):
        run_isolated(_die_of_sigill)


CASES = '''
import pytest
from guimem.testing.isolated import run_isolated
from guimem.testing.llamacpp import llama_server


def _load():
    from guimem.agents.rank import RankPolicy
    from guimem.testing.llamacpp import smollm2_gguf
    RankPolicy(smollm2_gguf(), n_ctx=256)


def test_server():
    with llama_server():
        pass


def test_in_process_policy():
    run_isolated(_load)


def test_after_them_the_run_goes_on():
    import guimem
    assert guimem.__version__
'''


def test_model_tests_fail_with_the_message_and_the_run_goes_on(sigill_runtime, tmp_path):
    case = tmp_path / "test_cases.py"
    case.write_text(CASES)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                           str(case)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    out = done.stdout + done.stderr
    assert "2 failed, 1 passed" in out, out[-3000:]
    assert "died of SIGILL" in out and "Fatal Python error" not in out
