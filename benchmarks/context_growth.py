"""Prompt tokens per step for each in-task context strategy, and retention of facts kept with ``add``.

Scripted 50-, 100- and 150-step episodes: every reply has the five ConAct parts; it distils the
latest step (fold [t, t]), abstracts each finished 10-step sub-task (fold [t-9, t]) and every 50
steps everything so far (fold [1, t]); every 12th step it keeps a fact verbatim with a memory
``add`` and deletes it once used, 40 steps later, when the fact is *needed*. The same replies go
through ``conact``, ``react`` (append every step), ``truncate`` (last 5 steps) and ``none``.
Tokens are real BPE counts (cl100k). Retention: the fraction of needed facts whose exact text is
in the prompt of the step that needs them.

Usage: python benchmarks/context_growth.py [--lengths 50,100,150] [--json]
"""

from __future__ import annotations

import argparse
import json
import math

from guimem.agents.base import PolicyInput
from guimem.agents.conact import FivePartProtocol
from guimem.agents.llm import LLMPolicy, make_context
from guimem.testing import ScriptedLLM
from guimem.tokens import TiktokenCounter
from guimem.types import Observation, Role, Task, UIElement

NEED_AFTER = 40
FACT_EVERY = 12
STRATEGIES = ("conact", "react", "truncate", "none")


def fact(step: int) -> str:
    return f"Order #{48000 + step * 37}-{chr(65 + step % 26)}Z total ${step * 13.75:,.2f} for Kasey Lindqvist"


def fold_for(step: int) -> str:
    if step >= 2 and step % 50 == 0:
        return json.dumps({"range": [1, step], "summary": f"Steps 1-{step}: searched orders, opened details, "
                                                           f"recorded order totals in memory"})
    if step % 10 == 0:
        return json.dumps({"range": [step - 9, step], "summary": f"Checked ten orders ({step - 9}-{step})"})
    return json.dumps({"range": [step, step], "summary": f"opened order row {step}"})


def tool_call(step: int, length: int) -> str:
    if step % FACT_EVERY == 3:
        return json.dumps({"kind": "memory", "op": "add", "memory_id": f"f{step}", "description": "order to report",
                           "text": fact(step)})
    if step % FACT_EVERY == 4 and step - NEED_AFTER > 0 and (step - NEED_AFTER - 1) % FACT_EVERY == 3:
        return json.dumps({"kind": "memory", "op": "delete", "memory_id": f"f{step - NEED_AFTER - 1}"})
    return json.dumps({"kind": "tap", "ref": str(step % 20 + 1)})


def reply(step: int, length: int) -> str:
    return (f"<thinking>The orders list is long; row {step} is the next one to check against the goal. "
            f"I compare the customer name and the total shown before moving on, and keep exact totals "
            f"that the final report needs.</thinking>\n"
            f"<folding>{fold_for(step)}</folding>\n"
            f"<tool_call>{tool_call(step, length)}</tool_call>\n"
            f"<ui_observation>Row {step}: customer Kasey Lindqvist, {step % 7 + 1} items, status shipped, "
            f"updated 2026-11-{step % 28 + 1:02d} 14:{step % 60:02d}</ui_observation>\n"
            f"<action_intent>open order row {step} to read its total</action_intent>")


def screen(step: int) -> Observation:
    rows = tuple(UIElement(ref=str(i + 1), role=Role.LINK, text=f"Order #{48000 + (step + i) * 37} Kasey Lindqvist "
                                                                   f"${(step + i) * 13.75:,.2f}", clickable=True)
                 for i in range(20))
    return Observation(app="shop", location="/orders", elements=(
        UIElement(ref="0", role=Role.TEXTBOX, label="Search orders", editable=True), *rows))


def run(strategy: str, length: int) -> tuple[list[int], float]:
    counter = TiktokenCounter()
    llm = ScriptedLLM([reply(s, length) for s in range(1, length + 1)])
    policy = LLMPolicy(llm, make_context(strategy, keep_last=5), FivePartProtocol(), counter)
    task = Task(id="orders", goal="Find every order of Kasey Lindqvist and report the totals exactly.", app="shop")
    policy.reset(task)
    needed = kept = 0
    for step in range(1, length + 1):
        policy.act(PolicyInput(task=task, observation=screen(step), step=step - 1))
        prompt = llm.calls[-1][1].text()
        source = step - NEED_AFTER - 1
        if source > 0 and source % FACT_EVERY == 3:
            needed += 1
            kept += fact(source) in prompt
    return policy.prompt_tokens, (kept / needed if needed else 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="50,100,150")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    out: dict[str, dict[str, object]] = {}
    for strategy in STRATEGIES:
        row: dict[str, object] = {}
        for length in lengths:
            tokens, retention = run(strategy, length)
            row[str(length)] = {"final_prompt_tokens": tokens[-1], "mean_prompt_tokens": round(sum(tokens) / length),
                                "retention": round(retention, 3)}
        first, last = lengths[0], lengths[-1]
        t_first = row[str(first)]["final_prompt_tokens"]  # type: ignore[index]
        t_last = row[str(last)]["final_prompt_tokens"]  # type: ignore[index]
        row["growth_exponent"] = round(math.log(t_last / t_first) / math.log(last / first), 3)
        out[strategy] = row
    if args.json:
        print(json.dumps(out, indent=2))
        return
    last = str(lengths[-1])
    print(f"prompt tokens at the last step (cl100k BPE), episodes of {', '.join(map(str, lengths))} steps")
    print(f"{'strategy':<10}" + "".join(f"{'@' + str(n):>9}" for n in lengths) +
          f"{'growth exp':>12}{'mean@' + last:>10}{'retention':>11}")
    for strategy, row in out.items():
        cells = "".join(f"{row[str(n)]['final_prompt_tokens']:>9}" for n in lengths)  # type: ignore[index]
        print(f"{strategy:<10}{cells}{row['growth_exponent']:>12}{row[last]['mean_prompt_tokens']:>10}"  # type: ignore[index]
              f"{row[last]['retention']:>11.0%}")  # type: ignore[index]
    conact, react = out["conact"][last]["final_prompt_tokens"], out["react"][last]["final_prompt_tokens"]  # type: ignore[index]
    print(f"\nat {last} steps conact's prompt is {conact / react:.1%} of react's")  # type: ignore[operator]
    print("growth exponent: log(T_last / T_first) / log(last / first); 1 = linear, < 1 = sub-linear")


if __name__ == "__main__":
    main()
