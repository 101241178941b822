"""The episode loop: observe → recall → act → step → record, with errors as data and teardown in finally."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from guimem.agents.base import Decision, Policy, PolicyInput
from guimem.embeddings import embedding_ms
from guimem.envs.base import Env, ForeseeingStart, Previewing, Transition
from guimem.errors import EnvError, GuimemError, LLMError, StoreError
from guimem.memory.ahead import take_ahead_use
from guimem.memory.base import Memory, NoMemory, RecallQuery, Speculating, SpeculatingQueries
from guimem.types import (
    Action,
    ActionError,
    ActionErrorCode,
    ActionKind,
    InfraComponent,
    InfraFailure,
    Observation,
    Outcome,
    Selector,
    Step,
    Task,
    Trajectory,
    new_episode_id,
)

log = logging.getLogger(__name__)
SkillRunner = Callable[[Env, Action, Task, Observation], tuple[Transition, tuple[Action, ...]]]
TERMINAL_KINDS = frozenset({ActionKind.DONE, ActionKind.ANSWER})
NOT_EXECUTED = frozenset({ActionErrorCode.PARSE_ERROR, ActionErrorCode.MODEL_ERROR})


@dataclass(frozen=True)
class EpisodeSettings:
    """How one episode runs.

    Attributes:
        max_steps: Steps allowed (the task's own ``max_steps`` wins when set).
        speculate: Let memory work out recall for the screen the env expects while the env settles (`Previewing`,
            `Speculating`), and for the first screen it expects while it resets a task it has started before
            (`ForeseeingStart`); it changes when recall's work happens, never what recall returns.
    """

    max_steps: int = 15
    speculate: bool = True


COMPONENTS: dict[type[GuimemError], InfraComponent] = {
    EnvError: InfraComponent.ENV, LLMError: InfraComponent.MODEL, StoreError: InfraComponent.MEMORY,
}


def infra_failure(exc: GuimemError) -> InfraFailure | None:
    """The infrastructure failure an exception stands for, or None when it is not one.

    Whether it is one is the error's own `GuimemError.infrastructure`; this names the part that failed:
    the env (browser, driver, device), the model endpoint or the store.
    """
    component = next((c for cls, c in COMPONENTS.items() if isinstance(exc, cls)), None)
    if not exc.infrastructure or component is None:
        return None
    return InfraFailure(component=component, error=type(exc).__name__, message=exc.message,
                        suggestion=exc.suggestion)


def _with_selector(action: Action, obs: Observation) -> Action:
    """Attach the portable selector of the target, so memory never has to keep refs."""
    if action.ref is None or action.selector is not None:
        return action
    el = obs.element(action.ref)
    if el is None:
        return action
    return action.model_copy(update={"selector": Selector.for_element(el, obs)})


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def run_episode(
    env: Env,
    policy: Policy,
    task: Task,
    memory: Memory | None = None,
    settings: EpisodeSettings | None = None,
    skill_runner: SkillRunner | None = None,
    round_index: int = 0,
    slot: int = 0,
) -> Trajectory:
    """Run one episode and return its trajectory.

    When the env, the model endpoint or the store fails, the episode ends with an outcome whose
    ``infra`` field says so (never an agent failure); any other exception propagates.

    The step budget counts the agent's decisions, memory actions and skill calls included; that is
    why the loop counts them itself rather than wrapping the env in `StepLimit` (which can only see
    `Env.step` calls, and is for users who keep their own loop).

    Args:
        env: The environment (not closed here: one env serves many episodes).
        policy: The frozen agent.
        task: The task to reset with.
        memory: Asked at every step; ``none`` when absent.
        settings: Step budget.
        skill_runner: Executes ``run_skill`` actions; without one they fail as data.
        round_index: The evaluation round (passed to memory).
        slot: This task's occurrence number within the round (passed to memory).
    """
    memory = memory or NoMemory()
    settings = settings or EpisodeSettings()
    episode_id = new_episode_id()
    started = time.time()
    wall = time.perf_counter()
    steps: list[Step] = []
    overflow = ""
    final_obs: Observation | None = None
    outcome: Outcome
    previews = env if isinstance(env, Previewing) else None
    speculate = _speculation(memory, episode_id=episode_id, round_index=round_index, slot=slot) \
        if settings.speculate and isinstance(memory, Speculating) else None
    try:
        _speculate_start(env, speculate, task)
        obs = env.reset(task)
        task = env.task
        if previews is not None and speculate is not None:
            previews.preview_to(partial(speculate, task))
        policy.reset(task)
        max_steps = task.max_steps or settings.max_steps
        last_error: ActionError | None = None
        for index in range(max_steps):
            query = RecallQuery(task=task, observation=obs, step=index, history=tuple(steps), episode_id=episode_id,
                                round=round_index, slot=slot)
            step, transition = _one_step(env, policy, memory, query, last_error, skill_runner)
            steps.append(step)
            if transition is None:  # answer / done: the agent ended the episode
                break
            if step.error is not None and step.error.code is ActionErrorCode.MODEL_ERROR:
                overflow = step.error.message  # the model cannot go on (its context is full): a recorded end
                break
            obs, last_error = transition.observation, transition.error
            if transition.done:
                break
        final_obs = obs
        outcome = env.evaluate()
        if overflow and not outcome.success:
            outcome = outcome.model_copy(update={"reason": overflow})
    except GuimemError as exc:
        failure = infra_failure(exc)
        if failure is None:
            raise
        log.warning("episode %s on %s: %s failed: %s", episode_id, task.id, failure.component, exc)
        outcome = Outcome(success=False, score=0.0, reason=f"{failure.component} failed: {exc.message}", infra=failure)
    finally:
        if previews is not None and speculate is not None:
            previews.preview_to(None)
    return Trajectory(
        episode_id=episode_id, task=task, steps=tuple(steps), final_observation=final_obs, outcome=outcome,
        env=env.name, policy=policy.name, memory=memory.name, started_at=started, wall_ms=_ms(wall),
    )


def _speculation(memory: Speculating, *, episode_id: str, round_index: int,
                 slot: int) -> Callable[[Task, Observation], None]:
    """How this episode hands ``memory`` a screen recall may soon be asked about (the expected first screen, a
    step's preview): as the whole query to a memory whose recall reads more of it (`SpeculatingQueries`: the
    stack's trial slot), else as the task and screen (`Speculating.speculate`)."""
    if isinstance(memory, SpeculatingQueries):
        ahead = memory
        return lambda task, obs: ahead.speculate_query(RecallQuery(
            task=task, observation=obs, episode_id=episode_id, round=round_index, slot=slot))
    return memory.speculate


def _speculate_start(env: Env, speculate: Callable[[Task, Observation], None] | None, task: Task) -> None:
    """Hand memory (``speculate``; None: speculation is off) the first screen the reset of ``task`` will most likely
    return (the guess of an env that makes one, `ForeseeingStart`), so that its recall is worked out while the env
    resets. What the env's guess or memory raises is logged: a guess only gives recall a head start."""
    if speculate is None or not isinstance(env, ForeseeingStart):
        return
    try:
        expected = env.expected_start(task)
        if expected is not None:
            speculate(*expected)
    except Exception as exc:  # the env's guess or memory's work: either only gives recall a head start
        log.warning("speculating on the expected first screen failed (the episode goes on without it): %s", exc)


def _one_step(
    env: Env, policy: Policy, memory: Memory, query: RecallQuery, last_error: ActionError | None,
    skill_runner: SkillRunner | None,
) -> tuple[Step, Transition | None]:
    task, obs, history, index = query.task, query.observation, query.history, query.step
    timings: dict[str, float] = {}
    embedded = embedding_ms()
    take_ahead_use()
    t = time.perf_counter()
    injection = memory.recall(query)
    timings["recall"] = _ms(t)
    timings["embed"] = round(embedding_ms() - embedded, 3)  # of which computing or waiting for embeddings
    ahead, waited = take_ahead_use()
    if waited:
        timings["ahead_wait"] = waited  # of which waiting for the recall ahead to finish
    injection = injection.model_copy(update={"latency_ms": timings["recall"]})
    t = time.perf_counter()
    decision: Decision = policy.act(PolicyInput(task=task, observation=obs, injection=injection, history=history,
                                                last_error=last_error, step=index))
    timings["policy"] = _ms(t)
    action = _with_selector(decision.action, obs)
    transition: Transition | None
    performed: tuple[Action, ...] = ()
    t = time.perf_counter()
    if decision.error is not None and decision.error.code in NOT_EXECUTED:
        transition = Transition(obs, decision.error)  # nothing the agent meant was readable: the screen stays
    elif action.kind in TERMINAL_KINDS:
        transition = None
    elif action.kind is ActionKind.MEMORY:  # context-only action: the screen does not change
        transition = Transition(obs, decision.error)
    elif action.kind is ActionKind.RUN_SKILL and skill_runner is not None:
        transition, performed = skill_runner(env, action, task, obs)
    elif action.kind is ActionKind.RUN_SKILL:
        transition = Transition(obs, ActionError(code=ActionErrorCode.UNSUPPORTED, message="no skill runner configured",
                                                 action=action.describe()))
    else:
        transition = env.step(action)
    timings["env"] = _ms(t)
    error = decision.error or (transition.error if transition else None)
    step = Step(index=index, observation=obs, action=action, thought=decision.thought, intent=decision.intent,
                error=error, injection=injection, timings_ms=timings, performed=performed,
                model_calls=decision.model_calls, recall_ahead=ahead)
    return step, transition
