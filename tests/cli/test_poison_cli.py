"""``guimem eval --suite poison-form --defences ...``: the setting is in the run spec, the ASR is printed."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from guimem.cli.app import app

runner = CliRunner()


def test_eval_on_the_poison_suite_records_the_defences_and_prints_the_attack_success_rate(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    result = runner.invoke(app, ["eval", "--suite", "poison-form", "--rounds", "2", "--methods", "steer",
                                 "--defences", "no-quote,no-quarantine", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    spec = json.loads((tmp_path / "run_spec.json").read_text())
    assert spec["env"] == "poison-form" and spec["attacks"] == "heldout/r0"
    assert spec["memory"]["defences"] == {"quote": False, "quarantine": False, "untrusted_imports": True}
    assert "attack success rate" in result.output and "no-quote,no-quarantine" in result.output


def test_an_unknown_defence_setting_is_one_clear_error_before_any_run_folder(tmp_path):
    result = runner.invoke(app, ["eval", "--suite", "poison-form", "--defences", "no-screening",
                                 "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "no-screening" in result.output and "no-quarantine" in result.output
    assert not (tmp_path / "run").exists()
