"""e5 screen embedding on a busy machine: OpenMP threads that spin while they wait against threads that sleep.

guimem sets ``OMP_WAIT_POLICY=PASSIVE`` before the e5 engine loads (`guimem.embeddings.e5._passive_openmp`).
This measures why, in one run: for each load (no extra load, then ``--busy`` processes spinning on the CPU, as
evaluation workers, browsers and desktop apps do) and each policy (unset: libgomp's default, what guimem ran
with before; ``ACTIVE``: spin; ``PASSIVE``: sleep, what guimem sets), a fresh process embeds ``--texts`` screen
signatures of about 40 words one at a time, and reports p50 and p95 in ms and the ratios unset / PASSIVE.

Usage: python benchmarks/e5_under_load.py [--busy 2] [--texts 40] [--spin 1000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys

PROBE = r"""
import json, os, sys, time
import guimem.embeddings.e5 as e5mod
if os.environ.get("OMP_WAIT_POLICY") is None and os.environ.get("GOMP_SPINCOUNT") is None:  # libgomp's default
    e5mod._passive_openmp = lambda: None
from guimem.embeddings.e5 import E5Embedder
e = E5Embedder()
e.embed(["warm up"])
ms = []
for i in range(int(sys.argv[1])):
    text = "app: mousepad\nscreen: notes.txt - Mousepad\n" + "\n".join(
        f"menuitem {w}" for w in ("File", "Edit", "Search", "View", "Document", "Help")) + f"\ntextbox [] =filled {i}"
    text = (text + "\n") * 2
    t = time.perf_counter()
    e.embed([text])
    ms.append((time.perf_counter() - t) * 1000)
ms.sort()
print(json.dumps([ms[len(ms) // 2], ms[max(0, int(0.95 * len(ms)) - 1)]]))
"""


def _spin() -> None:
    while True:
        pass


def _probe(policy: str, texts: int) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    if policy.startswith("spin"):  # a short spin, then sleep (libgomp's GOMP_SPINCOUNT)
        env["GOMP_SPINCOUNT"] = policy.removeprefix("spin")
    elif policy != "unset":
        env["OMP_WAIT_POLICY"] = policy
    out = subprocess.run([sys.executable, "-c", PROBE, str(texts)], env=env, capture_output=True, text=True,
                         check=True, timeout=900)
    p50, p95 = json.loads(out.stdout.strip().splitlines()[-1])
    return p50, p95


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=2, help="processes spinning on the CPU in the loaded case")
    parser.add_argument("--texts", type=int, default=40)
    parser.add_argument("--spin", type=int, default=0,
                        help="also a short spin before sleeping: GOMP_SPINCOUNT=N (PASSIVE is N=0)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load before: {os.getloadavg()[0]:.2f}")
    print("| extra load | unset (libgomp's default) p50 / p95 ms | ACTIVE p50 / p95 ms | PASSIVE (guimem) p50 / p95 ms "
          f"{f'| GOMP_SPINCOUNT={args.spin} p50 / p95 ms ' if args.spin else ''}"
          "| unset / PASSIVE p50 | unset / PASSIVE p95 |")
    print("|---|---:|---:|---:|" + ("---:|" if args.spin else "") + "---:|---:|")
    for busy in (0, args.busy):
        spinners = [mp.Process(target=_spin, daemon=True) for _ in range(busy)]
        for s in spinners:
            s.start()
        try:
            u50, u95 = _probe("unset", args.texts)
            a50, a95 = _probe("ACTIVE", args.texts)
            p50, p95 = _probe("PASSIVE", args.texts)
            s50, s95 = _probe(f"spin{args.spin}", args.texts) if args.spin else (0.0, 0.0)
        finally:
            for s in spinners:
                s.terminate()
                s.join()
        spun = f"| {s50:.1f} / {s95:.1f} " if args.spin else ""
        print(f"| {busy} spinning processes | {u50:.1f} / {u95:.1f} | {a50:.1f} / {a95:.1f} | {p50:.1f} / {p95:.1f} "
              f"{spun}| {u50 / p50:.2f} | {u95 / p95:.2f} |")


if __name__ == "__main__":
    main()
