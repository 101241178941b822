"""Issue 29, item 1: a number that is not finite is refused at every entry, and a queued entry the memory
cannot learn is quarantined (with its reason) while the rest are learned; a boundary never half-commits."""

from __future__ import annotations

import json

import httpx
import pytest

from guimem.errors import DataError
from guimem.service.http import create_app
from guimem.storage import Record
from guimem.testing.server import live_http
from tests.memory.conftest import LOGIN, PASS, USER, episode
from tests.service.test_core import service

KEY = "k"
AUTH = {"Authorization": f"Bearer {KEY}"}


def _infinite(traj: dict) -> str:
    """A learn body whose trajectory's ``wall_ms`` is 1e400 (infinity in Python's json)."""
    text = json.dumps({"trajectories": [traj]})
    return text.replace(f'"wall_ms": {json.dumps(traj["wall_ms"])}', '"wall_ms": 1e400')


@pytest.fixture
def svc(tmp_path):
    s = service(tmp_path, method="graph")
    yield s
    s.close()


@pytest.mark.parametrize("literal", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity"])
def test_http_refuses_a_non_finite_number_and_the_memory_keeps_learning(svc, literal):
    good = episode([USER, PASS, LOGIN], seed=1).model_dump(mode="json")
    body = _infinite(good).replace("1e400", literal)
    with live_http(create_app(svc, api_key=KEY)) as url:
        refused = httpx.post(f"{url}/v1/learn", content=body, headers={**AUTH, "Content-Type": "application/json"})
        assert refused.status_code == 400 and ("range" in refused.text or "not a JSON number" in refused.text)
        assert svc.stats().queued == 0
        ok = httpx.post(f"{url}/v1/learn", json={"trajectories": [good], "end_round": True}, headers=AUTH)
        assert ok.status_code == 200, ok.text
        again = httpx.post(f"{url}/v1/end_round", json={}, headers=AUTH)
        assert again.status_code == 200 and again.json()["quarantined"] == 0


def _queue_broken_entry(svc, traj: dict) -> None:
    """What main 07515da stored for ``"wall_ms": 1e400``: the episode with ``null`` where the number was."""
    body = json.dumps({**traj, "wall_ms": None})
    svc.store.put(Record("ep-broken", "episode", f"{svc.namespace}.queue", "queued", body))


def test_a_queued_entry_that_no_longer_validates_is_quarantined_and_the_rest_are_learned(svc):
    _queue_broken_entry(svc, episode([LOGIN], seed=3).model_dump(mode="json"))
    svc.learn([episode([USER, PASS, LOGIN], seed=1)])
    stats = svc.end_round()
    assert stats.queued == 0 and stats.quarantined == 1 and stats.committed_round_index == 0
    assert stats.quarantine[0].id == "ep-broken" and "wall_ms" in stats.quarantine[0].reason
    assert stats.items.get("edge:active", 0) >= 1
    svc.learn([episode([LOGIN], seed=2)])
    assert svc.end_round().committed_round_index == 1  # the next boundaries go on


def test_an_episode_whose_learn_fails_rolls_its_boundary_back_and_is_quarantined(tmp_path, monkeypatch):
    svc = service(tmp_path, method="steer")
    first, bad, last = (episode([USER, PASS, LOGIN], seed=1), episode([LOGIN], seed=2),
                        episode([USER, LOGIN], seed=3))
    original = svc.memory.learn

    def learn(t):
        if t.episode_id == bad.episode_id:
            raise ValueError("this episode cannot be learned")
        return original(t)

    monkeypatch.setattr(svc.memory, "learn", learn)
    reply = svc.learn([first, bad, last], end_round=True)
    assert reply.quarantined == 1 and reply.queued == 0
    stats = svc.stats()
    assert stats.quarantined == 1 and "cannot be learned" in stats.quarantine[0].reason
    assert stats.committed_round_index == 0 and stats.boundaries_applied == 1  # one boundary, not half and whole
    proposed = [e for e in svc.store.events(namespace=svc.namespace) if e.type == "proposed"]
    episodes = [json.loads(e.payload)["episode"] for e in proposed]
    assert sorted(set(episodes)) == sorted({first.episode_id, last.episode_id})
    assert len(episodes) == len(set(zip(episodes, [e.payload for e in proposed], strict=True)))  # none twice
    svc.close()


def test_learn_with_end_round_that_fails_commits_nothing(svc, monkeypatch):
    from guimem.memory.graph import GraphMemory

    def broken(self) -> None:
        raise DataError("boundary failed")

    monkeypatch.setattr(GraphMemory, "end_round", broken)  # fails with any episode, or none: nobody's data
    with pytest.raises(DataError):
        svc.learn([episode([LOGIN], seed=1)], end_round=True)
    assert svc.stats().queued == 0 and svc.stats().events == 0


def test_an_episode_that_breaks_consolidation_is_found_quarantined_and_the_rest_learned(tmp_path, monkeypatch):
    from guimem.memory.graph import GraphMemory

    svc = service(tmp_path, method="graph")
    episodes = [episode([USER, PASS, LOGIN], seed=s) for s in range(1, 6)]
    bad = episodes[3].episode_id
    apply = GraphMemory._apply

    def fragile(self, t):
        if t.episode_id == bad:
            raise ValueError("cannot consolidate this one")
        return apply(self, t)

    monkeypatch.setattr(GraphMemory, "_apply", fragile)  # on the class: it survives the memory being reopened
    reply = svc.learn(episodes, end_round=True)
    stats = svc.stats()
    assert reply.quarantined == 1 and stats.quarantine[0].episode == bad
    assert "cannot consolidate" in stats.quarantine[0].reason and stats.committed_round_index == 0 and stats.queued == 0
    learned = svc.store.query(svc.queue.namespace, "episode", ["learned"])
    assert sorted(json.loads(r.body)["episode_id"] for r in learned) == sorted(
        t.episode_id for t in episodes if t.episode_id != bad)
    svc.close()
