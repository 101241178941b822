"""Not collected by the suite (no ``test_`` prefix): the process `test_executors_abort.py` runs, a worker pool whose
idle workers are killed with SIGTERM, as a signal to the whole process group kills them."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time

import guimem.harness.executors as executors

if __name__ == "__main__":
    executors.LOCK_WAIT_S = 1.0
    pool = mp.get_context("spawn").Pool(2)
    pool.map(abs, [1, 2])
    time.sleep(0.5)  # both idle: one waits for work holding the task queue's lock
    for worker in pool._pool:  # type: ignore[attr-defined]
        os.kill(worker.pid, signal.SIGTERM)
    time.sleep(0.5)
    held = not pool._inqueue._rlock.acquire(timeout=0.5)  # type: ignore[attr-defined]
    print(f"lock held by a dead worker: {held}", flush=True)
    stop = pool.terminate if sys.argv[1:] == ["plain"] else lambda: executors.terminate(pool)
    stop()
    pool.join()
    print("stopped", flush=True)
