"""Run a function in a child process, so a native library that crashes (SIGILL, SIGSEGV) fails one test
with a message instead of ending the whole test run.

The child is *spawned* (a fresh interpreter, not a fork: llama.cpp and the e5 engine run OpenMP
threads, and a forked child of a process with running OpenMP threads can hang). ``fn`` must be a
module-level function and its arguments and result picklable.
"""

from __future__ import annotations

import multiprocessing
import signal
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TypeVar, cast

T = TypeVar("T")


class ChildCrashedError(AssertionError):
    """The child process died (of a signal, or exited) before it returned a result."""


def _child(conn: Connection, fn: Callable[..., object], args: tuple[object, ...]) -> None:
    try:
        conn.send((True, fn(*args)))
    except BaseException as exc:  # every failure goes back to the parent as text: the test's own message
        conn.send((False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    finally:
        conn.close()


def run_isolated(fn: Callable[..., T], *args: object, timeout_s: float = 600.0) -> T:
    """``fn(*args)`` in a spawned child; its result, or the child's failure raised here.

    Raises:
        AssertionError: ``fn`` raised (the message holds the child's traceback).
        ChildCrashedError: The child died without a result (its signal is named: SIGILL means a native
            library built for another processor) or did not finish in ``timeout_s``.
    """
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, args), daemon=True)
    proc.start()
    send.close()
    try:
        if not receive.poll(timeout_s):
            proc.kill()
            raise ChildCrashedError(f"{fn.__name__} did not finish in {timeout_s:.0f}s in its child process")
        ok, value = receive.recv()
    except EOFError:
        proc.join(10)
        code = proc.exitcode
        how = f"died of {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited with {code}"
        hint = " (an illegal instruction: a native library built for another processor)" \
            if code == -signal.SIGILL else ""
        raise ChildCrashedError(f"{fn.__name__}: its child process {how}{hint}") from None
    finally:
        receive.close()
    proc.join(10)
    if not ok:
        raise AssertionError(f"in a child process: {value}")
    return cast(T, value)
