"""Connection limits of ``guimem serve --http``: what keeps half-open connections from stopping the server.

uvicorn bounds neither how long a client may take to send its request (``timeout_keep_alive`` covers
only the idle time between requests, and every byte resets it) nor how many connections it holds, and
``limit_concurrency`` answers 503, which this service never does. So the HTTP protocol here is uvicorn's
h11 protocol with three additions:

- **Deadlines.** A request's headers must arrive within ``header_timeout_s`` of the connection (or of the
  first byte after a keep-alive pause), and its body must not stall for ``body_timeout_s``; otherwise
  the connection is closed (no answer: the client is not sending one).
- **A connection cap below the descriptor limit.** Past ``max_connections`` the oldest connections that
  have not sent a whole request are closed to make room; the accept backlog is kept small, so a burst
  cannot run the process out of descriptors before they are closed.
- **Quiet logs.** Repeated log records (per logger and message) are limited to a few per window.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from dataclasses import dataclass
from typing import Any, cast

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a client may take, and how many connections are held.

    Attributes:
        header_timeout_s: Time for a request's line and headers.
        body_timeout_s: Longest pause within its body, once the headers are in.
        max_connections: Connections held at once (see `for_descriptor_limit`).
        backlog: Connections accepted in one go before any is looked at.
    """

    header_timeout_s: float = 10.0
    body_timeout_s: float = 10.0
    max_connections: int = 1000
    backlog: int = 64

    @classmethod
    def for_descriptor_limit(cls, **overrides: Any) -> ConnectionLimits:
        """Limits that leave a quarter of this process's descriptors (at least 48) for the store, threads, logs."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        soft = 65_536 if soft == resource.RLIM_INFINITY else soft
        reserve = max(48, soft // 4)
        cap = max(8, min(soft - reserve, 10_000))
        return cls(**{"max_connections": cap, "backlog": max(4, min(64, reserve // 2)), **overrides})


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with request deadlines and a connection cap (set ``limits`` on a subclass)."""

    limits = ConnectionLimits()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Start the header deadline; make room when the cap is reached."""
        super().connection_made(cast(asyncio.Transport, transport))  # a TCP server hands stream transports
        self._deadline: asyncio.TimerHandle | None = None
        self._waiting = "nothing"
        self._since = time.monotonic()
        self._arm("headers", self.limits.header_timeout_s)
        if len(self.connections) > self.limits.max_connections:
            self._make_room()

    def data_received(self, data: bytes) -> None:
        """Feed the request on, then move the deadline to what the request still owes."""
        super().data_received(data)
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            if self._waiting != "headers":
                self._arm("headers", self.limits.header_timeout_s)
        elif cycle.more_body:  # every chunk of the body moves its deadline: a slow upload is fine, a stalled one is not
            self._arm("body", self.limits.body_timeout_s)
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the deadline with the connection."""
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, waiting: str, seconds: float) -> None:
        self._disarm()
        self._waiting = waiting
        self._since = time.monotonic()
        self._deadline = self.loop.call_later(seconds, self._expire)

    def _disarm(self) -> None:
        deadline = getattr(self, "_deadline", None)
        if deadline is not None:
            deadline.cancel()
        self._deadline = None
        self._waiting = "nothing"

    def _expire(self) -> None:
        log.info("closing a connection that did not send its %s in time", self._waiting)
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def _make_room(self) -> None:
        """Close the oldest connections still waiting for a whole request; if there are none, this one."""
        excess = len(self.connections) - self.limits.max_connections
        idle = sorted((c for c in self.connections if isinstance(c, GuardedH11Protocol) and c is not self
                       and c._waiting != "nothing" and not c.transport.is_closing()), key=lambda c: c._since)
        for conn in idle[:max(excess, 1)]:
            conn.transport.close()
        if not idle:
            log.warning("connection cap (%d) reached with no idle connection to close: refusing one",
                        self.limits.max_connections)
            self.transport.close()


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedH11Protocol]:
    """The protocol class to give uvicorn (``Config(http=...)``) for these limits."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits})


class RepeatFilter(logging.Filter):
    """Let at most ``burst`` records with the same logger and message through per ``window_s``; count the rest
    and say how many were left out when the window turns (so a flood of "Too many open files" stays small)."""

    def __init__(self, burst: int = 5, window_s: float = 10.0) -> None:
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether to emit ``record``."""
        key = (record.name, str(record.msg)[:200])
        now = time.monotonic()
        start, count = self._seen.get(key, (now, 0))
        if now - start > self.window_s:
            if count > self.burst:
                record.msg = f"{record.msg} [{count - self.burst} similar messages left out in {self.window_s:.0f} s]"
            start, count = now, 0
        self._seen[key] = (start, count + 1)
        if len(self._seen) > 10_000:
            self._seen.clear()
        return count < self.burst


def quiet_logs(names: tuple[str, ...] = ("asyncio", "uvicorn", "uvicorn.error", "uvicorn.access")) -> RepeatFilter:
    """Install one `RepeatFilter` on the loggers a flood comes through (a logger's filter sees each record once)."""
    flt = RepeatFilter()
    for name in names:
        logging.getLogger(name).addFilter(flt)
    return flt
