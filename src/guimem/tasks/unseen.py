"""The ``unseen`` suite, drawn by a rule rather than chosen: for final figures on tasks nobody tuned on.

Rule: the MiniWoB++ task names the installed package ships, sorted, minus every task of the ``demo``
and ``default`` suites; ``random.Random(20261130).sample(names, 16)``; seeds 9001–9016 in that order;
``max_steps`` 8 for every entry (the median budget of the ``default`` suite; no per-task budget, since
choosing one would mean looking at the tasks). ``python -m guimem.tasks.unseen`` writes the suite file;
a test checks the shipped file still follows the rule.
"""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

from guimem.tasks.suites import load_suite

SEED = 20261130
SIZE = 16
FIRST_SEED = 9001


def draw(available: list[str]) -> dict[str, object]:
    """The suite the rule gives for the installed task names ``available``."""
    known = {e.task for name in ("demo", "default") for e in load_suite(name).tasks}
    names = sorted(set(available) - known)
    picked = random.Random(SEED).sample(names, SIZE)
    budget = int(statistics.median(e.max_steps or 15 for e in load_suite("default").tasks))
    return {"name": "unseen", "env": "miniwob",
            "description": f"{SIZE} MiniWoB++ tasks drawn by rule (random.Random({SEED}).sample of the tasks in "
                           "neither demo nor default), one seed each; for final figures only, never for tuning.",
            "tasks": [{"task": t, "seed": FIRST_SEED + i, "max_steps": budget} for i, t in enumerate(picked)]}


if __name__ == "__main__":  # pragma: no cover - writes the shipped file
    from guimem.envs.miniwob import available_tasks

    path = Path(__file__).parent / "suites" / "unseen.json"
    path.write_text(json.dumps(draw(available_tasks()), indent=1) + "\n")
    print(path)
