"""The text-reading ``rank`` policy with a real model (SmolLM2-135M, llama.cpp): its scores, that it reads
only memory's text, and a one-task smoke run in real MiniWoB++.

llama.cpp runs in-process in this policy, so every test here loads it in a child process
(`run_isolated`, or the real console script): a build that dies of SIGILL fails these tests with a
message and the rest of the suite runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from guimem.agents.base import PolicyInput
from guimem.testing import FormEnv
from guimem.testing.isolated import run_isolated
from guimem.testing.llamacpp import smollm2_gguf
from guimem.types import Injection, Task

pytestmark = [pytest.mark.model, pytest.mark.slow]


def _policy():
    from guimem.agents.rank import RankPolicy

    return RankPolicy(smollm2_gguf(), n_ctx=1024)


def _full(reference, head: list[int], tail: list[int]) -> float:
    """The mean log-probability of ``tail`` after ``head``, by evaluating both in one plain context."""
    reference.reset()
    reference.eval(head + tail)
    rows = reference.scores[len(head) - 1: len(head) - 1 + len(tail)].astype(np.float64)
    logz = np.log(np.exp(rows - rows.max(1, keepdims=True)).sum(1)) + rows.max(1)
    return float(np.mean(rows[np.arange(len(tail)), tail] - logz))


def _trie_scores_and_full_ones() -> dict[str, object]:
    from llama_cpp import Llama

    policy = _policy()
    reference = Llama(model_path=str(smollm2_gguf()), n_ctx=1024, n_threads=2, logits_all=True, verbose=False)
    prompt = "Goal: press the Login button.\nNext action:"
    shared = ['tap(button "Login")', 'type(textbox "username", "ann")', 'tap(button "Log out")',
              'tap(button "Login")', 'tap(link "Login help")']
    many = shared + [f'tap(button "Item {i}")' for i in range(70)]  # more than one group of sequences
    got = policy.scores(prompt, many)
    checked = [*range(5), 40, 62, 63, 64, 74]
    pairs = [(got[i], _full(reference, policy._tokens(prompt, special=True), policy._tokens(" " + many[i])))
             for i in checked]
    longer = prompt + " tap"  # starts like the cached prompt: only what differs is decoded
    again = policy.scores(longer, shared[:3])
    pairs += [(g, _full(reference, policy._tokens(longer, special=True), policy._tokens(" " + o)))
              for g, o in zip(again, shared[:3], strict=True)]
    others = [f'tap(checkbox "Choice {i}")' for i in range(40)]
    among_items = policy.scores(prompt, [shared[1], *many[5:45]])
    among_choices = policy.scores(prompt, [shared[1], *others])
    return {"pairs": pairs, "duplicate": (got[0], got[3]), "alone": (among_items[0], among_choices[0])}


def test_scores_decoded_as_a_trie_equal_a_full_evaluation_and_do_not_depend_on_the_other_options():
    got = run_isolated(_trie_scores_and_full_ones)
    for trie, full in got["pairs"]:
        # llama.cpp picks other matrix kernels for larger batches: the same math, rounded otherwise
        assert trie == pytest.approx(full, abs=0.03)
    assert got["duplicate"][0] == got["duplicate"][1]
    # options in other sequences of the same batch are masked out: the score is exactly the same among others
    assert got["alone"][0] == got["alone"][1]


def _edge_cases_on_a_small_context() -> dict[str, object]:
    from llama_cpp import Llama

    from guimem.agents.rank import RankPolicy
    from guimem.errors import ModelRuntimeError

    policy = RankPolicy(smollm2_gguf(), n_ctx=128)
    reference = Llama(model_path=str(smollm2_gguf()), n_ctx=256, n_threads=2, logits_all=True, verbose=False)
    first = "Goal: open the inbox and reply to Ann.\nScreen:\n- link 'Inbox'\nNext action:"
    middle = first.replace("reply to Ann", "forward to Bob")  # differs from the cached prompt in its middle
    options = [f'tap(link "Message number {i} from the list")' for i in range(12)]  # more tokens than one group holds
    policy.scores(first, options[:2])
    got = policy.scores(middle, options)
    head = policy._tokens(middle, special=True)
    pairs = [(got[i], _full(reference, head, policy._tokens(" " + options[i]))) for i in (0, 5, 11)]
    twice = policy.scores(first, [options[0], *options[1:11], options[0]])  # the same option in two groups
    try:
        policy.scorer.mean_logprobs(list(range(1, 120)), [policy._tokens(" " + options[0])])
        too_long = "scored"
    except ModelRuntimeError as exc:
        too_long = str(exc)
    after = policy.scores(first, options[:1])[0]
    cut = policy.scores("Goal: " + "very " * 300 + "long.\nNext action:", options[:2])  # the prompt's middle is cut
    return {"pairs": pairs, "twice": (twice[0], twice[-1]), "too_long": too_long, "after": after,
            "after_full": _full(reference, policy._tokens(first, special=True), policy._tokens(" " + options[0])),
            "cut": cut}


def test_a_prompt_changed_in_its_middle_groups_split_by_room_and_a_prompt_too_long_are_handled():
    got = run_isolated(_edge_cases_on_a_small_context)
    for trie, full in got["pairs"]:
        assert trie == pytest.approx(full, abs=0.03)
    assert got["twice"][0] == pytest.approx(got["twice"][1], abs=0.03)
    assert "exceed the context" in got["too_long"]
    assert got["after"] == pytest.approx(got["after_full"], abs=0.03), "a refused call leaves the scorer usable"
    assert all(np.isfinite(got["cut"]))


def _an_action_and_the_scores_with_and_without_memory() -> dict[str, object]:
    policy = _policy()
    env = FormEnv()
    obs = env.reset(Task(id="form", goal="", app="form", seed=1))
    plain = policy.act(PolicyInput(task=env.task, observation=obs))
    told = PolicyInput(task=env.task, observation=obs,
                       injection=Injection(method="steer", text='Verified knowledge:\n- tap(button "Login") first'))
    prompt_without = policy._prompt(PolicyInput(task=env.task, observation=obs), 60)
    prompt_with = policy._prompt(told, 60)
    option = ['tap(button "Login")']
    return {"ref": plain.action.ref, "kind": plain.action.kind.value, "refs": [e.ref for e in obs.elements],
            "prompt_with": prompt_with, "prompt_without": prompt_without,
            "score_with": policy.scores(prompt_with, option)[0],
            "score_without": policy.scores(prompt_without, option)[0]}


def test_it_picks_an_action_the_screen_offers_and_memory_text_changes_its_scores():
    got = run_isolated(_an_action_and_the_scores_with_and_without_memory)
    assert got["ref"] in got["refs"] or got["kind"] == "key"
    assert 'tap(button "Login") first' in got["prompt_with"] and got["prompt_with"] != got["prompt_without"]
    assert got["score_with"] != got["score_without"]


@pytest.mark.browser
def test_guimem_run_with_the_rank_policy_on_one_miniwob_task(tmp_path):
    cmd = [sys.executable, "-m", "guimem.cli", "run", "--task", "click-test-2", "--seed", "1", "--policy", "rank",
           "--max-steps", "2", "--out", str(tmp_path), "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "GUIMEM_RANK__MODEL_PATH": str(smollm2_gguf())})
    assert done.returncode == 0, done.stderr[-2000:]
    line = json.loads(done.stdout[done.stdout.index("{"):])
    assert line["steps"] >= 1 and isinstance(line["success"], bool)
