"""Run the installed ``guimem`` console script in a subprocess, from a folder of a user's own code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples" / "extending"


def guimem_command() -> list[str]:
    """The console script beside this interpreter; else ``python -P -m guimem.cli``, which, like the script and
    unlike a plain ``python -m``, does not put the current folder on ``sys.path``."""
    script = Path(sys.executable).parent / "guimem"
    return [str(script)] if script.exists() else [sys.executable, "-P", "-m", "guimem.cli"]


def run_guimem(*args: str, cwd: Path, env: dict[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``guimem ARGS`` in ``cwd`` with this environment (offline hashing embedder unless ``env`` says otherwise)."""
    full = {**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing", "COLUMNS": "200", **(env or {})}
    return subprocess.run([*guimem_command(), *args], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=timeout, check=False)


def user_project(folder: Path) -> Path:
    """A folder as a user has it: ``mypkg/last_success.py`` (the tally example renamed, counting every episode
    so that its store has events even when the explorer never succeeds), ``mypkg/counter.py`` (the counter
    env) and ``suite.json`` naming the env by its import path."""
    pkg = folder / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    memory = (EXAMPLES / "tally_memory.py").read_text()
    (pkg / "last_success.py").write_text(memory.replace("class TallyMemory", "class LastSuccessMemory")
                                         .replace('return "tally"', 'return "last-success"')
                                         .replace("if t.outcome.success and t.steps:", "if t.steps:"))
    (pkg / "counter.py").write_text((EXAMPLES / "counter_env.py").read_text())
    suite = (EXAMPLES / "counter_suite.json").read_text()
    (folder / "suite.json").write_text(suite.replace("examples.extending.counter_env:CounterEnv",
                                                     "mypkg.counter:CounterEnv"))
    return folder


def path_with_guimem(folder: Path) -> str:
    """A ``PATH`` on which ``guimem`` is the console script beside this interpreter (or, without one, a
    wrapper in ``folder`` that runs it the same way)."""
    command = guimem_command()
    if len(command) == 1:
        where = str(Path(command[0]).parent)
    else:
        folder.mkdir(parents=True, exist_ok=True)
        wrapper = folder / "guimem"
        wrapper.write_text(f'#!/bin/sh\nexec {" ".join(command)} "$@"\n')
        wrapper.chmod(0o755)
        where = str(folder)
    return os.pathsep.join([where, os.environ.get("PATH", "")])
