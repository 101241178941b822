from __future__ import annotations

import pytest

from guimem.service.http import create_app
from guimem.testing.server import live_http
from guimem.types import write_trajectories
from tests.memory.conftest import LOGIN, PASS, USER, episode
from tests.service.test_core import request, service

KEY = "s3cret-key"


@pytest.fixture
def data_dir(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture(params=["sqlite", "postgres"])
def svc(request, tmp_path, data_dir):
    """The same API tests run on a SQLite store and on a real PostgreSQL store."""
    store = "m.sqlite" if request.param == "sqlite" else request.getfixturevalue("pg_dsn")
    s = service(tmp_path, store=store, data_dir=data_dir)
    yield s
    s.close()


@pytest.fixture
def http(svc):
    with live_http(create_app(svc, api_key=KEY, max_body_bytes=200_000)) as url:
        yield url


@pytest.fixture
def trajectories_json():
    return [episode([USER, PASS, LOGIN], seed=1).model_dump(mode="json"),
            episode([LOGIN], seed=2).model_dump(mode="json")]


__all__ = ["KEY", "request", "write_trajectories"]
