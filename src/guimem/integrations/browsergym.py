"""guimem memory inside your own BrowserGym loop (or an AgentLab-style agent).

    memory = BrowserGymMemory.open("stack", "bgym-memory.sqlite")
    obs, info = env.reset(seed=0)
    memory.start("miniwob.click-test-2", obs)          # task id: BrowserGym's, with or without "browsergym/"
    while True:
        hint = memory.recall(obs)                      # hint.text for the prompt, hint.items structured
        action = agent(obs, hint.text)                 # a BrowserGym action string: "click('12')"
        memory.record(action)
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    memory.finish(reward, obs)                         # learns from the episode
    memory.end_round()                                 # consolidates (admissions, merges), e.g. per batch

Screens are read with the same mapping as guimem's ``browsergym`` env, so a memory built by
``guimem eval --env browsergym`` (or by guimem's own ``miniwob`` env, for MiniWoB tasks) is recalled
here, and the other way round. Nothing from the page or the agent is trusted: action strings are
parsed as literals (never evaluated), unknown ones are recorded as what they are.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from guimem.envs.browsergym import (
    Parsed,
    benchmark_of,
    goal_and_params,
    miniwob_url,
    normalise_task_id,
    parse_action,
    parse_observation,
    use_system_chromium,
)
from guimem.errors import ConfigError
from guimem.integrations.rounds import Rounds
from guimem.memory.base import LearnReport, Memory, RecallQuery
from guimem.memory.factory import open_memory
from guimem.memory.settings import MemorySpec
from guimem.settings import GuimemSettings
from guimem.types import (
    Action,
    ActionError,
    ActionErrorCode,
    InjectedItem,
    Injection,
    Outcome,
    Step,
    Task,
    Trajectory,
    new_episode_id,
)


def prepare(chrome_binary: str | None = None) -> None:
    """Make a plain BrowserGym loop run here: Playwright launches Debian's chromium (no download) and
    BrowserGym's MiniWoB++ finds the ``miniwob`` package's pages (``MINIWOB_URL``), unless already set.

    Raises:
        EnvNotReadyError: Chromium is not installed.
    """
    use_system_chromium(chrome_binary or GuimemSettings().browser.chrome_binary)
    os.environ.setdefault("MINIWOB_URL", miniwob_url())


@dataclass(frozen=True)
class Hint:
    """What memory shows the agent at one step.

    Attributes:
        text: The injection text for the agent's prompt ("" when memory has nothing that fits).
        items: The structured items (kind, text, suggested actions with portable selectors).
        injection: The whole injection, as guimem's traces record it.
    """

    text: str
    items: tuple[InjectedItem, ...]
    injection: Injection


@dataclass
class _Episode:
    task: Task
    started: float
    episode_id: str = field(default_factory=new_episode_id)
    steps: list[Step] = field(default_factory=list)
    parsed: Parsed | None = None
    injection: Injection = field(default_factory=Injection)


class BrowserGymMemory:
    """One guimem memory for a BrowserGym agent: `start`, `recall`/`record` per step, `finish`, `end_round`.

    Args:
        memory: An open guimem `Memory` (`open` builds one from a method name and a store).
    """

    def __init__(self, memory: Memory) -> None:
        self.rounds: Rounds[Memory] = Rounds(memory)
        self._episode: _Episode | None = None

    @classmethod
    def open(cls, method: str = "stack", store: str = "guimem-memory.sqlite", settings: GuimemSettings | None = None,
             spec: MemorySpec | None = None) -> BrowserGymMemory:
        """Open (or create) the memory ``method`` in ``store`` (a SQLite path or a PostgreSQL URL)."""
        return cls(open_memory(method, store, settings or GuimemSettings(), spec=spec))

    @property
    def memory(self) -> Memory:
        """The guimem memory recalled from and learned into."""
        return self.rounds.memory

    @property
    def task(self) -> Task:
        """The current episode's task."""
        if self._episode is None:
            raise ConfigError("no episode started", suggestion="call start(task_id, obs) after env.reset()")
        return self._episode.task

    def start(self, task_id: str, obs: Mapping[str, Any], seed: int = 0) -> Task:
        """Begin an episode of ``task_id`` (e.g. ``miniwob.click-test-2``) whose first observation is ``obs``."""
        name = normalise_task_id(task_id)
        goal, params = goal_and_params(name, obs)
        task = Task(id=name, goal=goal, app=benchmark_of(name), params=params, seed=seed)
        self._episode = _Episode(task=task, started=time.time())
        return task

    def recall(self, obs: Mapping[str, Any]) -> Hint:
        """What memory shows the agent on the screen ``obs`` (call once per step, before acting)."""
        episode = self._require()
        episode.parsed = parse_observation(obs, app=episode.task.app, timestamp=time.time())
        start = time.perf_counter()
        injection = self.memory.recall(RecallQuery(
            task=episode.task, observation=episode.parsed.observation, step=len(episode.steps),
            history=tuple(episode.steps), episode_id=episode.episode_id, round=self.rounds.round,
            slot=self.rounds.slot(episode.task.id)))
        episode.injection = injection.model_copy(update={"latency_ms": (time.perf_counter() - start) * 1000})
        return Hint(text=injection.text, items=injection.items, injection=episode.injection)

    def record(self, action: str, error: str | None = None) -> Action:
        """Record the BrowserGym action the agent took on the screen last passed to `recall`."""
        episode = self._require()
        if episode.parsed is None:
            raise ConfigError("record() before recall()", suggestion="call recall(obs) on each screen first")
        parsed = parse_action(action, episode.parsed)
        failure = ActionError(code=ActionErrorCode.ENV_REJECTED, message=error[:300], action=parsed.describe()) \
            if error else None
        episode.steps.append(Step(index=len(episode.steps), observation=episode.parsed.observation, action=parsed,
                                  error=failure, injection=episode.injection))
        return parsed

    def finish(self, reward: float, obs: Mapping[str, Any] | None = None) -> LearnReport:
        """End the episode with BrowserGym's reward (≥ 1 is success) and learn from it."""
        episode = self._require()
        final = parse_observation(obs, app=episode.task.app).observation if obs is not None else None
        if episode.steps and obs is not None and isinstance(obs.get("last_action_error"), str) \
                and obs["last_action_error"].strip() and episode.steps[-1].error is None:
            last = episode.steps[-1]
            episode.steps[-1] = last.model_copy(update={"error": ActionError(
                code=ActionErrorCode.ENV_REJECTED, message=obs["last_action_error"].strip()[:300],
                action=last.action.describe())})
        success = float(reward) >= 1.0 - 1e-9
        trajectory = Trajectory(
            episode_id=episode.episode_id, task=episode.task, steps=tuple(episode.steps), final_observation=final,
            outcome=Outcome(success=success, score=max(-1.0, min(1.0, float(reward))), reason=f"reward {reward:g}"),
            env="browsergym", policy="external", memory=self.memory.name, started_at=episode.started,
            wall_ms=(time.time() - episode.started) * 1000)
        self._episode = None
        return self.rounds.learn(trajectory)

    def end_round(self) -> None:
        """Consolidate what was learned since the last call (admissions, merges); later recalls see it."""
        self.rounds.end_round()

    def close(self) -> None:
        """Close the store."""
        self.rounds.close()

    def __enter__(self) -> BrowserGymMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _require(self) -> _Episode:
        if self._episode is None:
            raise ConfigError("no episode started", suggestion="call start(task_id, obs) after env.reset()")
        return self._episode


class MemoryAgent:
    """Wraps an AgentLab-style agent (``get_action(obs) -> (action, info)``, optional ``obs_preprocessor``)
    so that it sees memory in ``obs["guimem_memory"]`` and memory learns from what it does.

    Call `start` after each ``env.reset`` and `finish` at the end of each episode.
    """

    def __init__(self, agent: Any, memory: BrowserGymMemory) -> None:
        self.agent = agent
        self.memory = memory

    def start(self, task_id: str, obs: Mapping[str, Any], seed: int = 0) -> Task:
        """Begin an episode."""
        return self.memory.start(task_id, obs, seed)

    def obs_preprocessor(self, obs: dict[str, Any]) -> dict[str, Any]:
        """The wrapped agent's preprocessing, plus ``guimem_memory`` (text) and ``guimem_items``."""
        inner = getattr(self.agent, "obs_preprocessor", None)
        out = dict(inner(obs)) if callable(inner) else dict(obs)
        hint = self.memory.recall(obs)
        out["guimem_memory"] = hint.text
        out["guimem_items"] = [item.model_dump(mode="json") for item in hint.items]
        return out

    def get_action(self, obs: dict[str, Any]) -> tuple[str, Any]:
        """The wrapped agent's action (recorded for learning)."""
        if "guimem_memory" not in obs:
            obs = self.obs_preprocessor(obs)
        action, info = self.agent.get_action(obs)
        self.memory.record(str(action))
        return action, info

    def finish(self, reward: float, obs: Mapping[str, Any] | None = None) -> LearnReport:
        """End the episode and learn from it."""
        return self.memory.finish(reward, obs)
