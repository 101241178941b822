"""One round clock, one place for a memory's store keys (#30): every method counts the boundaries it
applied, the service and the export read that count, and no module but `guimem.memory.keys` spells a key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import guimem
from guimem.memory.keys import MetaKey, RoundClock, meta_key
from guimem.storage.sqlite import SQLiteStore
from tests.service.test_core import service, trajectories

SRC = Path(guimem.__file__).parent


@pytest.mark.parametrize("method", ["graph", "skills", "steer", "stack", "none"])
def test_every_method_counts_its_boundaries_and_the_service_and_the_export_say_so(method, tmp_path):
    svc = service(tmp_path, method=method)
    try:
        for _ in range(2):
            svc.learn_file(trajectories(tmp_path))
            svc.end_round()
        stats = svc.stats()
        assert (stats.committed_round_index, stats.boundaries_applied) == (1, 2), stats
        svc.export(tmp_path / "export.jsonl")
        header = (tmp_path / "export.jsonl").read_text().splitlines()[0]
        assert '"boundaries_applied":2' in header.replace(" ", ""), header
    finally:
        svc.close()


def test_the_trial_clock_of_the_admission_lifecycle_is_the_memorys_round_clock(tmp_path):
    svc = service(tmp_path, method="stack")
    try:
        for _ in range(3):
            svc.learn_file(trajectories(tmp_path))
            svc.end_round()
        lifecycle = svc.memory.lifecycle  # type: ignore[attr-defined]
        assert lifecycle.round == RoundClock(svc.store, svc.namespace).applied() == 3
    finally:
        svc.close()


def test_restarting_the_clock_counts_rounds_from_the_first_and_keeps_the_boundaries_applied(tmp_path):
    store = SQLiteStore(tmp_path / "m.sqlite")
    clock = RoundClock(store, "graph")
    try:
        assert (clock.committed(), clock.applied()) == (-1, 0)
        clock.mark(0)
        clock.mark(1)
        clock.restart()
        assert (clock.committed(), clock.applied()) == (-1, 2)
        clock.mark(0)
        assert (clock.committed(), clock.applied()) == (0, 3)
        clock.carry(1)
        assert clock.applied() == 3, "an import behind this memory does not move its count back"
        clock.carry(7)
        assert clock.applied() == 7
    finally:
        store.close()


def test_a_store_written_before_every_method_kept_the_count_reads_its_committed_rounds(tmp_path):
    store = SQLiteStore(tmp_path / "m.sqlite")
    try:
        store.meta_set(meta_key("graph", MetaKey.BOUNDARY), "4")
        assert RoundClock(store, "graph").applied() == 5
    finally:
        store.close()


def test_no_module_but_the_keys_module_spells_a_store_meta_key():
    """A memory's key is written as ``meta_key(namespace, MetaKey.X)``: a key built by hand elsewhere would let two
    modules spell one key two ways (the service once read a count that only one method wrote)."""
    spelt = re.compile(r"""\.(meta_get|meta_set|lock)\(\s*f["']""")
    found = [f"{p.relative_to(SRC)}:{n}" for p in SRC.rglob("*.py") if p.name != "keys.py"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if spelt.search(line)]
    assert not found, found
