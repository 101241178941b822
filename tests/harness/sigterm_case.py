"""Not collected by the suite (no ``test_`` prefix): the pytest run that `test_processes.py` stops with SIGTERM.

A module-scoped browser fixture, as the suite's env tests have, and a test that waits to be stopped.
"""

from __future__ import annotations

import time

import pytest

from guimem.envs.browser import launch_chrome
from guimem.settings import BrowserSettings


@pytest.fixture(scope="module")
def browser():
    b = launch_chrome(BrowserSettings())
    yield b
    b.close()


def test_waits_to_be_stopped(browser):
    print("browser up", flush=True)
    time.sleep(120)
