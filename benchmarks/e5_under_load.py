"""e5 screen embedding on a busy machine: OpenMP threads that spin while they wait against threads that sleep.

guimem sets ``OMP_WAIT_POLICY=PASSIVE`` before the e5 engine loads (`guimem.embeddings.e5._passive_openmp`).
This measures why, in one run: for each load (no extra load, then ``--busy`` processes spinning on the CPU, as
evaluation workers, browsers and desktop apps do) and each policy (``ACTIVE``: spin, libgomp's behaviour when
nothing is set is close to it; ``PASSIVE``), a fresh process embeds ``--texts`` screen signatures of about
40 words one at a time, and reports p50 and p95 in ms and the ratio ACTIVE / PASSIVE.

Usage: python benchmarks/e5_under_load.py [--busy 2] [--texts 40]
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
import json, sys, time
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
    env = {**os.environ, "OMP_WAIT_POLICY": policy}
    out = subprocess.run([sys.executable, "-c", PROBE, str(texts)], env=env, capture_output=True, text=True,
                         check=True, timeout=900)
    p50, p95 = json.loads(out.stdout.strip().splitlines()[-1])
    return p50, p95


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=2, help="processes spinning on the CPU in the loaded case")
    parser.add_argument("--texts", type=int, default=40)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load before: {os.getloadavg()[0]:.2f}")
    print("| extra load | ACTIVE p50 / p95 ms | PASSIVE p50 / p95 ms | p50 ratio | p95 ratio |")
    print("|---|---:|---:|---:|---:|")
    for busy in (0, args.busy):
        spinners = [mp.Process(target=_spin, daemon=True) for _ in range(busy)]
        for s in spinners:
            s.start()
        try:
            a50, a95 = _probe("ACTIVE", args.texts)
            p50, p95 = _probe("PASSIVE", args.texts)
        finally:
            for s in spinners:
                s.terminate()
                s.join()
        print(f"| {busy} spinning processes | {a50:.1f} / {a95:.1f} | {p50:.1f} / {p95:.1f} | {a50 / p50:.2f} "
              f"| {a95 / p95:.2f} |")


if __name__ == "__main__":
    main()
