"""A golden run: the smoke suite, 2 rounds, every method, real MiniWoB++ in headless Chromium.

Pinned before the memory redesign so that refactors which must keep behaviour identical are
checked against measured results, not against expectations. Regenerate only on purpose:
``GUIMEM_UPDATE_GOLDEN=1 pytest tests/harness/test_golden.py``, and say why in the commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from guimem.harness.evaluate import Evaluation
from guimem.harness.runfiles import EvalSpec
from guimem.memory.factory import METHODS
from guimem.settings import GuimemSettings
from guimem.tasks import load_suite

pytestmark = [pytest.mark.browser, pytest.mark.slow]
GOLDEN = Path(__file__).parent.parent / "data" / "golden_smoke_2rounds.json"


def _pinned(summary: dict) -> dict:
    return {m: {"pass_at_k": s["pass_at_k"], "injected_tokens_total": s["injected_tokens_total"],
                "steps_total": s["steps_total"], "success_by_round": [r["success_rate"] for r in s["rounds"]]}
            for m, s in summary["methods"].items()}


def test_smoke_two_rounds_every_method_matches_the_golden_summary(tmp_path):
    spec = EvalSpec(env="miniwob", suite=load_suite("smoke"), rounds=2, methods=list(METHODS))
    summary = Evaluation(spec, tmp_path, GuimemSettings()).run()
    assert summary is not None
    got = _pinned(json.loads(summary.model_dump_json()))
    if os.environ.get("GUIMEM_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(GOLDEN.read_text())
