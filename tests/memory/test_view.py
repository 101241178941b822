"""The stored-item view every stored method holds (#30): bounded lazy reads, counts by status, catching up
with another process's writes — what a user's own stored method gets by holding one."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from guimem.embeddings import CachedEmbedder
from guimem.embeddings.hashing import HashingEmbedder
from guimem.memory.kit import MemoryKit
from guimem.memory.table import EventType
from guimem.memory.view import ItemView
from guimem.storage.sqlite import SQLiteStore
from guimem.tokens import WhitespaceCounter
from guimem.types import ItemKind, ItemStatus


class Note(BaseModel):
    text: str


def _kit(path) -> MemoryKit:
    return MemoryKit(store=SQLiteStore(path), embedder=CachedEmbedder(HashingEmbedder(16)),
                     counter=WhitespaceCounter(), namespace="mine")


def test_bodies_are_read_on_demand_and_kept_within_the_bound(tmp_path):
    kit = _kit(tmp_path / "m.sqlite")
    view = ItemView(kit, ItemKind.KNOWLEDGE, Note, bound=2)
    try:
        for i in range(3):
            view.put(f"n{i}", Note(text=f"note {i}"), ItemStatus.ACTIVE, EventType.CREATED, {})
        assert view.kept_items() == 2 and view.kept("n0") is None, "the least recently written went first"
        assert view.get("n0") == Note(text="note 0") and view.status("n0") == "active", "read again from the store"
        assert view.kept_items() == 2
    finally:
        kit.store.close()


def test_a_pool_is_read_in_one_store_read_and_kept(tmp_path, monkeypatch):
    kit = _kit(tmp_path / "m.sqlite")
    view = ItemView(kit, ItemKind.KNOWLEDGE, Note, bound=8)
    other = ItemView(kit, ItemKind.SKILL, Note)  # another kind: never taken for one of this view's items
    try:
        for i in range(8):
            view.put(f"n{i}", Note(text=f"note {i}"), ItemStatus.ACTIVE, EventType.CREATED, {})
        other.put("s0", Note(text="a skill"), ItemStatus.ACTIVE, EventType.CREATED, {})
        fresh = ItemView(kit, ItemKind.KNOWLEDGE, Note, bound=4)
        reads: list[list[str]] = []
        many = kit.store.get_many
        monkeypatch.setattr(kit.store, "get_many", lambda ids: reads.append(list(ids)) or many(ids))
        monkeypatch.setattr(kit.store, "get", lambda _id: (_ for _ in ()).throw(AssertionError("one at a time")))
        fresh.read_many(["n1", "n2", "s0", "gone"])
        assert reads == [["n1", "n2", "s0", "gone"]] and fresh.kept_items() == 2
        assert fresh.get("n1") == Note(text="note 1") and fresh.kept("s0") is None
        fresh.read_many(["n1", "n2"])  # kept: nothing read
        assert len(reads) == 1
        fresh.read_many([f"n{i}" for i in range(8)])  # no more than the bound is read
        assert len(reads[-1]) == 4 and fresh.kept_items() == 4
    finally:
        kit.store.close()


def test_counts_come_from_what_was_read_until_something_changes_then_from_the_store(tmp_path):
    kit = _kit(tmp_path / "m.sqlite")
    view = ItemView(kit, ItemKind.KNOWLEDGE, Note)
    try:
        view.set_counts({"active": 7})  # as an index cache said
        assert view.counts() == {"active": 7} and view.known_counts() == {"active": 7}
        view.put("n", Note(text="x"), ItemStatus.TRIAL, EventType.TRIAL, {})
        assert view.known_counts() is None and view.counts() == {"trial": 1}
    finally:
        kit.store.close()


def test_a_view_catches_up_with_what_another_process_wrote(tmp_path):
    writer, reader = _kit(tmp_path / "m.sqlite"), _kit(tmp_path / "m.sqlite")
    mine, theirs = ItemView(writer, ItemKind.KNOWLEDGE, Note), ItemView(reader, ItemKind.KNOWLEDGE, Note)
    try:
        assert theirs.changes() == ([], theirs.cursor.position)
        mine.put("n1", Note(text="first"), ItemStatus.CANDIDATE, EventType.CREATED, {})
        theirs.get("n1")
        mine.put("n1", Note(text="second"), ItemStatus.ADMITTED, EventType.ADMITTED, {})
        assert theirs.get("n1").text == "first", "kept until caught up"
        found = theirs.changes()
        assert found is not None
        changed, position = found
        assert [c.record.id for c in changed] == ["n1"]
        assert theirs.apply(changed[-1]) == Note(text="second") and theirs.status("n1") == "admitted"
        theirs.caught_up(position)
        assert theirs.changes() == ([], position)
        assert theirs.counts() == {"admitted": 1}
    finally:
        writer.store.close()
        reader.store.close()


def test_an_entry_saved_with_its_index_and_counts_opens_again_until_the_store_changes(tmp_path):
    from guimem.vectors import create_index

    kit = _kit(tmp_path / "m.sqlite")
    kit.cache_dir = tmp_path / "cache"
    try:
        view = ItemView(kit, ItemKind.KNOWLEDGE, Note)
        view.put("n", Note(text="x"), ItemStatus.ADMITTED, EventType.ADMITTED, {})
        index = create_index("exact", 16)
        index.add(["n"], np.ones((1, 16), dtype=np.float32))
        view.save_entry("notes", {"ids": np.asarray(["n"])}, index, counts={"admitted": 1})

        again, into = ItemView(kit, ItemKind.KNOWLEDGE, Note), create_index("exact", 16)
        found = again.open_entry("notes", [("notes", into)])
        assert found is not None and len(into) == 1 and again.known_counts() == {"admitted": 1}
        assert np.load(found[0] / "ids.npy").tolist() == ["n"]

        view.put("m", Note(text="y"), ItemStatus.TRIAL, EventType.TRIAL, {})  # the store moved on
        assert ItemView(kit, ItemKind.KNOWLEDGE, Note).open_entry("notes", [("notes", create_index("exact", 16))]) \
            is None, "a stale entry is rebuilt from the store, never trusted"
    finally:
        kit.store.close()
