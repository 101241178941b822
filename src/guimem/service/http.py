"""The HTTP API (FastAPI): thin routes over `MemoryService`, plus the memory inspector page.

- Every route but ``/health`` requires the API key when one is configured (``GUIMEM_API_KEY``),
  as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``.
- Request bodies over ``max_body_bytes`` are refused with 413 before they are read.
- Errors are typed JSON: ``{"error": "<ExceptionType>", "message": ..., "suggestion": ...}`` with a
  4xx status; nothing is stored by a refused request.
- Endpoints are plain ``def``: FastAPI runs them in its thread pool; the service serialises them.
"""

from __future__ import annotations

import hmac
import json
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import Body, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, Field
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.responses import Response

from guimem.errors import (
    ConfigError,
    ConflictError,
    DataError,
    GuimemError,
    LifecycleError,
    NotFoundError,
    UnknownBackendError,
)
from guimem.service.core import MemoryService
from guimem.service.models import (
    EventView,
    ItemDetail,
    ItemSummary,
    LearnReply,
    RecallReply,
    RecallRequest,
    Stats,
    TransferReply,
)
from guimem.types import Trajectory, iter_trajectories

STATUS = {NotFoundError: 404, LifecycleError: 409, ConflictError: 409, DataError: 422, UnknownBackendError: 400,
          ConfigError: 400}


class LearnRequest(BaseModel):
    """Episodes to learn from, in one transaction."""

    trajectories: list[Trajectory] = Field(max_length=1000)
    end_round: bool = False


class PathRequest(BaseModel):
    """A file inside the service's data directory."""

    path: str = Field(min_length=1, max_length=1000)


class CurationRequest(BaseModel):
    """Why an item is admitted or retired by hand."""

    reason: str = Field(default="manual", max_length=1000)


def _error(status: int, exc: GuimemError | None, message: str = "") -> JSONResponse:
    body = {"error": type(exc).__name__ if exc else "HTTPError", "message": exc.message if exc else message,
            "suggestion": exc.suggestion if exc else None}
    return JSONResponse(body, status_code=status)


class _Guard(BaseHTTPMiddleware):
    def __init__(self, app: Any, api_key: str | None, max_body_bytes: int) -> None:
        super().__init__(app)
        self.api_key = api_key
        self.max_body_bytes = max_body_bytes

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if self.api_key and request.url.path != "/health":
            given = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix(
                "Bearer ").strip()
            if not hmac.compare_digest(given.encode(), self.api_key.encode()):
                return _error(401, None, "missing or wrong API key (Authorization: Bearer <key> or X-API-Key)")
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            return _error(413, None, f"request body over {self.max_body_bytes} bytes")
        if length is None and request.method in ("POST", "PUT", "PATCH"):
            body = await request.body()
            if len(body) > self.max_body_bytes:
                return _error(413, None, f"request body over {self.max_body_bytes} bytes")
        return await call_next(request)


def _graph(service: MemoryService) -> dict[str, list[dict[str, object]]]:
    nodes = [{"id": r.id, "label": json.loads(r.body).get("signature", "").splitlines()[1:2]}
             for r in service.store.query(service.namespace, "node")]
    edges = []
    for r in service.store.query(service.namespace, "edge", ["active"]):
        body = json.loads(r.body)
        edges.append({"id": r.id, "source": body["source"], "target": body["target"], "success": body["success"],
                      "text": body["text"]})
    return {"nodes": nodes, "edges": edges}


def _runs(run_dir: Path | None) -> list[dict[str, object]]:
    if run_dir is None or not (run_dir / "traces").exists():
        return []
    return [{"method": m.name, "rounds": sorted(int(p.stem.split("-")[1]) for p in m.glob("round-*.jsonl"))}
            for m in sorted((run_dir / "traces").iterdir()) if m.is_dir()]


def _episodes(run_dir: Path | None, method: str, round_index: int) -> list[dict[str, object]]:
    if run_dir is None:
        raise ConfigError("no run directory is served", suggestion="start with guimem serve --run DIR")
    path = (run_dir / "traces" / method / f"round-{round_index}.jsonl").resolve()
    if not path.is_relative_to(run_dir.resolve()) or not path.exists():
        raise NotFoundError("trace", f"{method}/round-{round_index}")
    out = []
    for t in iter_trajectories(path):
        out.append({"episode": t.episode_id, "task": t.task.id, "seed": t.task.seed, "success": t.outcome.success,
                    "steps": [{"index": s.index, "action": s.action.describe(), "injected": s.injection.text,
                               "tokens": s.injection.tokens, "abstained": s.injection.abstained,
                               "error": s.error.message if s.error else None} for s in t.steps]})
    return out


def create_app(service: MemoryService, api_key: str | None = None, max_body_bytes: int = 5_000_000,
               run_dir: Path | None = None) -> FastAPI:
    """The FastAPI application serving ``service``."""
    app = FastAPI(title="guimem", version="0.1.0",
                  description="Long-term memory for frozen GUI agents: recall before each step, learn after each "
                              "episode, consolidate at round boundaries.")
    app.add_middleware(_Guard, api_key=api_key, max_body_bytes=max_body_bytes)

    @app.exception_handler(GuimemError)
    def on_error(request: Request, exc: GuimemError) -> JSONResponse:
        status = next((code for cls, code in STATUS.items() if isinstance(exc, cls)), 400)
        return _error(status, exc)

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "method": service.memory.name}

    _memory_routes(app, service)
    _item_routes(app, service)
    _inspector_routes(app, service, run_dir)
    return app


def _memory_routes(app: FastAPI, service: MemoryService) -> None:
    @app.post("/v1/recall", response_model=RecallReply)
    def recall(request: RecallRequest) -> RecallReply:
        return service.recall(request)

    @app.post("/v1/learn", response_model=LearnReply)
    def learn(request: LearnRequest) -> LearnReply:
        reply = service.learn(request.trajectories)
        if request.end_round:
            service.end_round()
        return reply

    @app.post("/v1/end_round", response_model=Stats)
    def end_round() -> Stats:
        return service.end_round()

    @app.get("/v1/stats", response_model=Stats)
    def stats() -> Stats:
        return service.stats()



def _item_routes(app: FastAPI, service: MemoryService) -> None:
    @app.get("/v1/items", response_model=list[ItemSummary])
    def list_items(kind: str | None = None, status: str | None = None) -> list[ItemSummary]:
        return service.list_items(kind, status)

    @app.get("/v1/items/{item_id}", response_model=ItemDetail)
    def show(item_id: str) -> ItemDetail:
        return service.show(item_id)

    @app.get("/v1/items/{item_id}/history", response_model=list[EventView])
    def history(item_id: str) -> list[EventView]:
        return service.history(item_id)

    @app.post("/v1/items/{item_id}/admit", response_model=ItemSummary)
    def admit(item_id: str, request: CurationRequest = Body(default_factory=CurationRequest)) -> ItemSummary:
        return service.set_status(item_id, "admitted", request.reason)

    @app.post("/v1/items/{item_id}/retire", response_model=ItemSummary)
    def retire(item_id: str, request: CurationRequest = Body(default_factory=CurationRequest)) -> ItemSummary:
        return service.set_status(item_id, "retired", request.reason)

    @app.post("/v1/export", response_model=TransferReply)
    def export(request: PathRequest) -> TransferReply:
        return service.export(Path(request.path))

    @app.post("/v1/import", response_model=TransferReply)
    def import_(request: PathRequest) -> TransferReply:
        return service.import_(Path(request.path))



def _inspector_routes(app: FastAPI, service: MemoryService, run_dir: Path | None) -> None:
    @app.get("/v1/graph")
    def graph() -> dict[str, list[dict[str, object]]]:
        return _graph(service)

    @app.get("/v1/runs")
    def runs() -> list[dict[str, object]]:
        return _runs(run_dir)

    @app.get("/v1/runs/{method}/{round_index}")
    def episodes(method: str, round_index: int) -> list[dict[str, object]]:
        return _episodes(run_dir, method, round_index)

    @app.get("/", response_class=HTMLResponse)
    def inspector() -> str:
        return (resources.files("guimem.service") / "inspector.html").read_text(encoding="utf-8")
