"""The store contract, run against every store backend: SQLite, and a real PostgreSQL 15 on loopback."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3

import numpy as np
import pytest

from guimem.errors import MigrationError, NotFoundError
from guimem.storage import Record, create_store
from guimem.storage.base import EventDraft, pack_vector
from guimem.storage.sqlite import SQLiteStore


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "m.sqlite")
    return request.getfixturevalue("pg_dsn")


@pytest.fixture
def store(store_url):
    s = create_store(store_url)
    yield s
    s.close()


def rec(ident: str, body: str = "{}", status: str = "active", kind: str = "node") -> Record:
    return Record(id=ident, kind=kind, namespace="graph", status=status, body=body)


def test_put_supersedes_and_keeps_history(store):
    store.put(rec("a", '{"v": 1}'))
    second = store.put(rec("a", '{"v": 2}', status="retired"))
    assert second.version == 2
    assert store.get("a").body == '{"v": 2}'
    assert [r.body for r in store.history("a")] == ['{"v": 1}', '{"v": 2}']
    assert store.stats("graph").by_kind_status == {("node", "retired"): 1}


def test_query_keeps_creation_order_across_new_versions(store):
    for ident in ("a", "b", "c"):
        store.put(rec(ident))
    store.put(rec("a", '{"v": 2}'))
    assert [r.id for r in store.query("graph")] == ["a", "b", "c"]


def test_query_filters_by_kind_and_status(store):
    store.put(rec("a"))
    store.put(rec("b", kind="edge", status="candidate"))
    store.put(rec("c", kind="edge", status="admitted"))
    assert [r.id for r in store.query("graph", "edge", ["admitted"])] == ["c"]
    assert [r.id for r in store.query("graph")] == ["a", "b", "c"]
    assert store.query("other") == []


def test_scan_hands_out_what_query_returns_a_chunk_at_a_time(store):
    from guimem.storage.base import Scanning

    assert isinstance(store, Scanning)
    for i in range(1205):
        store.put(rec(f"i{i:04d}" if i % 2 else f"z{i}", kind="edge" if i % 5 else "node",
                      status="admitted" if i % 3 else "candidate"))
    store.put(rec("i0001", kind="edge", status="candidate"))  # a new version, out of the filter
    store.put(Record("x", "edge", "elsewhere", "admitted", "{}"))  # another namespace
    for kind, statuses in ((None, None), ("edge", ["admitted"]), ("node", []), ("edge", ["admitted", "candidate"])):
        chunks = list(store.scan("graph", kind, statuses, chunk=100))
        assert [r.id for part in chunks for r in part] == [r.id for r in store.query("graph", kind, statuses)]
        assert all(0 < len(part) <= 100 for part in chunks)
        assert [r.body for part in chunks for r in part] == [r.body for r in store.query("graph", kind, statuses)]
    assert list(store.scan("nothing")) == []


def test_get_many_reads_the_current_versions_of_many_ids_and_leaves_out_unknown_ones(store):
    from guimem.storage.base import Batching

    assert isinstance(store, Batching)
    for i in range(1203):
        store.put(rec(f"i{i}", body=f'{{"n": {i}}}'))
    store.put(rec("i7", body='{"n": "again"}'))  # a new version
    asked = [f"i{i}" for i in range(1203, -1, -1)] + ["nope", "i7"]  # > 2 statements' worth, unknown, repeated
    found = store.get_many(asked)
    assert sorted(found) == sorted(f"i{i}" for i in range(1203))
    assert found["i7"].body == '{"n": "again"}' and found["i7"].version == 2
    assert all(found[i] == store.get(i) for i in ("i0", "i600", "i1202"))
    assert store.get_many([]) == {}


def test_vectors_round_trip(store):
    v = np.arange(4, dtype=np.float32)
    store.put(Record("a", "node", "graph", "active", "{}", pack_vector(v)))
    assert np.array_equal(store.get("a").vector_array(), v)


def test_events_are_written_with_the_change_and_in_order(store):
    store.put(rec("a"), EventDraft("created", "a", "graph", '{"why": "first"}'))
    store.append_event(EventDraft("trial", "a", "graph"))
    events = store.events(item_id="a")
    assert [e.type for e in events] == ["created", "trial"] and events[0].seq < events[1].seq


def test_failed_transaction_writes_nothing(store):
    with pytest.raises(RuntimeError), store.transaction():
        store.put(rec("a"), EventDraft("created", "a", "graph"))
        store.put(rec("b"))
        raise RuntimeError("boom")
    assert store.query("graph") == [] and store.events() == []


def test_unknown_item_raises_not_found(store):
    with pytest.raises(NotFoundError, match="no item with id 'zz'"):
        store.get("zz")


def test_meta_values(store):
    assert store.meta_get("embedder") is None
    store.meta_set("embedder", "e5")
    store.meta_set("embedder", "hashing")
    assert store.meta_get("embedder") == "hashing"


def test_sqlite_events_and_versions_cannot_be_rewritten(tmp_path):
    s = SQLiteStore(tmp_path / "m.sqlite")
    s.put(rec("a"), EventDraft("created", "a", "graph"))
    raw = sqlite3.connect(tmp_path / "m.sqlite")
    for sql in ("DELETE FROM events", "UPDATE events SET type = 'x'", "UPDATE items SET body = 'x'",
                "DELETE FROM items"):
        with pytest.raises(sqlite3.DatabaseError):
            raw.execute(sql)
    raw.close()
    s.close()


def test_store_written_by_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "m.sqlite"
    SQLiteStore(path).close()
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    with pytest.raises(MigrationError, match="newer"):
        SQLiteStore(path)


def _run_all(targets) -> None:
    """Run each (function, args) in its own process at once; every one must exit cleanly."""
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=f, args=a) for f, a in targets]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0


def _writer(path: str, worker: int, n: int) -> None:
    s = create_store(path)
    for i in range(n):
        with s.transaction():
            s.put(Record(f"w{worker}-{i}", "node", "graph", "active", "{}"),
                  EventDraft("created", f"w{worker}-{i}", "graph"))
            s.put(Record("shared", "counter", "graph", "active", f'{{"by": {worker}}}'))
    s.close()


def test_postgres_events_and_versions_cannot_be_rewritten(pg_dsn):
    import psycopg

    s = create_store(pg_dsn)
    s.put(rec("a"), EventDraft("created", "a", "graph"))
    for sql in ("DELETE FROM events", "UPDATE events SET type = 'x'", "UPDATE items SET body = 'x'",
                "DELETE FROM items"):
        with psycopg.connect(pg_dsn, autocommit=True) as raw, pytest.raises(psycopg.errors.RaiseException):
            raw.execute(sql)
    s.close()


def test_concurrent_processes_lose_no_writes(store_url):
    path = store_url
    create_store(path).close()
    _run_all([(_writer, (path, w, 40)) for w in range(4)])
    s = create_store(path)
    assert len(s.query("graph", "node")) == 160
    assert len(s.events(namespace="graph")) == 160
    assert len(s.history("shared")) == 160
    assert [r.version for r in s.history("shared")] == list(range(1, 161))


def test_postgres_turns_values_it_cannot_hold_into_data_errors(pg_dsn):
    from guimem.errors import DataError

    s = create_store(pg_dsn)
    with pytest.raises(DataError, match="refused"):
        s.get("bad\x00id")
    with pytest.raises(DataError, match="refused"):
        s.put(rec("nul\x00id"))
    assert s.query("graph") == []
    s.close()


def test_revision_changes_with_every_write_to_its_namespace_only(store):
    before = store.revision("graph")
    store.put(rec("a"))
    after_one = store.revision("graph")
    assert after_one != before
    store.put(Record(id="b", kind="node", namespace="other", status="active", body="{}"))
    assert store.revision("graph") == after_one, "another namespace's write leaves it alone"
    store.put(rec("a", status="deleted"))
    assert store.revision("graph") != after_one
    store.meta_set("graph.round", "3")
    store.append_event(EventDraft("x", None, "graph"))
    assert store.revision("graph") == store.revision("graph")


def test_an_id_of_one_namespace_cannot_be_written_in_another(store):
    from guimem.errors import DataError

    store.put(rec("k-1", '{"v": 1}'))
    with pytest.raises(DataError, match="already belongs to namespace 'graph'"):
        store.put(Record(id="k-1", kind="node", namespace="other", status="active", body='{"v": 2}'))
    assert store.get("k-1").body == '{"v": 1}' and store.query("graph")[0].id == "k-1"
    assert store.query("other") == []


def _counter(path: str, n: int) -> None:
    s = create_store(path)
    for _ in range(n):
        with s.transaction():
            s.lock("graph.counter")
            value = int(s.meta_get("counter") or 0)  # read, then write: only safe under the lock
            s.meta_set("counter", str(value + 1))
    s.close()


def test_a_lock_makes_read_then_write_safe_across_processes(store_url):
    create_store(store_url).close()
    _run_all([(_counter, (store_url, 30)) for _ in range(3)])
    s = create_store(store_url)
    assert s.meta_get("counter") == "90"
    from guimem.errors import StoreError

    with pytest.raises(StoreError, match="outside a transaction"):
        s.lock("x")
    s.close()


def test_changes_since_a_position_are_the_current_versions_written_after_it(store):
    from guimem.storage.base import Versioned

    assert isinstance(store, Versioned)
    store.put(rec("a"))
    store.put(rec("b"))
    seen = store.position("graph")
    store.put(rec("c"))
    store.put(rec("b", '{"v": 2}'))  # b: older, written after c — still listed before it (creation order)
    store.put(rec("c", '{"v": 2}', status="retired"))
    store.put(Record(id="z", kind="node", namespace="other", status="active", body="{}"))
    now = store.position("graph")
    assert now > seen and store.position("nothing") == 0
    changed = store.changes("graph", seen, now)
    assert [(c.record.id, c.record.version, c.record.status, c.new) for c in changed] == [
        ("b", 2, "active", False), ("c", 2, "retired", True)]
    assert store.changes("graph", now, store.position("graph")) == []
