"""A protocol test, not a capability figure: the ``smoke`` tasks through real browser-use agents whose model is
SmolLM2-135M-Instruct behind llama.cpp's server (n_ctx 8192, on 127.0.0.1), ``none`` vs ``stack``, each from an
empty store, a few rounds. Prints, per method, how many of the model's replies browser-use could parse into its
action format, how many of the actions it then performed failed, Pass@k and seconds per episode.

The agents run under ``.venv-browser-use`` (``make setup``); llama.cpp's server refuses OpenAI's ``json_schema``
response format, so browser-use asks for plain text and parses it. Each agent stops at its first unparseable
reply (``max_failures=1``, no forced final call) to keep a run within minutes on two cores.

Usage: python benchmarks/browser_use_smollm2.py [--rounds 2] [--seeds 1] [--methods none,stack] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path

from guimem.integrations.browser_use import OFFLINE_ENV
from guimem.tasks import load_suite
from guimem.testing.llamacpp import llama_server

ROOT = Path(__file__).resolve().parents[1]
BU_PYTHON = ROOT / ".venv-browser-use" / "bin" / "python"


def _suite(seeds: set[int], folder: Path) -> Path:
    suite = load_suite("smoke")
    tasks = [{"task": e.task, "seed": e.seed, "max_steps": e.max_steps} for e in suite.tasks if e.seed in seeds]
    path = folder / "smoke.json"
    path.write_text(json.dumps({"name": "smoke", "tasks": tasks}))
    return path


def _table(rows: list[dict[str, object]], rounds: int) -> None:
    by_method: dict[str, list[dict[str, object]]] = defaultdict(list)
    for row in rows:
        by_method[str(row["method"])].append(row)
    print(f"{'method':8} {'episodes':>8} {'replies':>8} {'parsed':>7} {'actions':>8} {'failed':>7} "
          + " ".join(f"P@{k:<4}" for k in range(1, rounds + 1)) + f" {'s/episode':>9}")
    for method, got in by_method.items():
        solved: set[tuple[object, object]] = set()
        passes = []
        for k in range(rounds):
            solved |= {(r["task"], r["seed"]) for r in got if r["round"] == k and r["success"]}
            total = len({(r["task"], r["seed"]) for r in got})
            passes.append(f"{100 * len(solved) / max(1, total):5.1f}")
        steps = sum(int(str(r["steps"])) for r in got)
        parsed = sum(int(str(r["valid_replies"])) for r in got)
        actions = sum(int(str(r["actions"])) for r in got)
        failed = sum(int(str(r["failed_actions"])) for r in got)
        wall = sum(float(str(r["wall_s"])) for r in got) / max(1, len(got))
        print(f"{method:8} {len(got):8d} {steps:8d} {parsed:7d} {actions:8d} {failed:7d} " + " ".join(passes)
              + f" {wall:9.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seeds", default="1", help="which of the smoke suite's seeds (1,2)")
    parser.add_argument("--methods", default="none,stack")
    parser.add_argument("--out", type=Path, default=None, help="keep the stores and episodes.jsonl here")
    args = parser.parse_args()
    if not BU_PYTHON.exists():
        raise SystemExit(f"{BU_PYTHON} is missing: run `make setup`")
    out = args.out or Path(tempfile.mkdtemp(prefix="bu-smollm2-"))
    out.mkdir(parents=True, exist_ok=True)
    suite = _suite({int(s) for s in args.seeds.split(",")}, out)
    env = {**os.environ, **OFFLINE_ENV, "PYTHONPATH": str(ROOT / "src"),
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"}
    rows: list[dict[str, object]] = []
    with llama_server(n_ctx=8192, start_timeout_s=300) as url:
        for method in args.methods.split(","):
            done = subprocess.run([str(BU_PYTHON), str(ROOT / "benchmarks" / "_browser_use_suite.py"), url,
                                   str(out / f"{method}.sqlite"), method, str(args.rounds), str(suite)],
                                  env=env, capture_output=True, text=True, check=False)
            (out / f"{method}.log").write_text(done.stderr)
            if done.returncode != 0:
                raise SystemExit(f"{method} failed: {done.stderr[-2000:]}")
            rows += [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    (out / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _table(rows, args.rounds)
    print(f"episodes: {out / 'episodes.jsonl'}")


if __name__ == "__main__":
    main()
