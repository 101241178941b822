"""Installs llama-cpp-python built for *any* x86-64 machine of this kind, never for this one alone.

pip builds llama-cpp-python from source, and llama.cpp's default (``GGML_NATIVE=ON``) compiles for the
build machine's processor: AVX-512 and AMX kernels included where it has them. Such a build dies of
SIGILL on another processor, and pip's wheel cache (its key ignores ``CMAKE_ARGS``) would hand it to the
next install on any machine that shares the cache. So this script:

1. chooses an explicit instruction set, never ``-march=native``: ``x86-64-v3`` (SSE4.2, AVX, AVX2, FMA,
   F16C, BMI2; no AVX-512, no AMX) where the processor has all of them, else ``x86-64-v2`` (SSE4.2
   only), else ``baseline``; other architectures get llama.cpp's generic build;
2. builds the wheel with ``--no-cache-dir`` (pip's cache is neither read nor written) into a folder
   of its own whose name is a digest of the version and the exact CMake arguments, so a wheel is
   reused only where it was built with the same arguments;
3. installs that wheel alone (``--no-index``), replacing whatever llama-cpp-python the venv held.

Standard library only: it runs before guimem is installed. ``python scripts/llama_build.py --print``
shows the choice without building. The test suite disassembles the installed libraries and checks
them against the chosen set (``tests/llm/test_native_build.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

VERSION = "0.3.36"
OFF_ALWAYS = ["GGML_NATIVE", "GGML_AVX_VNNI", "GGML_AVX512", "GGML_AVX512_VBMI", "GGML_AVX512_VNNI",
              "GGML_AVX512_BF16", "GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16", "GGML_CPU_ALL_VARIANTS",
              "LLAVA_BUILD", "LLAMA_BUILD_TESTS", "LLAMA_BUILD_EXAMPLES", "LLAMA_CURL", "GGML_CCACHE"]
# level -> (the CPU flags /proc/cpuinfo must list, the GGML options switched on); everything else is off
LEVELS: dict[str, tuple[list[str], list[str]]] = {
    "x86-64-v3": (["sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"],
                  ["GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_BMI2"]),
    "x86-64-v2": (["sse4_2"], ["GGML_SSE42"]),
    "baseline": ([], []),
}
ISA_OPTIONS = ["GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_BMI2"]


def cpu_flags(cpuinfo: str) -> set[str]:
    """The flags of the first processor listed in a /proc/cpuinfo text."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def choose_level(flags: set[str], machine: str) -> str:
    """The widest level whose every flag the processor lists (``generic`` off x86-64)."""
    if machine not in ("x86_64", "AMD64"):
        return "generic"
    for level, (needed, _) in LEVELS.items():
        if set(needed) <= flags:
            return level
    return "baseline"


def cmake_args(level: str) -> list[str]:
    """The exact ``-D`` arguments for a level: every instruction-set option stated, none left to defaults."""
    args = [f"-D{name}=OFF" for name in OFF_ALWAYS]
    if level != "generic":
        on = LEVELS[level][1]
        args += [f"-D{name}={'ON' if name in on else 'OFF'}" for name in ISA_OPTIONS]
    return args


def wheel_dir(level: str, root: Path) -> Path:
    """Where the wheel built with these arguments lives (a digest of version and arguments)."""
    digest = hashlib.sha256(json.dumps([VERSION, cmake_args(level)]).encode()).hexdigest()[:16]
    return root / f"llama-cpp-python-{VERSION}-{level}-{digest}"


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine()
    return next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")),
                platform.machine())


def build(level: str, out: Path, python: str) -> Path:
    """Build the wheel into ``out`` (pip's cache unused); returns the wheel's path."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CMAKE_ARGS=" ".join(cmake_args(level)), CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 2))
    started = time.monotonic()
    tmp = out.with_name(out.name + ".partial")
    subprocess.run([python, "-m", "pip", "wheel", "-q", "--no-deps", "--no-cache-dir", "--no-binary",
                    "llama-cpp-python", f"llama-cpp-python=={VERSION}", "-w", str(tmp)], env=env, check=True)
    wheels = sorted(tmp.glob("llama_cpp_python-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"llama_build: expected one wheel in {tmp}, found {len(wheels)}")
    target = out / wheels[0].name
    wheels[0].replace(target)
    tmp.rmdir()
    (out / "build.json").write_text(json.dumps({"version": VERSION, "level": level, "cmake_args": cmake_args(level),
                                                "build_s": round(time.monotonic() - started, 1),
                                                "cpu": _cpu_model()}, indent=1))
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="the venv's python to install into")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                        / "guimem" / "wheels", help="where built wheels are kept (one folder per argument set)")
    parser.add_argument("--level", choices=[*LEVELS, "generic"], help="override the instruction-set level")
    parser.add_argument("--print", action="store_true", help="print the choice as JSON and build nothing")
    ns = parser.parse_args(argv)
    try:
        flags = cpu_flags(Path("/proc/cpuinfo").read_text())
    except OSError:
        flags = set()
    level = ns.level or choose_level(flags, platform.machine())
    folder = wheel_dir(level, ns.cache)
    if ns.print:
        print(json.dumps({"version": VERSION, "level": level, "cmake_args": cmake_args(level), "wheels": str(folder)}))
        return 0
    wheels = sorted(folder.glob("llama_cpp_python-*.whl"))
    wheel = wheels[0] if wheels else None
    if wheel is None:
        print(f"building llama-cpp-python {VERSION} for {level} (portable; a few minutes on 2 cores)", flush=True)
        wheel = build(level, folder, ns.python)
    subprocess.run([ns.python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--force-reinstall",
                    str(wheel)], check=True)
    print(f"llama-cpp-python {VERSION} installed: {level} build ({wheel.parent.name})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
