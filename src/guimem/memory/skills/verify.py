"""Verification by replay: reset the source task with its seed, replay the prefix, run the skill."""

from __future__ import annotations

from dataclasses import dataclass

from guimem.envs.base import Env
from guimem.errors import EnvError
from guimem.memory.generalise import state_text
from guimem.memory.program import SkillProgram, execute
from guimem.memory.skills.induce import SkillSource
from guimem.types import Task


@dataclass(frozen=True)
class Verdict:
    """Whether a skill reproduced its recorded result, and why not."""

    ok: bool
    reason: str


def verify(env: Env, program: SkillProgram, source: SkillSource, app: str = "") -> Verdict:
    """Replay ``program`` where it was recorded and compare the result with the recording."""
    try:
        obs = env.reset(Task(id=source.task, goal="", app=app or "app", seed=source.seed))
        if env.task.params != source.params:
            return Verdict(False, "the source task did not reproduce (other parameters for the same seed)")
        for i, action in enumerate(source.prefix):
            if action.selector is not None:
                res = action.selector.resolve(obs)
                if not res.ok or res.element is None:
                    return Verdict(False, f"prefix step {i} ({action.describe()}) did not resolve")
                action = action.model_copy(update={"ref": res.element.ref})
            result = env.step(action)
            obs = result.observation
            if result.error is not None or result.done:
                return Verdict(False, f"prefix step {i} failed or ended the episode")
        run = execute(env, program, source.params, obs)
    except EnvError as exc:
        return Verdict(False, f"environment failed during replay: {exc.message}")
    if run.error is not None:
        return Verdict(False, run.error.message)
    if source.ends_episode:
        outcome = env.evaluate()
        return Verdict(run.done and outcome.success, "reproduced the successful end" if outcome.success
                       else f"the episode did not succeed ({outcome.reason or outcome.score})")
    same = state_text(run.observation, env.task) == source.expected_state
    return Verdict(same, "reached the recorded screen" if same else "reached a different screen than recorded")
