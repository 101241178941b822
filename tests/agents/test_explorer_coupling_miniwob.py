"""Issue #33's regression on real MiniWoB++: `email-inbox-forward-nl` seed 7008, which the explorer solves
alone in every round. With skills it failed rounds 2-5: the skills recalled there are right (they tap the
sender `none` taps), but an extra candidate shifted the shared random number onto the wrong sender, and a
skill run of four actions in one step shifted every later draw. The coupled draw (agents/explorer.py) keeps
a memory run on the memoryless run's choices except where memory says otherwise."""

from __future__ import annotations

import pytest

from guimem.harness.evaluate import Evaluation
from guimem.harness.runfiles import EvalSpec
from guimem.settings import GuimemSettings
from guimem.tasks.suites import Suite, SuiteEntry

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_skills_do_not_turn_forward_nl_7008_into_a_failure(tmp_path):
    suite = Suite(name="fwd7008", tasks=(SuiteEntry(task="email-inbox-forward-nl", seed=7008, max_steps=12),))
    spec = EvalSpec(env="miniwob", suite=suite, rounds=3, methods=["none", "skills"])
    summary = Evaluation(spec, tmp_path, GuimemSettings()).run()
    assert summary is not None
    none, skills = summary.methods["none"], summary.methods["skills"]
    assert [r.success_rate for r in none.rounds] == [1.0, 1.0, 1.0], "the explorer alone must solve it"
    assert skills.skill_runs > 0, "no skill was run: the case shows nothing"
    assert skills.harm == [] and [r.success_rate for r in skills.rounds] == [1.0, 1.0, 1.0]
