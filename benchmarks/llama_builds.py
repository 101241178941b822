"""llama.cpp builds compared on SmolLM2-135M: prompt and generation tokens/s with 2 threads, and build time.

Each build is measured in its own child process (one that dies of SIGILL is reported, not fatal): the
build installed in this venv (the portable one `make setup` makes, scripts/llama_build.py), and any
other build installed with ``pip install --target DIR`` and named with ``--site NAME=DIR`` (e.g. a
``GGML_NATIVE=ON`` build, to see what portability costs). Build times come from the ``build.json``
each wheel folder under ~/.cache/guimem/wheels keeps, or ``--build-s NAME=SECONDS``.

Usage: python benchmarks/llama_builds.py [--site native=/tmp/native-site] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from _support import cpu_model  # type: ignore[import-not-found]

from guimem.llm.runtime import bundled_gguf

CHILD = r"""
import json, statistics, sys, time
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=1024, n_threads=2, n_threads_batch=2, verbose=False, seed=0)
prompt = llm.tokenize(("You operate a web page to reach a goal. " * 40).encode(), add_bos=True)[:256]
pp, tg = [], []
for _ in range(int(sys.argv[2])):
    llm.reset()
    t = time.perf_counter(); llm.eval(prompt); pp.append(len(prompt) / (time.perf_counter() - t))
    n = 0; t = time.perf_counter()
    for tok in llm.generate(prompt[:16], temp=0.0, reset=True):
        n += 1
        if n == 64:
            break
    tg.append(n / (time.perf_counter() - t))
print(json.dumps({"prompt_tokens": len(prompt), "pp_tok_s": statistics.median(pp), "tg_tok_s": statistics.median(tg),
                  "library": __import__("llama_cpp").__file__}))
"""


def measure(site: str | None, repeat: int) -> dict[str, object]:
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = os.pathsep.join([site, env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", CHILD, str(bundled_gguf()), str(repeat)], capture_output=True,
                          text=True, env=env, timeout=900)
    if done.returncode != 0:
        return {"error": f"exit {done.returncode}" + (" (SIGILL)" if done.returncode == -4 else "")
                + f": {done.stderr.strip()[-200:]}"}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def installed_level() -> str:
    """The level `scripts/llama_build.py` chooses (and so installed) on this machine."""
    script = Path(__file__).parents[1] / "scripts" / "llama_build.py"
    done = subprocess.run([sys.executable, str(script), "--print"], capture_output=True, text=True, check=True)
    return str(json.loads(done.stdout)["level"])


def build_times() -> dict[str, float]:
    out = {}
    for info in (Path.home() / ".cache" / "guimem" / "wheels").glob("*/build.json"):
        data = json.loads(info.read_text())
        out[str(data["level"])] = float(data["build_s"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", action="append", default=[], help="NAME=DIR of another build (pip --target)")
    parser.add_argument("--build-s", action="append", default=[], help="NAME=SECONDS: that build's build time")
    parser.add_argument("--repeat", type=int, default=3)
    ns = parser.parse_args()
    cpu = cpu_model()
    print(f"machine: {cpu}, {os.cpu_count()} cores; SmolLM2-135M Q4_1, 2 threads, 256-token prompt, 64 generated")
    times = build_times() | {k: float(v) for k, v in (s.split("=", 1) for s in ns.build_s)}
    builds = [("installed", None)] + [tuple(s.split("=", 1)) for s in ns.site]
    base: dict[str, object] | None = None
    for name, site in builds:
        got = measure(site, ns.repeat)
        if "error" in got:
            print(f"{name:>10}: {got['error']}")
            continue
        base = base or got
        level = installed_level() if name == "installed" else name
        pp_ratio = float(got["pp_tok_s"]) / float(base["pp_tok_s"])
        print(f"{name:>10}: prompt {got['pp_tok_s']:7.0f} tok/s ({pp_ratio:.2f}x)"
              f"  generation {got['tg_tok_s']:6.1f} tok/s ({float(got['tg_tok_s']) / float(base['tg_tok_s']):.2f}x)"
              f"  build {times.get(level, float('nan')):.0f} s  [{got['library']}]")


if __name__ == "__main__":
    main()
