"""Issue 29, item 4: an export writes only new files (or replaces a previous export) with its extension, in a
folder of its own under the data directory, and never opens or replaces a device, a FIFO or a link."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from guimem.errors import ConfigError, FileConflictError
from guimem.service.http import create_app
from guimem.testing.server import live_http
from tests.service.test_core import service

KEY = "k"
H = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "runs"
    (d / "demo").mkdir(parents=True)
    (d / "demo" / "results.jsonl").write_text('{"method": "steer"}\n')
    return d


@pytest.fixture
def url(tmp_path, data):
    svc = service(tmp_path, data_dir=data)
    with live_http(create_app(svc, api_key=KEY)) as base:
        yield base
    svc.close()


def test_an_export_never_replaces_an_evaluations_results(url, data):
    r = httpx.post(f"{url}/v1/export", json={"path": "demo/results.jsonl"}, headers=H)
    assert r.status_code == 200 and r.json()["path"] == "exports/demo/results.jsonl"
    assert (data / "demo" / "results.jsonl").read_text() == '{"method": "steer"}\n'
    again = httpx.post(f"{url}/v1/export", json={"path": "exports/demo/results.jsonl"}, headers=H)
    assert again.status_code == 200  # a previous export may be replaced


def test_an_export_refuses_a_file_that_is_not_an_export_a_fifo_and_a_linked_folder(url, data, tmp_path):
    exports = data / "exports"
    exports.mkdir()
    (exports / "notes.jsonl").write_text("mine\n")
    os.mkfifo(exports / "pipe.jsonl")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (exports / "sub").symlink_to(elsewhere)
    for name, words in (("notes.jsonl", "not a guimem export"), ("pipe.jsonl", "FIFO"), ("sub/x.jsonl", "link")):
        r = httpx.post(f"{url}/v1/export", json={"path": name}, headers=H, timeout=10)
        assert r.status_code == 409 and words in r.json()["message"], (name, r.text)
        assert str(data) not in r.text
    assert (exports / "notes.jsonl").read_text() == "mine\n"
    assert stat.S_ISFIFO(os.lstat(exports / "pipe.jsonl").st_mode)
    assert list(elsewhere.iterdir()) == []


def test_an_export_is_a_jsonl_file_and_replaces_only_a_previous_export(tmp_path, data):
    svc = service(tmp_path, data_dir=data)
    with pytest.raises(ConfigError, match=r"\.jsonl"):
        svc.export(Path("mcp-notjsonl.txt"))
    (data / "exports").mkdir()
    (data / "exports" / "x.jsonl").write_text("x\n")
    with pytest.raises(FileConflictError, match="not a guimem export"):
        svc.export(Path("x.jsonl"))
    assert svc.export(Path("y.jsonl")).path == svc.export(Path("y.jsonl")).path == "exports/y.jsonl"
    svc.close()


def _cli_export(target: Path, store: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guimem.cli", "memory", "export", str(target), "--store", store],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GUIMEM_EMBEDDER__NAME": "hashing", "GUIMEM_EMBEDDER__DIM": "64"})


def test_the_cli_export_never_replaces_a_device_or_writes_through_a_link(tmp_path):
    store = tmp_path / "s.sqlite"
    service(tmp_path, store="s.sqlite").close()
    precious = tmp_path / "precious.jsonl"
    precious.write_text("keep me\n")
    (tmp_path / "link.jsonl").symlink_to(precious)
    cases = [(tmp_path / "link.jsonl", "symbolic link"), (precious, "not a guimem export")]
    device = tmp_path / "null.jsonl"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        cases.append((device, "device"))
    except PermissionError:  # not root: the device case cannot be built; the others still run, then skip
        device = None
    for target, words in cases:
        proc = _cli_export(target, str(store))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and words in proc.stderr, proc.stderr
        assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1
    assert precious.read_text() == "keep me\n" and (tmp_path / "link.jsonl").is_symlink()
    if device is None:
        pytest.skip("the device case needs root (mknod)")
    if device.exists():
        assert stat.S_ISCHR(os.lstat(device).st_mode)
    fresh = tmp_path / "fresh.jsonl"
    assert _cli_export(fresh, str(store)).returncode == 0 and _cli_export(fresh, str(store)).returncode == 0


def _svc(tmp_path, method: str, namespace: str | None = None):
    from guimem.embeddings import CachedEmbedder
    from guimem.embeddings.hashing import HashingEmbedder
    from guimem.service.core import MemoryService, ServiceSettings
    from guimem.settings import GuimemSettings

    process = GuimemSettings()
    process.embedder.name, process.embedder.dim = "hashing", 64
    return MemoryService(ServiceSettings(store=str(tmp_path / "m.sqlite"), method=method, namespace=namespace,
                                         data_dir=tmp_path), process, embedder=CachedEmbedder(HashingEmbedder(64)))


def test_an_import_refuses_another_methods_export_and_another_namespaces_ids(tmp_path):
    from guimem.errors import DataError
    from tests.memory.conftest import LOGIN, PASS, USER, episode

    steer = _svc(tmp_path, "steer")
    steer.learn([episode([USER, PASS, LOGIN], seed=1)], end_round=True)
    steer.export(Path("steer.jsonl"))
    graph = _svc(tmp_path, "graph")
    with pytest.raises(DataError, match="export of a steer memory cannot be imported into a graph memory"):
        graph.import_(Path("exports/steer.jsonl"))
    assert graph.stats().items == {} and graph.stats().events == 0
    other = _svc(tmp_path, "steer", namespace="other")
    with pytest.raises(DataError, match="another namespace") as info:
        other.import_(Path("exports/steer.jsonl"))
    assert str(tmp_path) not in info.value.message
    assert other.stats().items == {} and other.stats().events == 0
    for s in (steer, graph, other):
        s.close()
