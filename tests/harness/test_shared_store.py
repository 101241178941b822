"""An evaluation whose memories live in one shared PostgreSQL store (a namespace per run and method)."""

from __future__ import annotations

import json

import pytest

from guimem.harness.evaluate import Evaluation
from guimem.harness.runfiles import RunDir
from guimem.storage import create_store
from tests.harness.test_evaluate import settings, spec, strip_timing

pytest.importorskip("psycopg", reason="the postgres extra is installed by make setup")
METHODS = ["graph", "skills", "steer", "stack"]


def shared(dsn: str, rounds: int = 3, workers: int = 1):
    return spec(rounds=rounds, methods=METHODS, workers=workers).model_copy(update={"store": "postgresql://pg"}), dsn


@pytest.mark.slow
def test_a_postgresql_store_gives_the_same_results_as_sqlite_files(tmp_path, pg_dsn):
    files = Evaluation(spec(methods=METHODS), tmp_path / "sqlite", settings()).run()
    run_spec, dsn = shared(pg_dsn)
    pg = Evaluation(run_spec, tmp_path / "pg", settings(), store_url=dsn).run()
    assert strip_timing(files.model_dump()["methods"]) == strip_timing(pg.model_dump()["methods"])
    assert not (tmp_path / "pg" / "memory").exists(), "no SQLite file may stand in for the shared store"
    store = create_store(dsn)
    run_id = RunDir(tmp_path / "pg").load_spec().run_id
    assert {f"run-{run_id}/{m}" for m in METHODS} <= set(store.namespaces())
    store.close()
    html = (tmp_path / "pg" / "report.html").read_text()
    assert "What memory learned" in html  # the report reads the shared store too


def test_two_runs_share_a_store_without_seeing_each_other(tmp_path, pg_dsn):
    first = Evaluation(*_args(tmp_path / "a", pg_dsn, rounds=2)).run()
    second = Evaluation(*_args(tmp_path / "b", pg_dsn, rounds=2)).run()
    assert strip_timing(first.model_dump()["methods"]) == strip_timing(second.model_dump()["methods"])
    ids = {RunDir(tmp_path / d).load_spec().run_id for d in ("a", "b")}
    assert len(ids) == 2


def _args(out, dsn, rounds=3, stop_after=None):
    run_spec = spec(rounds=rounds, methods=["steer", "stack"]).model_copy(update={"store": "postgresql://pg"})
    return run_spec, out, settings(), None, stop_after, dsn


def test_a_run_on_postgresql_resumes_without_repeating_or_losing_episodes(tmp_path, pg_dsn):
    whole = Evaluation(*_args(tmp_path / "whole", pg_dsn)).run()
    assert Evaluation(*_args(tmp_path / "cut", pg_dsn, stop_after=13)).run() is None
    resumed = Evaluation(*_args(tmp_path / "cut", pg_dsn)).run()
    assert strip_timing(whole.model_dump()["methods"]) == strip_timing(resumed.model_dump()["methods"])
    keys = [r.key for r in RunDir(tmp_path / "cut").results()]
    assert len(keys) == len(set(keys)) == 4 * 3 * 2


def test_resuming_a_shared_store_run_without_its_store_says_what_to_give(tmp_path, pg_dsn):
    assert Evaluation(*_args(tmp_path / "run", pg_dsn, stop_after=3)).run() is None
    run_spec, out, st, *_ = _args(tmp_path / "run", pg_dsn)
    from guimem.errors import ConfigError

    with pytest.raises(ConfigError, match="keeps its memory in postgresql://pg"):
        Evaluation(run_spec, out, st).run()


def test_the_cli_masks_the_password_in_the_run_spec(tmp_path, pg_dsn, monkeypatch):
    from typer.testing import CliRunner

    from guimem.cli.app import app
    from tests.harness.test_evaluate import DATA

    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    with_password = pg_dsn.replace("guimem@", "guimem:s3cret@")  # trust auth: the password is not checked
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["eval", "--env", "form", "--suite", str(DATA / "form_suite.json"), "--rounds",
                                      "1", "--methods", "steer", "--store", with_password, "--out", str(out),
                                      "--json"])
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "run_spec.json").read_text())
    assert saved["store"].startswith("postgresql://guimem:***@") and "s3cret" not in (out / "run_spec.json").read_text()
    assert "s3cret" not in (out / "report.html").read_text()


def test_address_needs_ray_and_a_shared_store(tmp_path):
    from typer.testing import CliRunner

    from guimem.cli.app import app

    base = ["eval", "--suite", "smoke", "--out", str(tmp_path / "r"), "--address", "127.0.0.1:6379"]
    res = CliRunner().invoke(app, base)
    assert res.exit_code != 0 and "--backend ray" in res.output
    res = CliRunner().invoke(app, [*base, "--backend", "ray"])
    assert res.exit_code != 0 and "--store postgresql://" in res.output
