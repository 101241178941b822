"""`BrowserUseMemory`: a browser-use ``Agent`` whose model sees guimem's memory for the current page.

The agent is run as it is. Only the model it calls is wrapped, for that run: before each call the page the
agent is looking at is read from browser-use's own browser state (the selector map it has just shown the
model), memory is recalled for it, and its block is added at the end of the agent's state message. Nothing
else changes: browser-use's prompt, tools, retries and hooks are its own, and the judge and page-extraction
models are not touched. After the run the episode (the pages, the actions browser-use performed and their
errors, success as the caller judges it or a checker says) is learned; the round boundary is the caller's.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from guimem.errors import ConfigError
from guimem.integrations.browser_use.model import RecallingModel
from guimem.integrations.browser_use.remote import ServiceMemory, is_service_url
from guimem.integrations.browser_use.state import action_of, clean, error_of, location_of, observation_of
from guimem.integrations.rounds import EpisodeMemory, Rounds
from guimem.memory.base import LearnReport, RecallQuery
from guimem.memory.factory import open_memory
from guimem.memory.settings import MemorySpec
from guimem.settings import GuimemSettings
from guimem.types import Injection, Observation, Outcome, Step, Task, Trajectory, new_episode_id

Checker = Callable[[Any], "bool | Awaitable[bool]"]
"""Called with the agent after every step, while its browser is open; its last answer is the episode's success."""


@dataclass(frozen=True)
class Page:
    """What one of the agent's model calls was shown: the page as guimem read it, and memory's injection."""

    observation: Observation
    injection: Injection


@dataclass
class Episode:
    """One run of the agent, as memory records it.

    Attributes:
        task: The task memory knows the run by.
        pages: By browser-use's step number (the last model call of a step wins: a retry sees the same page).
        success: The checker's last answer (None: no checker ran).
    """

    task: Task
    started: float = field(default_factory=time.time)
    episode_id: str = field(default_factory=new_episode_id)
    pages: dict[int, Page] = field(default_factory=dict)
    success: bool | None = None


def steps_of(history: Any, pages: Mapping[int, Page]) -> tuple[Step, ...]:
    """browser-use's ``AgentHistoryList`` items (model output and action results, by step number) as guimem
    `Step`s on the pages memory was asked about; a step whose page memory did not see is left out."""
    steps: list[Step] = []
    for item in getattr(history, "history", None) or ():
        number = getattr(getattr(item, "metadata", None), "step_number", None)
        page = pages.get(number) if isinstance(number, int) else None
        actions = getattr(getattr(item, "model_output", None), "action", None) or ()
        results = list(getattr(item, "result", None) or ())
        if page is None:
            continue
        for j, raw in enumerate(actions):
            action = action_of(raw, page.observation)
            steps.append(Step(index=len(steps), observation=page.observation, action=action,
                              error=error_of(results[j], action) if j < len(results) else None,
                              injection=page.injection))
    return tuple(steps)


async def _ask(checker: Checker, agent: Any) -> bool:
    answer = checker(agent)
    if inspect.isawaitable(answer):
        answer = await answer
    return bool(answer)


def _verdict(episode: Episode, history: Any, success: bool | None) -> tuple[bool, str]:
    if success is not None:
        return success, "the caller's judgement"
    if episode.success is not None:
        return episode.success, "the checker's judgement"
    judged = getattr(history, "is_successful", None)
    return bool(judged()) if callable(judged) else False, "browser-use's own verdict"


class BrowserUseMemory:
    """One guimem memory for browser-use agents: `run` an agent with memory, `end_round` when you choose.

    Args:
        memory: An open memory (`open` builds one from a method and a store or a ``guimem serve`` URL).
    """

    def __init__(self, memory: EpisodeMemory) -> None:
        self.rounds: Rounds[EpisodeMemory] = Rounds(memory)
        self.last: Trajectory | None = None
        """The episode last learned (its steps, injections and outcome)."""

    @classmethod
    def open(cls, method: str = "stack", store: str = "guimem-memory.sqlite", settings: GuimemSettings | None = None,
             spec: MemorySpec | None = None, api_key: str | None = None) -> BrowserUseMemory:
        """Open the memory ``method`` in ``store``: a SQLite path, a PostgreSQL URL, or the ``http://`` URL of a
        ``guimem serve`` (which runs its own method: ``method`` must name it).

        Raises:
            ConfigError: The server runs another method.
        """
        if not is_service_url(store):
            return cls(open_memory(method, store, settings or GuimemSettings(), spec=spec))
        remote = ServiceMemory(store, api_key=api_key)
        if remote.name != method:
            remote.close()
            raise ConfigError(f"guimem serve at {store} runs {remote.name!r}, not {method!r}",
                              suggestion=f"open({remote.name!r}, {store!r})")
        return cls(remote)

    @property
    def memory(self) -> EpisodeMemory:
        """The memory recalled from and learned into (local, or a ``guimem serve``)."""
        return self.rounds.memory

    async def run(self, agent: Any, task: Task | str | None = None, *, success: Checker | bool | None = None,
                  max_steps: int = 100, **run_kwargs: Any) -> Any:
        """Run ``agent`` (a browser-use ``Agent``) with memory, learn from the run, return its history.

        Args:
            agent: The agent, built as usual; its ``llm`` is wrapped for this run only.
            task: The task memory knows the run by: a `Task`, a task id, or None (id ``adhoc``); the goal is the
                agent's task unless the `Task` has one.
            success: Your judgement (a bool), a checker (see `Checker`), or None: browser-use's own
                ``history.is_successful()``.
            max_steps: As ``Agent.run``.
            **run_kwargs: Passed to ``Agent.run`` (``on_step_start``, ``on_step_end``: yours run as given).
        """
        episode = Episode(task=self._task(agent, task))
        theirs = run_kwargs.pop("on_step_end", None)

        async def on_step_end(running: Any) -> None:
            if callable(success):
                episode.success = await _ask(success, running)
            if theirs is not None:
                await theirs(running)

        inner = agent.llm
        agent.llm = RecallingModel(inner, lambda: self._recall(agent, episode))
        try:
            history = await agent.run(max_steps=max_steps, on_step_end=on_step_end, **run_kwargs)
        finally:
            agent.llm = inner
        self.learn(episode, history, success if isinstance(success, bool) else None)
        return history

    def learn(self, episode: Episode, history: Any, success: bool | None = None) -> LearnReport:
        """Learn from a finished run (`run` calls it; call it yourself when you drive the agent's steps).

        Args:
            episode: The run's record.
            history: browser-use's ``AgentHistoryList``.
            success: Your judgement; None: the checker's last answer, else browser-use's own verdict.
        """
        won, how = _verdict(episode, history, success)
        trajectory = Trajectory(
            episode_id=episode.episode_id, task=episode.task, steps=steps_of(history, episode.pages),
            outcome=Outcome(success=won, score=1.0 if won else 0.0, reason=how), env="browser-use",
            policy="browser-use", memory=self.memory.name, started_at=episode.started,
            wall_ms=(time.time() - episode.started) * 1000)
        self.last = trajectory
        return self.rounds.learn(trajectory)

    def end_round(self) -> None:
        """Consolidate what was learned since the last call (admissions, merges); later runs see it."""
        self.rounds.end_round()

    def close(self) -> None:
        """Close the store (or the connection to the server)."""
        self.rounds.close()

    def __enter__(self) -> BrowserUseMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _task(self, agent: Any, task: Task | str | None) -> Task:
        goal = clean(getattr(agent, "task", ""), 4000)
        if isinstance(task, Task):
            return task if task.goal else task.model_copy(update={"goal": goal})
        return Task(id=clean(task, 200) or "adhoc", goal=goal, app="")

    async def _recall(self, agent: Any, episode: Episode) -> str:
        """Memory's block for the page the agent's model is about to see (browser-use's cached state of it)."""
        state = await agent.browser_session.get_browser_state_summary(include_screenshot=False, cached=True)
        if not episode.task.app:
            episode.task = episode.task.model_copy(update={"app": location_of(state.url).split("/")[0] or "web"})
        observation = observation_of(state, episode.task.app, timestamp=time.time())
        start = time.perf_counter()
        number = int(agent.state.n_steps)
        injection = self.memory.recall(RecallQuery(
            task=episode.task, observation=observation, step=sum(1 for n in episode.pages if n < number),
            history=steps_of(agent.history, episode.pages), episode_id=episode.episode_id, round=self.rounds.round,
            slot=self.rounds.slot(episode.task.id)))
        injection = injection.model_copy(update={"latency_ms": (time.perf_counter() - start) * 1000})
        episode.pages[number] = Page(observation=observation, injection=injection)
        return injection.text
