"""Shared fixtures: observations and tasks that look like MiniWoB screens."""

from __future__ import annotations

import os
import signal

import pytest

from guimem.processes import owned_tempdir, stop_descendants, sweep_orphans
from guimem.types import Bounds, Observation, Role, Task, UIElement

# Index caches of the memories tests open go to a folder of this test session, not ~/.cache/guimem
# (subprocesses the tests start inherit it); the folders of test sessions that have ended are swept.
if "GUIMEM_CACHE_DIR" not in os.environ:
    sweep_orphans("guimem-test-cache-")
    os.environ["GUIMEM_CACHE_DIR"] = owned_tempdir("guimem-test-cache-")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    # SIGTERM ends the run the way Ctrl-C does: fixtures are torn down, so browsers and servers quit
    signal.signal(signal.SIGTERM, _interrupt)


def pytest_unconfigure(config: pytest.Config) -> None:
    # whatever a test or fixture started and did not stop (a browser half-started when the signal came)
    stop_descendants(grace_s=3.0)


def login_screen(username_value: str = "", distractor: str = "") -> Observation:
    """A login form like MiniWoB's login-user."""
    elements = [
        UIElement(ref="1", role=Role.TEXT, text="Username"),
        UIElement(ref="2", role=Role.TEXTBOX, label="Username", resource_id="username", editable=True,
                  clickable=True, value=username_value, bounds=Bounds(x=10, y=10, w=100, h=20)),
        UIElement(ref="3", role=Role.TEXT, text="Password"),
        UIElement(ref="4", role=Role.TEXTBOX, label="Password", resource_id="password", editable=True,
                  clickable=True, bounds=Bounds(x=10, y=40, w=100, h=20)),
        UIElement(ref="5", role=Role.BUTTON, text="Login", resource_id="subbtn", clickable=True),
    ]
    if distractor:
        elements.append(UIElement(ref="6", role=Role.TEXT, text=distractor))
    return Observation(app="miniwob", location="#form", elements=tuple(elements))


@pytest.fixture
def login_obs() -> Observation:
    return login_screen()


@pytest.fixture
def login_task() -> Task:
    return Task(id="login-user", goal="Enter the username \"alice\" and the password \"xyz\" into the text fields "
                "and press login.", app="miniwob", params={"username": "alice", "password": "xyz"}, seed=3)


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL server on loopback for the whole test session."""
    from guimem.testing.postgres import temporary_postgres

    with temporary_postgres() as dsn:
        yield dsn


@pytest.fixture
def pg_dsn(pg_server):
    """A fresh database per test on the shared server."""
    import uuid

    import psycopg

    name = "t" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return pg_server.rsplit("/", 1)[0] + "/" + name
