"""`guimem.integrations.browsergym`: memory in a user's own BrowserGym loop (recorded observations, no browser)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from guimem.envs.bgym_obs import parse_observation
from guimem.errors import ConfigError
from guimem.integrations.browsergym import BrowserGymMemory, MemoryAgent, parse_action
from guimem.settings import EmbedderSettings, GuimemSettings
from guimem.types import ActionKind, ItemKind

OBS: dict[str, Any] = json.loads((Path(__file__).parents[1] / "data" / "bgym_observations.json").read_text())
SETTINGS = GuimemSettings(embedder=EmbedderSettings(name="hashing"))


def _refs(obs: dict[str, Any]) -> dict[str, str]:
    parsed = parse_observation(obs, app="miniwob").observation
    return {e.resource_id or e.text: e.ref for e in parsed.elements}


def test_action_strings_are_read_as_literals_never_run() -> None:
    parsed = parse_observation(OBS["login-user"], app="miniwob")
    refs = _refs(OBS["login-user"])
    fill = parse_action(f"fill({refs['username']!r}, 'cristin')", parsed)
    assert fill.kind is ActionKind.TYPE and fill.text == "cristin" and fill.selector is not None
    assert fill.selector.resource_id == "username"
    assert parse_action("keyboard_press('Enter')", parsed).key == "enter"
    evil = parse_action("__import__('os').system('touch /tmp/pwned')", parsed)
    assert evil.kind is ActionKind.WAIT and "unparsed" in (evil.description or "")
    assert parse_action("click(" * 5000, parsed).kind is ActionKind.WAIT
    assert parse_action("scroll(0, -200)", parsed).direction == "up"


def test_select_option_is_recorded_as_a_tap_on_the_option() -> None:
    parsed = parse_observation(OBS["choose-list"], app="miniwob")
    combo = next(e for e in parsed.observation.elements if e.role.value == "combobox")
    option = next(e for e in parsed.observation.elements if e.role.value == "option" and e.text == "Nicaragua")
    action = parse_action(f"select_option({combo.ref!r}, 'Nicaragua')", parsed)
    assert action.ref == option.ref and action.selector is not None and action.selector.text == "Nicaragua"


def _episode(memory: BrowserGymMemory, obs: dict[str, Any], seed: int, success: bool) -> str:
    memory.start("browsergym/miniwob.login-user", obs, seed)
    hint = memory.recall(obs)
    refs = _refs(obs)
    memory.record(f"fill({refs['username']!r}, 'cristin')")
    memory.recall(obs)
    memory.record(f"fill({refs['password']!r}, 'qP')")
    memory.recall(obs)
    memory.record(f"click({refs['subbtn']!r})")
    memory.finish(1.0 if success else 0.0, obs)
    return hint.text


def test_a_plain_loop_learns_and_later_recalls(tmp_path: Path) -> None:
    with BrowserGymMemory.open("graph", str(tmp_path / "m.sqlite"), SETTINGS) as memory:
        assert _episode(memory, OBS["login-user"], 1, success=True) == ""
        memory.end_round()
        memory.start("miniwob.login-user", OBS["login-user"], 2)
        hint = memory.recall(OBS["login-user"])
        assert hint.items and all(item.kind is ItemKind.EDGE for item in hint.items)
        assert "username" in hint.text
        assert memory.task.id == "login-user"  # one task for memory, whatever prefix the loop uses


def test_the_memory_is_shared_with_guimems_own_envs(tmp_path: Path) -> None:
    """What the loop learned is stored under the normalised task id and the shared screen vocabulary."""
    with BrowserGymMemory.open("stack", str(tmp_path / "m.sqlite"), SETTINGS) as memory:
        _episode(memory, OBS["login-user"], 1, success=True)
        memory.end_round()
        stats = memory.memory.stats()
    assert sum(stats.values()) > 0


def test_calls_out_of_order_say_what_to_do(tmp_path: Path) -> None:
    with BrowserGymMemory.open("none", str(tmp_path / "m.sqlite"), SETTINGS) as memory:
        with pytest.raises(ConfigError, match="start"):
            memory.recall(OBS["login-user"])
        memory.start("click-test-2", OBS["login-user"])
        with pytest.raises(ConfigError, match="recall"):
            memory.record("click('1')")


class _AgentLabStyle:
    """What AgentLab's agents look like: obs_preprocessor + get_action -> (action, info)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def obs_preprocessor(self, obs: dict[str, Any]) -> dict[str, Any]:
        return {**obs, "pre": True}

    def get_action(self, obs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.seen.append(obs["guimem_memory"])
        assert obs["pre"]
        return f"click({_refs(obs)['subbtn']!r})", {"think": "submit"}


def test_an_agentlab_style_agent_sees_memory_and_is_learned_from(tmp_path: Path) -> None:
    inner = _AgentLabStyle()
    with BrowserGymMemory.open("graph", str(tmp_path / "m.sqlite"), SETTINGS) as memory:
        agent = MemoryAgent(inner, memory)
        for seed in (1, 2):
            obs = copy.deepcopy(OBS["login-user"])
            agent.start("miniwob.login-user", obs, seed)
            action, info = agent.get_action(agent.obs_preprocessor(obs))
            assert action.startswith("click(") and info == {"think": "submit"}
            agent.finish(0.0, obs)
            memory.end_round()
    assert inner.seen[0] == "" and "FAILED" in inner.seen[1].upper()


@pytest.mark.parametrize("method", ["graph", "stack", "none"])
def test_a_reopened_memory_goes_on_from_the_round_after_the_last_it_ended(tmp_path: Path, method: str) -> None:
    store = str(tmp_path / "m.sqlite")
    with BrowserGymMemory.open(method, store, SETTINGS) as memory:
        for seed in (1, 2):
            _episode(memory, OBS["login-user"], seed, success=True)
            memory.end_round()
        assert memory.rounds.round == 2
    with BrowserGymMemory.open(method, store, SETTINGS) as memory:
        assert memory.rounds.round == 2, "before: every reopened memory started again at round 0"
        assert memory.memory.committed_round() == 1
