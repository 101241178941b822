"""Train/test transfer: memory learned over one suite's rounds, then used on another suite.

``guimem eval --learn-suite A --suite B``: a lifelong run over A in ``OUT/learn`` (every method from an
empty store, ``none`` alongside), then a lifelong run over B in ``OUT`` whose memories start as a copy
of what each method had learned on A. The B run recalls with leave-one-task-out on, so nothing an
episode of B's own task taught is ever shown to it: every difference from ``none`` on B is transfer —
from A, or from B's other tasks. ``summary.json`` says so (``run.learned_on``,
``run.exclude_source_task``). Resumable like any run: a copy is made once, before B's first boundary.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from guimem.errors import ConfigError
from guimem.harness.evaluate import Evaluation, Progress
from guimem.harness.metrics import Summary
from guimem.harness.runfiles import EvalSpec, RunDir
from guimem.memory.keys import RoundClock
from guimem.settings import GuimemSettings
from guimem.storage.sqlite import SQLiteStore


def test_spec(learn: EvalSpec, test: EvalSpec) -> EvalSpec:
    """The B run's spec: learned on A's suite, leave-one-task-out on."""
    memory = test.memory.model_copy(update={"exclude_source_task": True})
    return test.model_copy(update={"memory": memory, "learned_on": learn.suite.name})


def seed_memories(learned: RunDir, target: RunDir, spec: EvalSpec) -> list[str]:
    """Copy each method's store from the learn run into the test run, once, its round clock restarted
    (the B run counts its own rounds from 1); returns the methods copied now."""
    copied = []
    for method in spec.methods:
        source, dest = learned.store_file(method), target.store_file(method)
        if method == "none" or dest.exists() or not source.exists():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = dest.with_name(dest.name + ".partial")
        partial.unlink(missing_ok=True)
        with sqlite3.connect(source) as src, sqlite3.connect(partial) as dst:
            src.backup(dst)  # a consistent copy, WAL included
        store = SQLiteStore(partial)
        try:
            RoundClock(store, spec.namespace(method)).restart()
        finally:
            store.close()
        partial.replace(dest)
        copied.append(method)
    return copied


@dataclass
class TrainTest:
    """A learn run over ``learn.suite`` in ``out/learn``, then a test run over ``test.suite`` in ``out``.

    Args:
        learn: The A run's spec.
        test: The B run's spec (made leave-one-task-out and marked as learned on A here).
        out: The test run's directory; the learn run is ``out/learn``.
        settings: Process settings.
        progress: Called after every finished episode of either run.
    """

    learn: EvalSpec
    test: EvalSpec
    out: Path
    settings: GuimemSettings
    progress: Progress | None = None

    def run(self) -> Summary | None:
        """Run (or resume) both; the B run's summary, or None when stopped early.

        Raises:
            ConfigError: A shared ``--store`` was given (train/test copies per-method SQLite stores).
            GuimemError: As `Evaluation.run`.
        """
        if self.learn.store or self.test.store:
            raise ConfigError("--learn-suite copies each method's SQLite store from the learn run",
                              suggestion="run it without --store")
        learned = Evaluation(self.learn, self.out / "learn", self.settings, progress=self.progress).run()
        if learned is None:
            return None
        spec = test_spec(self.learn, self.test)
        target = RunDir(self.out)
        target.start(spec)
        seed_memories(RunDir(self.out / "learn"), target, spec)
        return Evaluation(spec, self.out, self.settings, progress=self.progress).run()
