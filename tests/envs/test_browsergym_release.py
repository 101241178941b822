"""After the last BrowserGym env of a process closes, BrowserGym's Playwright is stopped: its event loop
otherwise stays registered as running in the thread and `asyncio.run` fails there (seen: the MCP tests
after the BrowserGym tests, in one pytest process). Runs after tests/envs/test_browsergym.py."""

from __future__ import annotations

import asyncio

import pytest

from guimem.envs.browsergym import BrowserGymEnv
from guimem.types import Task

pytestmark = pytest.mark.browser


def test_asyncio_runs_again_once_the_last_browsergym_env_closed() -> None:
    first, second = BrowserGymEnv(), BrowserGymEnv()
    first.reset(Task(id="click-test-2", goal="", app="x", seed=1))
    second.reset(Task(id="click-test-2", goal="", app="x", seed=2))
    first.close()
    second.reset(Task(id="click-button", goal="", app="x", seed=2)), "the other env still works"
    second.close()
    second.close()
    assert asyncio.run(asyncio.sleep(0, result="ran")) == "ran"
