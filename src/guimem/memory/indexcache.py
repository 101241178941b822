"""Derived files of a memory (vector indexes, adjacency arrays) persisted in a cache folder.

The store stays the system of record: a cache entry is valid only while the store's revision of the
memory's namespace (written versions, last write), the embedder and the index backend are the ones
it was built from; otherwise it is rebuilt from the store. Deleting the cache loses nothing.
Entries live under the cache folder (``GUIMEM_CACHE_DIR``, default ``~/.cache/guimem``), never beside
a store, so a read-only command never writes next to the store it opened.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from guimem.errors import FileConflictError
from guimem.memory.kit import MemoryKit
from guimem.types.files import write_atomic
from guimem.vectors import paging

log = logging.getLogger(__name__)
FORMAT = 1
REPLACED_KEPT_S = 300.0
"""How long a replaced entry stays on disk: another worker may have read the pointer to it a moment before and
be opening it now (what it opened, it holds: graphs and arrays are memory-mapped). Older replaced entries, and
entries another writer wrote but never pointed to, are removed at the next save."""
_REPLACED = "replaced"


@runtime_checkable
class Revisioned(Protocol):
    """A store that can say when a namespace last changed (the SQL stores can)."""

    def revision(self, namespace: str) -> str:
        """A marker that changes whenever an item of ``namespace`` is written."""
        ...


class Saved(Protocol):
    """What an entry holds: anything that saves itself into a folder and loads from one (a `VectorIndex`, a
    `VectorTable`)."""

    def save(self, path: Path) -> None:
        """Write into ``path``."""
        ...

    def load(self, path: Path) -> None:
        """Read what `save` wrote."""
        ...


def default_cache_dir() -> Path:
    """``$GUIMEM_CACHE_DIR``, else ``$XDG_CACHE_HOME/guimem``, else ``~/.cache/guimem``."""
    if os.environ.get("GUIMEM_CACHE_DIR"):
        return Path(os.environ["GUIMEM_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "guimem"


class IndexCache:
    """The cache entries of one memory (one store and namespace).

    Args:
        kit: The memory's store, namespace, embedder and index backend; ``kit.cache_dir`` None
            (or a store that cannot tell its revision, or an in-memory store) disables the cache.
    """

    def __init__(self, kit: MemoryKit) -> None:
        self.kit = kit
        url = kit.store.url
        usable = kit.cache_dir is not None and isinstance(kit.store, Revisioned) and url not in (":memory:", "")
        where = os.path.realpath(url) if usable and "://" not in url else url
        key = hashlib.sha1(f"{where}|{kit.namespace}".encode()).hexdigest()[:20]
        self.folder: Path | None = Path(kit.cache_dir) / "index" / key if usable and kit.cache_dir else None

    @property
    def enabled(self) -> bool:
        """Whether entries are read and written."""
        return self.folder is not None

    def stamp(self, revision: bool = True) -> dict[str, Any]:
        """What an entry must match to be used (``revision`` False: an entry whose content depends only
        on texts and the embedder, e.g. vectors keyed by a hash of their text, stays valid as the store
        changes)."""
        rev = self.kit.store.revision(self.kit.namespace) if revision and isinstance(self.kit.store, Revisioned) \
            else ""
        return {"format": FORMAT, "store": self.kit.store.url, "namespace": self.kit.namespace,
                "revision": rev, "embedder": self.kit.embedder.name, "index": self.kit.vector_index}

    def load(self, name: str, revision: bool = True) -> tuple[Path, dict[str, Any]] | None:
        """The folder of a valid entry ``name`` and its extras, or None (missing, stale or unreadable)."""
        if self.folder is None:
            return None
        entry = self._entry(name)
        if entry is None:
            return None
        try:
            saved = json.loads((entry / "stamp.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(saved, dict) or saved.get("stamp") != self.stamp(revision):
            log.info("index cache %s is stale or from another store; rebuilding", entry)
            return None
        extras = saved.get("extras")
        return entry, extras if isinstance(extras, dict) else {}

    def _entry(self, name: str) -> Path | None:
        """The folder that entry ``name``'s pointer file names, or None (no entry yet)."""
        assert self.folder is not None
        try:
            current = (self.folder / f"{name}.entry").read_text(encoding="utf-8").strip()
        except OSError:
            return None
        return self.folder / current if current and Path(current).name == current else None

    def save(self, name: str, write: Any, extras: dict[str, Any] | None = None, revision: bool = True,
             stamp: dict[str, Any] | None = None) -> Path | None:
        """Write entry ``name``: ``write(folder)`` fills a fresh folder, then the entry's pointer file is
        replaced to name it (`write_atomic`: a reader sees the old entry or the new one, never half of
        one). ``stamp``: one taken before what was written was read (a long first open: writes made while
        it read are then not claimed by the entry). Returns the entry's folder, or None: failures only log,
        it is a cache."""
        if self.folder is None:
            return None
        fresh = self.folder / f"{name}-{uuid.uuid4().hex[:8]}"
        try:
            fresh.mkdir(parents=True)
            write(fresh)
            (fresh / "stamp.json").write_text(json.dumps({"stamp": stamp or self.stamp(revision),
                                                          "extras": extras or {}}), encoding="utf-8")
            previous = self._entry(name)
            write_atomic(self.folder / f"{name}.entry", fresh.name)
        except (OSError, FileConflictError) as exc:
            log.warning("cannot write the index cache %s: %s", self.folder / name, exc)
            shutil.rmtree(fresh, ignore_errors=True)
            return None
        if previous is not None and previous != fresh:
            with contextlib.suppress(OSError):
                (previous / _REPLACED).touch()  # removed by a later save, once no open can still be reading it
        shutil.rmtree(self.folder / name, ignore_errors=True)  # a folder of the older layout
        self._sweep(name, fresh)
        return fresh

    def _sweep(self, name: str, current: Path) -> None:
        """Remove entries of ``name`` other than ``current`` that were replaced (or written and never pointed
        to) more than `REPLACED_KEPT_S` ago."""
        assert self.folder is not None
        now = time.time()
        for folder in self.folder.glob(f"{name}-????????"):
            if folder == current or not folder.is_dir():
                continue
            try:
                marker = folder / _REPLACED
                since = marker.stat().st_mtime if marker.exists() else max(
                    folder.stat().st_mtime, *(f.stat().st_mtime for f in folder.iterdir()))
            except (OSError, ValueError):
                continue  # being removed by another writer
            if now - since > REPLACED_KEPT_S:
                shutil.rmtree(folder, ignore_errors=True)

    def open_index(self, name: str, index: Saved, revision: bool = True) -> dict[str, Any] | None:
        """Fill ``index`` from entry ``name`` when it is valid; returns the entry's extras (None: rebuild)."""
        found = self.load(name, revision)
        if found is None or not self.fill(found[0], index):
            return None
        self.warm(index)  # accepted: paged in
        return found[1]

    def fill(self, folder: Path, index: Saved) -> bool:
        """Fill ``index`` from an entry's folder (`load`); False (rebuild) when it cannot be read. Not paged in: the
        caller `warm`s it once everything it opens with it is accepted."""
        try:
            index.load(folder / "index")
        except Exception as exc:  # a corrupt cache file is rebuilt from the store, never trusted
            log.warning("index cache %s unreadable (%s); rebuilding", folder, exc)
            return False
        return True

    def warm(self, index: object) -> list[paging.Warming]:
        """Page in what an index just opened from an entry mapped (`paging.Warmable`), on a background thread,
        unless the memory's settings turned it off (``warm_indexes``)."""
        if self.kit.warm_indexes and isinstance(index, paging.Warmable):
            return self.kit.started(index.warm())
        return []

    def save_index(self, name: str, index: Saved, arrays: dict[str, NDArray[Any]] | None = None,
                   extras: dict[str, Any] | None = None, revision: bool = True) -> Path | None:
        """Persist ``index`` (and side arrays) as entry ``name``; the entry's folder, or None (not written)."""
        def write(folder: Path) -> None:
            index.save(folder / "index")
            for key, array in (arrays or {}).items():
                np.save(folder / f"{key}.npy", array)
        return self.save(name, write, extras, revision)

    @staticmethod
    def array(folder: Path, key: str) -> NDArray[Any]:
        """A side array of an entry, memory-mapped."""
        array: NDArray[Any] = np.load(folder / f"{key}.npy", mmap_mode="r")
        return array

    def mapped_arrays(self, folder: Path, keys: Sequence[str]) -> list[NDArray[Any]]:
        """Side arrays that stay mapped and are read at random: memory-mapped, then, once all of them opened,
        paged in on a background thread (`warm`)."""
        pages = paging.Pages()
        arrays: list[NDArray[Any]] = [pages.load_array(folder / f"{key}.npy") for key in keys]
        self.warm(pages)
        return arrays
