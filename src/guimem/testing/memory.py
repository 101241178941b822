"""`check_memory`: the `Memory` contract as a checker (like `check_env`), for shipped methods and yours.

It opens the method by name through `guimem.memory.factory.open_memory` (a registered name or your
``my_pkg.memory:MyMemory``), feeds it scripted `FormEnv` episodes (successes and a failure) and
checks what the contract in `guimem.memory.base` promises:

- an empty memory injects nothing;
- what is learned in a round is not recalled before the round boundary (one snapshot per round);
- ``commit_round`` marks the round, and what was committed survives ``close`` and reopening;
- ``close`` can be called twice;
- with ``exclude_source_task``, nothing learned from a task is recalled for that task;
- every injection fits the token budget and says how many tokens it holds.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from guimem.agents.base import Decision, PolicyInput
from guimem.harness.episode import run_episode
from guimem.memory.base import Memory, RecallQuery
from guimem.memory.factory import open_memory
from guimem.memory.settings import MemorySpec
from guimem.settings import GuimemSettings
from guimem.testing.envs import FormEnv
from guimem.tokens import TiktokenCounter
from guimem.types import Action, ActionKind, Injection, Role, Selector, Task, Trajectory

Step = tuple[ActionKind, dict[str, object], str | None]
USER: Step = (ActionKind.TYPE, {"role": Role.TEXTBOX, "label": "username"}, "username")
PASSWORD: Step = (ActionKind.TYPE, {"role": Role.TEXTBOX, "label": "password"}, "password")
LOGIN: Step = (ActionKind.TAP, {"role": Role.BUTTON, "text": "Login"}, None)
CANCEL: Step = (ActionKind.TAP, {"role": Role.BUTTON, "text": "Cancel"}, None)


class ScriptedPolicy:
    """Performs a fixed list of ``(kind, selector fields, param name or None)`` steps, then waits."""

    name = "scripted"

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.i = 0

    def reset(self, task: Task) -> None:
        """Start the script again."""
        self.i = 0

    def act(self, inp: PolicyInput) -> Decision:
        """The next scripted action, aimed at the element the selector finds on this screen."""
        if self.i >= len(self.steps):
            return Decision(action=Action(kind=ActionKind.WAIT))
        kind, fields, param = self.steps[self.i]
        self.i += 1
        found = Selector.model_validate(fields).resolve(inp.observation).element
        text = inp.task.params.get(param, param) if param is not None else None
        return Decision(action=Action(kind=kind, ref=found.ref if found else None, text=text))


def form_episode(steps: list[Step], seed: int = 1, task_id: str = "form") -> Trajectory:
    """One scripted episode of the `FormEnv` login form."""
    return run_episode(FormEnv(), ScriptedPolicy(steps), Task(id=task_id, goal="", app="form", seed=seed,
                                                               max_steps=6))


def form_episodes(task_id: str = "form") -> list[Trajectory]:
    """Two successful logins and two failures (cancel; submit with empty fields)."""
    return [form_episode([USER, PASSWORD, LOGIN], 1, task_id), form_episode([CANCEL], 2, task_id),
            form_episode([USER, PASSWORD, LOGIN], 3, task_id), form_episode([LOGIN], 4, task_id)]


def _query(task_id: str = "form", seed: int = 7, slot: int = 0) -> RecallQuery:
    env = FormEnv()
    obs = env.reset(Task(id=task_id, goal="", app="form", seed=seed))
    return RecallQuery(task=env.task, observation=obs, slot=slot)


def _seen(inj: Injection) -> tuple[tuple[str, ...], str]:
    return (tuple(inj.ids), inj.text)


def _budget_problems(inj: Injection, spec: MemorySpec, counter: TiktokenCounter, where: str) -> list[str]:
    out = []
    if inj.tokens > spec.token_budget:
        out.append(f"{where}: the injection holds {inj.tokens} tokens, over the budget of {spec.token_budget}")
    if inj.text and inj.tokens == 0:
        out.append(f"{where}: the injection has text but says it holds 0 tokens")
    if not inj.text and inj.items:
        out.append(f"{where}: the injection lists items but shows no text")
    return out


def check_memory(method: str, workdir: Path, settings: GuimemSettings | None = None,
                 spec: MemorySpec | None = None) -> list[str]:
    """Check the memory ``method`` against the `Memory` contract; the problems found (empty: it passes).

    Args:
        method: A registered method name or ``module:Callable``.
        workdir: A folder for the checker's stores: each check makes new ones in a new subfolder, so a
            folder used before (or by another check) never hands an earlier memory to this one.
        settings: Process settings (default: the hashing embedder, no model needed).
        spec: Method options (``exclude_source_task`` is switched on for its own check).
    """
    if settings is None:
        settings = GuimemSettings()
        settings.embedder.name = "hashing"
    spec = spec or MemorySpec()
    workdir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="check-", dir=workdir))

    def opener(name: str, memory_spec: MemorySpec) -> Callable[[], Memory]:
        return lambda: open_memory(method, str(folder / f"{name}.sqlite"), settings, spec=memory_spec,
                                   env_factory=FormEnv)

    episodes = form_episodes()
    counter = TiktokenCounter(settings.token_encoding)
    problems = _isolation(opener("isolation", spec), episodes, spec, counter)
    problems += _persistence(opener("persistence", spec), episodes, spec, counter)
    problems += _exclusion(opener("exclusion", spec.model_copy(update={"exclude_source_task": True})), episodes)
    return problems


def _isolation(open_: Callable[[], Memory], episodes: list[Trajectory], spec: MemorySpec,
               counter: TiktokenCounter) -> list[str]:
    problems = []
    memory = open_()
    try:
        empty = memory.recall(_query())
        if empty.items or empty.tokens:
            problems.append(f"recall on an empty memory injected {len(empty.items)} items ({empty.tokens} tokens)")
        if memory.committed_round() != -1:
            problems.append(f"a new memory says round {memory.committed_round()} is committed, not -1")
        for t in episodes:
            memory.learn(t)
        if _seen(memory.recall(_query())) != _seen(empty):
            problems.append("what was learned in this round is recalled before the round boundary")
        memory.end_round()
        for slot in (0, 1):
            problems += _budget_problems(memory.recall(_query(slot=slot)), spec, counter, f"recall (slot {slot})")
    finally:
        memory.close()
    return problems


def _persistence(open_: Callable[[], Memory], episodes: list[Trajectory], spec: MemorySpec,
                 counter: TiktokenCounter) -> list[str]:
    problems = []
    memory = open_()
    memory.commit_round(0, episodes)
    committed, stats = memory.committed_round(), memory.stats()
    before = [_seen(memory.recall(_query(slot=slot))) for slot in (0, 1)]
    memory.close()
    try:
        memory.close()
    except Exception as exc:  # the contract is exactly that a second close raises nothing
        problems.append(f"a second close() raised {type(exc).__name__}: {exc}")
    if committed != 0:
        problems.append(f"after commit_round(0, ...) committed_round() is {committed}, not 0")
    again = open_()
    try:
        if again.committed_round() != committed:
            problems.append(f"after reopening, committed_round() is {again.committed_round()}, not {committed}")
        if again.stats() != stats:
            problems.append(f"after reopening, stats are {again.stats()}, not {stats}")
        after = [_seen(again.recall(_query(slot=slot))) for slot in (0, 1)]
        if after != before:
            problems.append("after reopening, recall returns something else than before closing")
    finally:
        again.close()
    return problems


def _exclusion(open_: Callable[[], Memory], episodes: list[Trajectory]) -> list[str]:
    memory = open_()
    try:
        memory.commit_round(0, episodes)
        memory.commit_round(1, [])
        shown = [i for slot in (0, 1) for i in memory.recall(_query(slot=slot)).items]
    finally:
        memory.close()
    if shown:
        return [f"with exclude_source_task, {len(shown)} items learned from task 'form' were recalled for it"]
    return []
