"""The Memory contract: every shipped method passes `check_memory`, and so does one written here as a user would."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from guimem.cli.app import app
from guimem.memory.base import LearnReport, RecallQuery, RoundBuffer, RoundLog
from guimem.memory.factory import METHODS
from guimem.memory.kit import MemoryKit
from guimem.memory.settings import MemorySpec
from guimem.testing import check_memory
from guimem.types import InjectedItem, Injection, ItemKind, Trajectory

DATA = Path(__file__).parent.parent / "data"


class SucceededBefore:
    """A user's own method: remembers which tasks succeeded, and says so when the task comes back.

    Built by `open_memory` from its import path (``tests.memory.test_contract:SucceededBefore``), with
    the kit, the spec and an env factory, like the shipped methods.
    """

    def __init__(self, kit: MemoryKit, spec: MemorySpec, env_factory: object = None) -> None:
        self.kit = kit
        self.spec = spec
        self.rounds = RoundLog(kit.store, kit.namespace)
        self.buffer = RoundBuffer()
        self.solved = {m["task"] for m in (json.loads(e.payload) for e in kit.store.events(namespace=kit.namespace))}

    @property
    def name(self) -> str:
        return "succeeded_before"

    def recall(self, query: RecallQuery) -> Injection:
        if query.task.id not in self.solved or self.spec.exclude_source_task:
            return Injection(method=self.name)
        item = InjectedItem(id=f"solved-{query.task.id}", kind=ItemKind.EPISODE,
                            text=f"Task {query.task.id} was solved before: do the same again.")
        return self.kit.injection(self.name, "From earlier episodes:", [item])

    def learn(self, trajectory: Trajectory) -> LearnReport:
        return self.buffer.add(trajectory)

    def end_round(self) -> None:
        from guimem.storage.base import EventDraft

        for t in self.buffer.drain():
            if t.outcome.success and t.task.id not in self.solved:
                self.kit.store.append_event(EventDraft("solved", None, self.kit.namespace,
                                                       json.dumps({"task": t.task.id})))
                self.solved.add(t.task.id)

    def stats(self) -> dict[str, int]:
        return {"solved": len(self.solved)}

    def commit_round(self, round_index: int, trajectories: Sequence[Trajectory]) -> None:
        self.rounds.commit(self.learn, self.end_round, round_index, trajectories)

    def committed_round(self) -> int:
        return self.rounds.committed()

    def close(self) -> None:
        self.rounds.close()


class Careless(SucceededBefore):
    """Breaks the contract: learns at once (no round snapshot) and cannot be closed twice."""

    def learn(self, trajectory: Trajectory) -> LearnReport:
        self.buffer.add(trajectory)
        self.end_round()
        return LearnReport(added=1)

    def close(self) -> None:
        self.kit.store.close()
        self.kit.store = None  # type: ignore[assignment]


@pytest.mark.parametrize("method", METHODS)
def test_every_shipped_method_keeps_the_memory_contract(method, tmp_path):
    assert check_memory(method, tmp_path) == []


def test_a_method_written_by_a_user_keeps_the_contract(tmp_path):
    assert check_memory("tests.memory.test_contract:SucceededBefore", tmp_path) == []


def test_the_checker_catches_a_method_that_breaks_the_contract(tmp_path):
    problems = check_memory("tests.memory.test_contract:Careless", tmp_path)
    assert any("recalled before the round boundary" in p for p in problems)
    assert any("second close() raised" in p for p in problems)


def test_a_users_method_runs_through_guimem_eval_by_its_import_path_and_learns(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    method = "tests.memory.test_contract:SucceededBefore"
    result = CliRunner().invoke(app, ["eval", "--env", "form", "--suite", str(DATA / "form_suite.json"), "--rounds",
                                      "2", "--methods", method, "--out", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)["methods"][method]
    assert summary["rounds"][0]["memory"]["solved"] >= 1
    assert summary["rounds"][0]["injected_tokens"] == 0 and summary["rounds"][1]["injected_tokens"] > 0


def test_an_unknown_method_name_says_did_you_mean(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    result = CliRunner().invoke(app, ["eval", "--env", "form", "--suite", str(DATA / "form_suite.json"),
                                      "--methods", "stak", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "did you mean 'stack'" in result.output
