"""Memory on real MiniWoB++ episodes in headless Chromium (the issues' acceptance criteria)."""

from __future__ import annotations

import pytest

from guimem.agents.explorer import ExplorerPolicy
from guimem.embeddings import CachedEmbedder
from guimem.embeddings.e5 import E5Embedder
from guimem.envs.miniwob import MiniWoBEnv
from guimem.harness.episode import run_episode
from guimem.memory.base import RecallQuery
from guimem.memory.graph import GraphMemory
from guimem.memory.kit import MemoryKit
from guimem.memory.program import execute
from guimem.memory.skills.induce import induce
from guimem.memory.skills.verify import verify
from guimem.storage.sqlite import SQLiteStore
from guimem.tokens import TiktokenCounter
from guimem.types import Action, ActionKind, Role, Selector, Task

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def env():
    e = MiniWoBEnv()
    yield e
    e.close()


def login(env, seed, right=True):
    """A scripted login-user episode (right: fill both fields, then Login; wrong: Login at once)."""

    class Script:
        name = "script"

        def reset(self, task):
            self.i = 0

        def act(self, inp):
            from guimem.agents.base import Decision

            obs, params = inp.observation, inp.task.params
            plan = ([("username", params["username"]), ("password", params["password"])] if right else [])
            if self.i < len(plan):
                rid, text = plan[self.i]
                self.i += 1
                el = Selector(role=Role.TEXTBOX, resource_id=rid).resolve(obs).element
                return Decision(action=Action(kind=ActionKind.TYPE, ref=el.ref, text=text))
            el = Selector(role=Role.BUTTON, text="Login").resolve(obs).element
            return Decision(action=Action(kind=ActionKind.TAP, ref=el.ref))

    return run_episode(env, Script(), Task(id="login-user", goal="", app="miniwob", seed=seed, max_steps=5))


def test_graph_merges_one_screen_across_seeds_keeps_screens_apart_and_recalls_failures(env, tmp_path):
    kit = MemoryKit(SQLiteStore(tmp_path / "g.sqlite"), CachedEmbedder(E5Embedder()), TiktokenCounter(), "graph")
    graph = GraphMemory(kit)
    trajs = [login(env, 1), login(env, 2), login(env, 3, right=False)]
    assert [t.outcome.success for t in trajs] == [True, True, False]
    for t in trajs:
        graph.learn(t)
    graph.end_round()
    login_nodes = graph.stats()["nodes"]
    click = run_episode(env, ExplorerPolicy(), Task(id="click-test-2", goal="", app="miniwob", seed=1))
    graph.learn(click)
    graph.end_round()
    assert graph.stats()["nodes"] > login_nodes, "a different screen gets its own node"
    assert login_nodes <= 3, "the login screen of three seeds is one node (plus end screens)"
    obs = env.reset(Task(id="login-user", goal="", app="miniwob", seed=9))
    assert obs.location == "#form", "a page is located by its structure, never by the task that opened it"
    inj = graph.recall(RecallQuery(task=env.task, observation=obs))
    assert {i.success for i in inj.items} >= {True, False}


def test_a_skill_from_one_login_logs_in_on_another_seed_with_new_credentials(env):
    source = login(env, 4)
    (skill,) = [c for c in induce(source) if len(c.program.steps) == 3]
    assert skill.program.params == ("username", "password")
    assert verify(env, skill.program, skill.source).ok
    obs = env.reset(Task(id="login-user", goal="", app="miniwob", seed=21))
    assert env.task.params != source.task.params
    run = execute(env, skill.program, env.task.params, obs)
    assert run.error is None and run.done and env.evaluate().success


def test_verification_rejects_a_skill_that_does_not_reproduce(env):
    source = login(env, 5)
    (skill,) = [c for c in induce(source) if len(c.program.steps) == 3]
    swapped = skill.program.model_copy(update={"params": skill.program.params, "steps": (
        skill.program.steps[0].model_copy(update={"text": "{password}"}), *skill.program.steps[1:])})
    verdict = verify(env, swapped, skill.source)
    assert not verdict.ok
