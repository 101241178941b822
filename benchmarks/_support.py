"""Shared by the benchmarks: the processor's name, and a service's memory filled with admitted knowledge
learned from scripted form episodes."""

from __future__ import annotations

import platform
from pathlib import Path

from guimem.agents.base import Decision
from guimem.harness.episode import run_episode
from guimem.service.core import MemoryService
from guimem.testing import FormEnv
from guimem.types import Action, ActionKind, Role, Selector, Task


def cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo``), else the platform's."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class _Fill:
    name = "fill"

    def reset(self, task: Task) -> None:
        self.i = 0

    def act(self, inp):  # type: ignore[no-untyped-def]
        fields = [e for e in inp.observation.elements if e.editable]
        self.i += 1
        if self.i <= len(fields):
            el = fields[self.i - 1]
            return Decision(action=Action(kind=ActionKind.TYPE, ref=el.ref, text=inp.task.params[el.resource_id]))
        button = Selector(role=Role.BUTTON, text="Login").resolve(inp.observation).element
        return Decision(action=Action(kind=ActionKind.TAP, ref=button.ref))


def seed_memory(svc: MemoryService) -> None:
    """Learn from 4 episodes, then admit every item in trial by hand so recall injects them."""
    trajs = [run_episode(FormEnv(), _Fill(), Task(id="form", goal="", app="form", seed=s, max_steps=5))
             for s in range(4)]
    svc.learn(trajs)
    svc.end_round()
    for item in svc.list_items():
        if item.status == "candidate":
            svc.set_status(item.id, "trial", "benchmark")
        svc.set_status(item.id, "admitted", "benchmark")
