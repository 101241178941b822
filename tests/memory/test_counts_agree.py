"""One memory of every method, four surfaces, one count: the inspector's data (``/v1/stats``), the report's
data (`reportdata.learned`), the CLI (``guimem memory stats --json``) and ``memory.stats()`` agree."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from guimem.cli.app import app
from guimem.harness.reportdata import learned
from guimem.memory.factory import METHODS, open_memory
from guimem.memory.names import namespace_of
from guimem.service.core import MemoryService, ServiceSettings
from guimem.service.http import create_app
from guimem.settings import GuimemSettings
from guimem.testing.server import live_http
from guimem.types import write_trajectories
from tests.memory.conftest import CANCEL, LOGIN, PASS, USER, episode

runner = CliRunner()


def _rounds(tmp_path: Path) -> list[Path]:
    """Two rounds of recorded episodes: successes, a failed login and a cancel."""
    files = []
    for r in range(2):
        path = tmp_path / f"round-{r}.jsonl"
        write_trajectories(path, [episode([USER, PASS, LOGIN], seed=1 + 10 * r), episode([LOGIN], seed=2 + 10 * r),
                                  episode([CANCEL], seed=3 + 10 * r), episode([USER, PASS, LOGIN], seed=4 + 10 * r)])
        files.append(path)
    return files


def _statuses(counts: dict[str, int]) -> dict[str, int]:
    """The ``kind:status`` counts summed by status."""
    out: Counter[str] = Counter()
    for key, n in counts.items():
        out[key.partition(":")[2]] += n
    return dict(out)


def _own_view(method: str, counts: dict[str, int]) -> dict[str, int]:
    """What ``memory.stats()`` must say of ``counts`` in its own keys: it counts by status, not by kind (the
    graph: its nodes, and its edges by success label; their total is the edges')."""
    if method == "graph":
        return {"nodes": sum(n for k, n in counts.items() if k.startswith("node:")),
                "edges": sum(n for k, n in counts.items() if k.startswith("edge:"))}
    return _statuses(counts)


def _graph_view(stats: dict[str, int]) -> dict[str, int]:
    return {"nodes": stats.get("nodes", 0), "edges": sum(n for k, n in stats.items() if k.startswith("edges_"))}


@pytest.mark.parametrize("method", METHODS)
def test_the_inspector_the_report_the_cli_and_memory_stats_count_one_memory_alike(method, tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    store = str(tmp_path / "m.sqlite")
    for path in _rounds(tmp_path):  # learn and end the round, as a user does
        result = runner.invoke(app, ["learn", str(path), "--store", store, "--method", method, "--json"])
        assert result.exit_code == 0, result.output

    result = runner.invoke(app, ["memory", "stats", "--store", store, "--method", method, "--json"])
    assert result.exit_code == 0, result.output
    cli = json.loads(result.output)["items"]
    service = MemoryService(ServiceSettings(store=store, method=method, create=False))
    try:
        with live_http(create_app(service)) as url:
            inspector = httpx.get(f"{url}/v1/stats").json()["items"]  # the inspector's summary line
    finally:
        service.close()
    report = learned(Path(store), namespace_of(method)).counts
    memory = open_memory(method, store, GuimemSettings(), create=False)
    try:
        own = memory.stats()
    finally:
        memory.close()

    assert cli == inspector == report, "the CLI, the inspector and the report count by the same kinds and statuses"
    if method == "none":
        assert cli == {} and own == {}
        return
    assert cli, f"{method} learned nothing from two rounds: the test would not compare anything"
    assert (_graph_view(own) if method == "graph" else own) == _own_view(method, cli)
