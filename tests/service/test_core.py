from __future__ import annotations

import json
from pathlib import Path

import pytest

from guimem.embeddings import CachedEmbedder
from guimem.embeddings.hashing import HashingEmbedder
from guimem.errors import ConfigError, DataError, TrajectoryFormatError
from guimem.service.core import MemoryService, ServiceSettings
from guimem.service.models import RecallRequest
from guimem.settings import GuimemSettings
from guimem.testing import FormEnv
from guimem.types import Task, write_trajectories
from tests.memory.conftest import LOGIN, PASS, USER, episode


def service(tmp_path, method="steer", store="m.sqlite", data_dir=None, dim=64):
    process = GuimemSettings()
    process.embedder.name = "hashing"
    process.embedder.dim = dim
    url = store if store.startswith("postgresql://") else str(tmp_path / store)
    return MemoryService(ServiceSettings(store=url, method=method, data_dir=data_dir), process,
                         env_factory=FormEnv, embedder=CachedEmbedder(HashingEmbedder(dim)))


def trajectories(tmp_path):
    path = tmp_path / "t.jsonl"
    write_trajectories(path, [episode([USER, PASS, LOGIN], seed=1), episode([LOGIN], seed=2)])
    return path


def request(seed=5):
    env = FormEnv()
    obs = env.reset(Task(id="form", goal="", app="form", seed=seed))
    return RecallRequest(goal=env.task.goal, observation=obs, task_id="form", params=env.task.params)


def test_learn_end_round_recall_and_inspect(tmp_path):
    svc = service(tmp_path)
    reply = svc.learn_file(trajectories(tmp_path))
    assert reply.episodes == 2 and reply.queued == 2 and svc.stats().queued == 2
    stats = svc.end_round()
    assert stats.items == {"knowledge:candidate": 2} and stats.boundaries_applied == 1 and stats.queued == 0
    items = svc.list_items(kind="knowledge", status="candidate")
    detail = svc.show(items[0].id)
    assert detail.body["kind"] in ("procedure", "warning")
    assert [e.type for e in svc.history(items[0].id)] == ["created"]
    assert svc.recall(request()).method == "steer"


def test_a_malformed_line_fails_the_whole_file_and_stores_nothing(tmp_path):
    svc = service(tmp_path, method="graph")
    path = trajectories(tmp_path)
    path.write_text(path.read_text() + '{"version": 1, "task": 3}\n')
    with pytest.raises(TrajectoryFormatError) as info:
        svc.learn_file(path)
    assert info.value.line == 3
    assert svc.stats().items == {} and svc.stats().events == 0


def test_a_crash_inside_a_boundary_rolls_everything_back(tmp_path):
    svc = service(tmp_path, method="graph")
    good = episode([USER, PASS, LOGIN], seed=1)

    class BoomError(Exception):
        pass

    original = svc.memory.learn
    calls = []

    def flaky(t):
        calls.append(t)
        if len(calls) == 2:
            raise BoomError
        return original(t)

    svc.learn([good, episode([USER, PASS, LOGIN], seed=2)])  # two episodes (the same one twice is learned once)
    svc.memory.learn = flaky
    with pytest.raises(BoomError):
        svc.end_round()
    assert svc.stats().items == {} and svc.stats().queued == 2, "the boundary is all or nothing"


def test_skills_show_their_code(tmp_path):
    svc = service(tmp_path, method="skills")
    svc.learn_file(trajectories(tmp_path))
    svc.end_round()
    skill = svc.list_items(kind="skill")[0]
    assert "def " in svc.show(skill.id).code


def test_export_import_round_trip_keeps_versions_and_events(tmp_path):
    svc = service(tmp_path)
    svc.learn_file(trajectories(tmp_path))
    svc.end_round()
    out = svc.export(tmp_path / "export.jsonl")
    assert out.records == 2 and out.events >= 2
    other = service(tmp_path, store="other.sqlite")
    back = other.import_(tmp_path / "export.jsonl")  # imports are untrusted: each item gains an "imported" version
    assert back.records == out.records + len(svc.list_items()) and other.stats().items == svc.stats().items
    assert {i.id for i in other.list_items()} == {i.id for i in svc.list_items()}


def test_import_refuses_a_bad_file_and_writes_nothing(tmp_path):
    svc = service(tmp_path)
    svc.learn_file(trajectories(tmp_path))
    svc.end_round()
    svc.export(tmp_path / "export.jsonl")
    lines = (tmp_path / "export.jsonl").read_text().splitlines()
    lines.insert(2, json.dumps({"type": "record", "id": "x"}))
    (tmp_path / "bad.jsonl").write_text("\n".join(lines))
    other = service(tmp_path, store="other.sqlite")
    with pytest.raises(DataError) as info:
        other.import_(tmp_path / "bad.jsonl")
    assert info.value.line == 3
    assert other.stats().items == {}


def test_paths_outside_the_data_directory_are_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    svc = service(tmp_path, data_dir=data)
    with pytest.raises(ConfigError, match="outside the data directory"):
        svc.export(tmp_path / "elsewhere.jsonl")
    with pytest.raises(ConfigError, match="outside the data directory's exports/ folder"):
        svc.export(data / "run" / "results.jsonl")
    with pytest.raises(ConfigError, match="outside"):
        svc.import_(data / ".." / "escape.jsonl")
    assert svc.export(data / "exports" / "ok.jsonl").records == 0
    assert svc.export(Path("ok.jsonl")).path == "exports/ok.jsonl"  # a previous export may be replaced


def test_a_memory_built_with_another_embedder_is_refused(tmp_path):
    service(tmp_path, dim=64).close()
    with pytest.raises(ConfigError, match="built with embedder 'hashing:64'"):
        service(tmp_path, dim=32)


def test_manual_curation_is_checked_and_logged(tmp_path):
    svc = service(tmp_path)
    svc.learn_file(trajectories(tmp_path))
    svc.end_round()
    item = svc.list_items()[0].id
    from guimem.errors import LifecycleError

    with pytest.raises(LifecycleError):
        svc.set_status(item, "retired", "not admitted yet")
    graph = service(tmp_path, method="graph", store="g.sqlite")
    with pytest.raises(ConfigError, match="no admission lifecycle"):
        graph.set_status("x", "admitted", "")


def test_learning_with_the_boundary_reports_what_it_added(tmp_path):
    svc = service(tmp_path)
    reply = svc.learn_file(trajectories(tmp_path), end_round=True)
    assert (reply.episodes, reply.added, reply.queued) == (2, 2, 0)
    assert svc.stats().items == {"knowledge:candidate": 2}


def test_episodes_learned_without_a_boundary_wait_in_the_store_not_in_the_process(tmp_path):
    first = service(tmp_path, method="graph")
    first.learn_file(trajectories(tmp_path))
    first.close()  # the process that learned them is gone before the boundary
    second = service(tmp_path, method="graph")
    assert second.stats().queued == 2
    stats = second.end_round()
    assert stats.queued == 0 and stats.items.get("edge:active", 0) > 0
    assert second.end_round().items == stats.items, "an episode is learned once"


def test_after_a_failed_boundary_the_service_recalls_what_the_store_holds(tmp_path):
    svc = service(tmp_path, method="graph")
    svc.learn([episode([USER, PASS, LOGIN], seed=1)])
    original = svc.memory.end_round

    def crash() -> None:
        original()  # the graph's in-process index has the new nodes and edges now
        raise RuntimeError("disk full")

    svc.memory.end_round = crash
    with pytest.raises(RuntimeError):
        svc.end_round()
    assert svc.stats().items == {} and svc.stats().queued == 1
    assert svc.recall(request()).injection.items == (), "nothing the rolled-back boundary added in-process"
    assert svc.end_round().items.get("edge:active", 0) > 0, "the queued episode is learned by the next boundary"


def test_a_users_method_whose_commit_round_returns_nothing_is_served_and_learns(tmp_path):
    svc = service(tmp_path, method="tests.memory.test_contract:SucceededBefore")
    from guimem.types import read_trajectories

    svc.learn(read_trajectories(trajectories(tmp_path)), end_round=True)
    stats = svc.stats()
    assert stats.committed_round_index == 0 and stats.queued == 0
    svc.close()


def test_a_hand_admission_is_listed_as_manual(tmp_path):
    svc = service(tmp_path)
    svc.learn(read_trajectories_of(tmp_path), end_round=True)
    item = svc.list_items()[0]
    if item.status == "candidate":
        svc.set_status(item.id, "trial", "test")
    listed = svc.set_status(item.id, "admitted", "a person said so")
    assert listed.manual and next(i for i in svc.list_items() if i.id == item.id).manual
    assert not any(i.manual for i in svc.list_items() if i.id != item.id)
    svc.close()


def read_trajectories_of(tmp_path):
    from guimem.types import read_trajectories

    return read_trajectories(trajectories(tmp_path))


def test_a_service_opened_on_an_import_path_finds_the_memory_an_evaluation_kept(tmp_path, monkeypatch):
    import json as _json

    from typer.testing import CliRunner

    from guimem.cli.app import app

    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    method = "examples.extending.tally_memory:TallyMemory"
    result = CliRunner().invoke(app, ["eval", "--env", "examples.extending.counter_env:CounterEnv", "--suite",
                                      "examples/extending/counter_suite.json", "--rounds", "2", "--methods", method,
                                      "--out", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 0, result.output
    store = next((tmp_path / "run" / "memory").glob("*Tally*.sqlite"))
    svc = service(tmp_path, method=method, store=str(store), dim=384)
    stats = svc.stats()
    svc.close()
    assert stats.namespace == "tallymemory" and stats.committed_round_index == 1, _json.dumps(stats.model_dump())


def test_warm_loads_the_embedding_model_and_the_token_encoding_before_the_first_recall(tmp_path, monkeypatch):
    """`guimem serve` calls it before it listens: the first recall does not wait 0.1 s for e5 and 0.12 s for the
    token encoding."""
    from guimem.tokens import TiktokenCounter

    encodings: list[str] = []
    load = TiktokenCounter.load
    monkeypatch.setattr(TiktokenCounter, "load", lambda self: encodings.append(self.encoding) or load(self))
    svc = service(tmp_path)
    embedded: list[str] = []
    inner = svc._embedder.embed
    monkeypatch.setattr(svc._embedder, "embed",
                        lambda texts, *a, **kw: embedded.extend(texts) or inner(texts, *a, **kw))
    try:
        said = svc.warm()
        assert embedded and encodings == [svc.process.token_encoding]
        assert "loaded" in said
    finally:
        svc.close()
