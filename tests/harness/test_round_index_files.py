"""results.jsonl and summary.json name a round by its 0-based index, ``round_index`` (format version 2); a run
folder written before (``round``, version 1) still reads and resumes."""

from __future__ import annotations

import json

from guimem.harness.evaluate import Evaluation
from guimem.harness.metrics import RoundStats
from guimem.harness.runfiles import EpisodeResult, RunDir
from tests.harness.test_evaluate import settings, spec, strip_timing

V1_LINE = {"method": "graph", "round": 1, "task": "form", "seed": 3, "success": True, "score": 1.0, "steps": 3,
           "injected_tokens": 10, "recall_ms_p50": 0.4}


def _as_version_1(line: str) -> str:
    """A results line as guimem wrote it before format version 2."""
    raw = json.loads(line)
    raw["round"] = raw.pop("round_index")
    raw.pop("version")
    return json.dumps(raw)


def test_results_and_summary_name_the_round_index_and_their_version(tmp_path):
    summary = Evaluation(spec(rounds=2, methods=["graph"]), tmp_path, settings()).run()
    assert summary is not None
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert {(x["version"], x["round_index"]) for x in lines} == {(2, 0), (2, 1)}
    assert not any("round" in x for x in lines)
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["version"] == 2
    assert [r["round_index"] for r in written["methods"]["graph"]["rounds"]] == [0, 1]
    assert not any("round" in r for r in written["methods"]["graph"]["rounds"])


def test_a_version_1_results_line_and_summary_round_still_read():
    old = EpisodeResult.model_validate_json(json.dumps(V1_LINE))
    assert old.round == 1 and old.version == 2
    assert EpisodeResult.model_validate_json(old.model_dump_json()) == old
    stats = RoundStats.model_validate({"round": 1, "success_rate": 0.5, "episodes": 4, "injected_tokens": 0,
                                       "injected_tokens_per_step": 0.0, "recall_ms_p50": 0.1, "recall_ms_p95": 0.2})
    assert stats.round == 1 and json.loads(stats.model_dump_json())["round_index"] == 1


def test_a_run_folder_of_format_version_1_resumes(tmp_path):
    methods = ["graph", "steer"]
    full = Evaluation(spec(methods=methods), tmp_path / "full", settings()).run()
    assert Evaluation(spec(methods=methods), tmp_path / "run", settings(), stop_after=10).run() is None
    run = RunDir(tmp_path / "run")
    lines = run.results_file.read_text().splitlines()
    run.results_file.write_text("\n".join(_as_version_1(x) for x in lines) + "\n")
    resumed = Evaluation(spec(methods=methods), tmp_path / "run", settings()).run()
    assert resumed is not None
    assert strip_timing(resumed.model_dump()["methods"]) == strip_timing(full.model_dump()["methods"])
    after = [json.loads(x) for x in run.results_file.read_text().splitlines()]
    assert len(after) > len(lines)  # the old lines are kept as they were, the resumed ones are version 2
    assert all("round" in x for x in after[:len(lines)]) and all("round_index" in x for x in after[len(lines):])


def test_a_run_made_before_the_coupled_explorer_draw_does_not_resume_with_it(tmp_path):
    """A run_spec.json without ``policy_draw`` was written by the independent draw; resuming it would mix the
    two draws in one run's memory figures, so it is refused, and the message names the field."""
    import pytest

    from guimem.errors import ConfigError

    assert Evaluation(spec(methods=["graph"]), tmp_path, settings(), stop_after=4).run() is None
    run = RunDir(tmp_path)
    raw = json.loads(run.spec_file.read_text())
    assert raw.pop("policy_draw") == "coupled"
    run.spec_file.write_text(json.dumps(raw))
    assert run.load_spec().policy_draw == "independent"
    with pytest.raises(ConfigError, match="differs in: policy_draw"):
        Evaluation(spec(methods=["graph"]), tmp_path, settings()).run()
