"""A memory served by ``guimem serve --http``, spoken to over its HTTP API (the same operations as a local one).

Only what an agent loop needs: recall before a step, learn after an episode, the round boundary. The server owns
the method and the store; what it queues is learned at its next round boundary, as every method's contract says.
"""

from __future__ import annotations

from typing import Any

import httpx

from guimem.errors import ConfigError, StoreError
from guimem.memory.base import LearnReport, RecallQuery
from guimem.types import Injection, Trajectory


def is_service_url(store: str) -> bool:
    """Whether ``store`` names a running ``guimem serve`` (an ``http(s)://`` URL), not a store."""
    return store.startswith(("http://", "https://"))


class ServiceMemory:
    """The memory a ``guimem serve`` at ``url`` holds, with the `Memory` calls an agent loop makes.

    Args:
        url: The server's root, e.g. ``http://127.0.0.1:8765``.
        api_key: The server's ``GUIMEM_API_KEY``, when it has one.
        timeout_s: Per request.

    Raises:
        StoreError: The server cannot be reached or failed.
        ConfigError: The server refused a request (a key, a malformed request).
    """

    def __init__(self, url: str, api_key: str | None = None, timeout_s: float = 30.0) -> None:
        headers = {"X-API-Key": api_key} if api_key else {}
        self.url = url.rstrip("/")
        self._client = httpx.Client(base_url=self.url, timeout=timeout_s, headers=headers)
        self._method = str(self._call("GET", "/v1/stats").get("method", ""))

    @property
    def name(self) -> str:
        """The method the server runs."""
        return self._method

    def recall(self, query: RecallQuery) -> Injection:
        """What the server's memory shows the agent at this step."""
        body = {"goal": query.task.goal or query.task.id, "observation": query.observation.model_dump(mode="json"),
                "task_id": query.task.id, "app": query.task.app, "params": dict(query.task.params),
                "step": query.step, "slot": query.slot}
        return Injection.model_validate(self._call("POST", "/v1/recall", body).get("injection"))

    def learn(self, trajectory: Trajectory) -> LearnReport:
        """Hand the server one finished episode (queued for its next round boundary)."""
        reply = self._call("POST", "/v1/learn", {"trajectories": [trajectory.model_dump(mode="json")]})
        return LearnReport(added=int(reply.get("added", 0)), merged=int(reply.get("merged", 0)),
                           dropped=int(reply.get("dropped", 0)), queued=int(reply.get("queued", 0)))

    def end_round(self) -> None:
        """The server's round boundary: it learns what is queued and consolidates."""
        self._call("POST", "/v1/end_round", {})

    def committed_round(self) -> int:
        """The server's last committed round (-1 when none)."""
        return int(self._call("GET", "/v1/stats").get("committed_round_index", -1))

    def close(self) -> None:
        """Close the connection (the server keeps running)."""
        self._client.close()

    def _call(self, verb: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            response = self._client.request(verb, path, json=body)
        except httpx.TransportError as exc:
            raise StoreError(f"guimem serve at {self.url} cannot be reached: {type(exc).__name__}",
                             suggestion="start it with `guimem serve --http`, or check the URL") from exc
        if response.status_code >= 500:
            raise StoreError(f"guimem serve at {self.url} failed on {path}: HTTP {response.status_code}")
        try:
            reply = response.json()
        except ValueError:
            reply = None
        if response.status_code >= 400 or not isinstance(reply, dict):
            detail = reply.get("message", "") if isinstance(reply, dict) else ""
            raise ConfigError(f"guimem serve refused {path}: HTTP {response.status_code} {str(detail)[:300]}",
                              suggestion="pass api_key= when the server has GUIMEM_API_KEY set")
        return reply
