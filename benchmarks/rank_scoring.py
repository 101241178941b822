"""How long the ``rank`` policy takes to score a step: candidates one by one after the cached prompt (as until
this benchmark was written) against all of them decoded as one token trie (`guimem.llm.scoring`), on the
steps of real episodes.

The steps are recorded first: the rank policy acts on every page of ``poison-form`` (guimem's form env with
attacker content planted, no browser) for up to ``--steps`` steps, each step's prompt and candidate actions
kept. Each recorded step is then scored three ways, in one process on one model: **one by one** (the prompt
decoded, then each candidate from that cached prefix), **trie, cold** (the prompt decoded whole, then the
trie), **trie, in order** (the steps in episode order, so a prompt that starts like the step before's decodes
only what differs, as in an evaluation). Prints seconds per step (p50, p95, total), the ratios, the largest
score difference and how often the chosen action differs, with the processor.

Usage: python benchmarks/rank_scoring.py [--pages 12] [--steps 3] [--model GGUF] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
from _support import cpu_model  # type: ignore[import-not-found]

from guimem.agents.base import PolicyInput
from guimem.agents.explorer import candidate_actions
from guimem.agents.rank import RankPolicy, action_text
from guimem.envs.poison import PoisonedEnv
from guimem.llm.runtime import bundled_gguf
from guimem.settings import GuimemSettings
from guimem.tasks import load_suite
from guimem.types import Injection, Step


def record(policy: RankPolicy, pages: int, steps: int) -> list[tuple[str, list[str]]]:
    """(prompt, candidate texts) of every step of one episode per page, the rank policy acting."""
    env = PoisonedEnv.on_form(GuimemSettings())
    out = []
    for entry in load_suite("poison-form").tasks[:pages]:
        obs = env.reset(entry.to_task("form"))
        history: list[Step] = []
        for _ in range(steps):
            inp = PolicyInput(task=env.task, observation=obs, history=tuple(history),
                              injection=Injection(method="none"))
            options = [action_text(c.action, obs) for c in candidate_actions(env.task, obs)]
            out.append((policy._prompt(inp, 60), options))
            decision = policy.act(inp)
            result = env.step(decision.action)
            history.append(Step(index=len(history), action=decision.action, observation=obs, error=result.error))
            obs = result.observation
            if result.done:
                break
    return out


def one_by_one(policy: RankPolicy, reference: object, prompt: str, options: list[str]) -> list[float]:
    """The scoring this benchmark compares against: each candidate after the cached prompt, alone."""
    head = policy._tokens(prompt, special=True)
    reference.reset()  # type: ignore[attr-defined]
    reference.eval(head)  # type: ignore[attr-defined]
    out = []
    for option in options:
        tail = policy._tokens(" " + option)
        reference.n_tokens = len(head)  # type: ignore[attr-defined]
        reference.eval(tail)  # type: ignore[attr-defined]
        rows = reference.scores[len(head) - 1: len(head) - 1 + len(tail)].astype(np.float64)  # type: ignore[attr-defined]
        logz = np.log(np.exp(rows - rows.max(1, keepdims=True)).sum(1)) + rows.max(1)
        out.append(float(np.mean(rows[np.arange(len(tail)), tail] - logz)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=12)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--model", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from llama_cpp import Llama

    model = args.model or str(bundled_gguf())
    policy = RankPolicy(model)
    reference = Llama(model_path=model, n_ctx=policy.n_ctx, n_threads=2, n_threads_batch=2, logits_all=True,
                      verbose=False, seed=0)
    steps = record(policy, args.pages, args.steps)
    times: dict[str, list[float]] = {"one by one": [], "trie, cold": [], "trie, in order": []}
    worst, flips = 0.0, 0
    for prompt, options in steps:
        started = time.perf_counter()
        old = one_by_one(policy, reference, prompt, options)
        times["one by one"].append(time.perf_counter() - started)
        policy.scorer.forget()
        started = time.perf_counter()
        new = policy.scores(prompt, options)
        times["trie, cold"].append(time.perf_counter() - started)
        worst = max([worst, *(abs(a - b) for a, b in zip(old, new, strict=True) if math.isfinite(a))])
        flips += int(np.argmax(old)) != int(np.argmax(new))
    policy.scorer.forget()
    for prompt, options in steps:
        started = time.perf_counter()
        policy.scores(prompt, options)
        times["trie, in order"].append(time.perf_counter() - started)
    rows = {k: {"p50_s": float(np.percentile(v, 50)), "p95_s": float(np.percentile(v, 95)), "total_s": sum(v)}
            for k, v in times.items()}
    base = rows["one by one"]["total_s"]
    report = {"cpu": cpu_model(), "steps": len(steps), "candidates_p50": float(np.median([len(o) for _, o in steps])),
              "ways": rows, "speedup_cold": base / rows["trie, cold"]["total_s"],
              "speedup_in_order": base / rows["trie, in order"]["total_s"], "max_score_diff": worst,
              "choice_differs": flips}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"rank scoring, {len(steps)} recorded steps of poison-form ({report['candidates_p50']:.0f} candidates "
          f"at the median), {report['cpu']}")
    for k, r in rows.items():
        print(f"  {k:15} p50 {r['p50_s']:.2f} s  p95 {r['p95_s']:.2f} s  total {r['total_s']:.1f} s  "
              f"({base / r['total_s']:.2f}x)")
    print(f"  largest score difference {worst:.4f}; chosen action differs in {flips} of {len(steps)} steps")


if __name__ == "__main__":
    main()
