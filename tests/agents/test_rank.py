"""The text-reading ``rank`` policy with a real model (SmolLM2-135M in-process, llama.cpp): its scores,
that it reads only memory's text, and a one-task smoke run in real MiniWoB++."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from guimem.agents.base import PolicyInput
from guimem.testing import FormEnv
from guimem.testing.llamacpp import smollm2_gguf
from guimem.types import Injection, Task

pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.fixture(scope="module")
def policy():
    from guimem.agents.rank import RankPolicy

    return RankPolicy(smollm2_gguf(), n_ctx=1024)


def test_scores_from_the_cached_prompt_equal_a_full_evaluation(policy):
    prompt = "Goal: press the Login button.\nNext action:"
    options = ['tap(button "Login")', 'type(textbox "username", "ann")']
    cached = policy.scores(prompt, options)
    head = policy._tokens(prompt, special=True)
    for option, score in zip(options, cached, strict=True):
        tail = policy._tokens(" " + option)
        policy.llm.reset()
        policy.llm.eval(head + tail)
        rows = policy.llm.scores[len(head) - 1: len(head) - 1 + len(tail)]
        logz = np.log(np.exp(rows - rows.max(1, keepdims=True)).sum(1)) + rows.max(1)
        assert score == pytest.approx(float(np.mean(rows[np.arange(len(tail)), tail] - logz)), abs=1e-4)


def test_it_picks_an_action_the_screen_offers_and_memory_text_changes_its_scores(policy):
    env = FormEnv()
    obs = env.reset(Task(id="form", goal="", app="form", seed=1))
    plain = policy.act(PolicyInput(task=env.task, observation=obs))
    assert plain.action.ref in {e.ref for e in obs.elements} or plain.action.kind.value == "key"
    prompt_without = policy._prompt(PolicyInput(task=env.task, observation=obs), 60)
    told = PolicyInput(task=env.task, observation=obs,
                       injection=Injection(method="steer", text='Verified knowledge:\n- tap(button "Login") first'))
    prompt_with = policy._prompt(told, 60)
    assert 'tap(button "Login") first' in prompt_with and prompt_with != prompt_without
    option = ['tap(button "Login")']
    assert policy.scores(prompt_with, option)[0] != policy.scores(prompt_without, option)[0]


@pytest.mark.browser
def test_guimem_run_with_the_rank_policy_on_one_miniwob_task(tmp_path, monkeypatch):
    from guimem.cli.app import app

    monkeypatch.setenv("GUIMEM_RANK__MODEL_PATH", str(smollm2_gguf()))
    result = CliRunner().invoke(app, ["run", "--task", "click-test-2", "--seed", "1", "--policy", "rank",
                                      "--max-steps", "2", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    line = json.loads(result.stdout[result.stdout.index("{"):])
    assert line["steps"] >= 1 and isinstance(line["success"], bool)
