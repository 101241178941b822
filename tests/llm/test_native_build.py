"""llama.cpp is built for an explicit, portable instruction set, whatever processor built it: the choice
(`scripts/llama_build.py`) and the installed libraries themselves (disassembled with ``objdump -d``)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
spec = importlib.util.spec_from_file_location("llama_build", ROOT / "scripts" / "llama_build.py")
assert spec is not None and spec.loader is not None
llama_build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(llama_build)

AMX_XEON = ("flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c fma bmi1 avx2 bmi2 avx512f avx512bw avx512vl "
            "avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8\n")
OLD_XEON = "flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt\n"
# registers and mnemonics that only AVX-512 or AMX code uses
AVX512_OR_AMX = re.compile(r"%zmm|%tmm|%k[1-7]\b|\{%k|vpternlog|vpermt2|vpcompress|vpexpand|tileload|tdpb|ldtilecfg")
ABOVE_V2 = re.compile(r"%ymm|vfmadd|vcvtph2ps")


def test_an_amx_processor_gets_the_portable_v3_set_with_avx512_and_amx_off():
    level = llama_build.choose_level(llama_build.cpu_flags(AMX_XEON), "x86_64")
    args = llama_build.cmake_args(level)
    assert level == "x86-64-v3"
    assert "-DGGML_NATIVE=OFF" in args and "-DGGML_AMX_INT8=OFF" in args and "-DGGML_AVX512=OFF" in args
    assert "-DGGML_AVX2=ON" in args and not any("march" in a for a in args)


def test_a_processor_without_avx2_gets_a_narrower_set_and_another_wheel_folder(tmp_path):
    old = llama_build.choose_level(llama_build.cpu_flags(OLD_XEON), "x86_64")
    assert old == "x86-64-v2" and "-DGGML_AVX2=OFF" in llama_build.cmake_args(old)
    assert llama_build.wheel_dir(old, tmp_path) != llama_build.wheel_dir("x86-64-v3", tmp_path)
    assert llama_build.choose_level(set(), "x86_64") == "baseline"


def test_every_instruction_set_option_is_stated_so_no_default_can_turn_native_on():
    for level in llama_build.LEVELS:
        stated = {a.split("=")[0][2:] for a in llama_build.cmake_args(level)}
        assert set(llama_build.ISA_OPTIONS) <= stated and "GGML_NATIVE" in stated


def _libraries() -> list[Path]:
    found = importlib.util.find_spec("llama_cpp")
    if found is None or found.origin is None:
        pytest.skip("llama-cpp-python is not installed (make setup installs it)")
    return sorted(p for p in (Path(found.origin).parent / "lib").glob("*.so*") if p.is_file())


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) is not installed")
def test_the_installed_libraries_hold_no_instruction_outside_the_chosen_set():
    libs = _libraries()
    assert any("ggml-cpu" in p.name for p in libs), [p.name for p in libs]
    choice = subprocess.run([sys.executable, str(ROOT / "scripts" / "llama_build.py"), "--print"],
                            capture_output=True, text=True, check=True)
    level = json.loads(choice.stdout)["level"]
    forbidden = AVX512_OR_AMX if level == "x86-64-v3" else re.compile(AVX512_OR_AMX.pattern + "|" + ABOVE_V2.pattern)
    for lib in libs:
        hits = forbidden_hits(lib, forbidden)
        assert hits == [], f"{lib.name} ({level} build) uses {hits[:10]}"


def forbidden_hits(lib: Path, forbidden: re.Pattern[str]) -> list[str]:
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True,
                          check=True).stdout
    return sorted({m.group(0) for m in forbidden.finditer(text)})


@pytest.mark.skipif(shutil.which("objdump") is None or shutil.which("gcc") is None, reason="no objdump or gcc")
def test_the_check_finds_avx512_code_in_a_library_built_with_it(tmp_path):
    src = tmp_path / "wide.c"
    src.write_text("#include <immintrin.h>\nvoid twice(float *a) { __m512 x = _mm512_loadu_ps(a); "
                   "_mm512_storeu_ps(a, _mm512_add_ps(x, x)); }\n")
    lib = tmp_path / "libwide.so"
    subprocess.run(["gcc", "-O2", "-mavx512f", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    assert "%zmm" in forbidden_hits(lib, AVX512_OR_AMX)
