"""Helpers for memory tests: a kit on a temp SQLite file and scripted FormEnv episodes."""

from __future__ import annotations

import re

import pytest

from guimem.agents.base import Decision
from guimem.embeddings import CachedEmbedder
from guimem.embeddings.hashing import HashingEmbedder
from guimem.harness.episode import run_episode
from guimem.memory.kit import MemoryKit
from guimem.storage.sqlite import SQLiteStore
from guimem.testing import FormEnv
from guimem.tokens import WhitespaceCounter
from guimem.types import Action, ActionKind, Role, Selector, Task, Trajectory


class ScriptPolicy:
    """Performs a fixed list of (kind, selector kwargs, param-or-None) steps."""

    name = "script"

    def __init__(self, steps):
        self.steps = list(steps)
        self.i = 0

    def reset(self, task):
        self.i = 0
        self.task = task

    def act(self, inp):
        if self.i >= len(self.steps):
            return Decision(action=Action(kind=ActionKind.WAIT))
        kind, sel, param = self.steps[self.i]
        self.i += 1
        el = Selector(**sel).resolve(inp.observation).element
        text = inp.task.params.get(param, param) if param is not None else None
        return Decision(action=Action(kind=kind, ref=el.ref, text=text))


USER = (ActionKind.TYPE, {"role": Role.TEXTBOX, "label": "username"}, "username")
PASS = (ActionKind.TYPE, {"role": Role.TEXTBOX, "label": "password"}, "password")
LOGIN = (ActionKind.TAP, {"role": Role.BUTTON, "text": "Login"}, None)
CANCEL = (ActionKind.TAP, {"role": Role.BUTTON, "text": "Cancel"}, None)


def steps_seen(trajectories) -> list[str]:
    """Every step's action and injection, the items' random ids renamed in order of first appearance: what two runs
    that must recall the same are compared by."""
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"id{len(names)}")

    return [re.sub(r"\b[a-z]{1,3}-[0-9a-f]{12,}\b", rename,
                   s.action.describe() + "\n" + s.injection.model_dump_json(exclude={"latency_ms"}))
            for t in trajectories for s in t.steps]


def episode(steps, seed=1, env=None, memory=None, task_id="form", round_index=0, slot=0) -> Trajectory:
    env = env or FormEnv()
    return run_episode(env, ScriptPolicy(steps), Task(id=task_id, goal="", app="form", seed=seed, max_steps=6),
                       memory=memory, round_index=round_index, slot=slot)


@pytest.fixture
def kit(tmp_path):
    store = SQLiteStore(tmp_path / "m.sqlite")
    k = MemoryKit(store=store, embedder=CachedEmbedder(HashingEmbedder(128)), counter=WhitespaceCounter(),
                  namespace="test")
    yield k
    store.close()
