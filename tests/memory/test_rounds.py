"""The one round boundary (`commit_round`): what it cannot learn it refuses or names, and it never half-commits."""

from __future__ import annotations

import pytest

from guimem.errors import EpisodeRefusedError
from guimem.memory.graph import GraphMemory
from guimem.memory.settings import GraphSettings
from tests.memory.conftest import LOGIN, PASS, USER, episode


def test_commit_round_refuses_an_episode_that_does_not_survive_its_json_form_and_learns_the_rest(kit):
    g = GraphMemory(kit, GraphSettings(tau=0.95))
    good = episode([USER, PASS, LOGIN], seed=1)
    infinite = good.model_construct(**{**dict(good), "episode_id": "inf", "wall_ms": float("inf")})
    report = g.commit_round(0, [infinite, good])
    assert [(r.index, r.episode_id) for r in report.refused] == [(0, "inf")]
    assert "wall_ms" in report.refused[0].reason
    assert report.learned.queued == 1 and g.committed_round() == 0 and g.edge_count >= 1


def test_a_learn_that_fails_on_its_data_rolls_the_round_back_and_names_the_episode(kit, monkeypatch):
    g = GraphMemory(kit, GraphSettings(tau=0.95))
    first, bad = episode([USER, PASS, LOGIN], seed=1), episode([LOGIN], seed=2)
    monkeypatch.setattr(g, "learn", lambda t: (_ for _ in ()).throw(ValueError("bad")) if t is bad
                        else g.buffer.add(t))
    with pytest.raises(EpisodeRefusedError) as info:
        g.commit_round(0, [first, bad])
    assert info.value.index == 1 and info.value.episode_id == bad.episode_id
    assert g.committed_round() == -1 and kit.store.stats("test").by_kind_status == {}
