"""The shipped ``unseen`` suite is exactly what its rule draws from the installed MiniWoB++ tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guimem.tasks import load_suite
from guimem.tasks.unseen import draw

SHIPPED = Path(__file__).parents[2] / "src" / "guimem" / "tasks" / "suites" / "unseen.json"


def test_the_shipped_unseen_suite_follows_its_rule():
    miniwob = pytest.importorskip("guimem.envs.miniwob")
    assert json.loads(SHIPPED.read_text()) == draw(miniwob.available_tasks())


def test_unseen_shares_no_task_with_the_suites_used_for_tuning():
    unseen = {e.task for e in load_suite("unseen").tasks}
    tuned = {e.task for name in ("demo", "default", "smoke") for e in load_suite(name).tasks}
    assert len(unseen) == 16 and not unseen & tuned
    assert [e.seed for e in load_suite("unseen").tasks] == list(range(9001, 9017))
