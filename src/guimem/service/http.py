"""The HTTP API (FastAPI): thin routes over `MemoryService`, plus the memory inspector page.

- `guimem.service.guard.Guard` checks every request first: loopback-only Host/Origin without a
  key, the API key (``Authorization: Bearer <key>`` or ``X-API-Key``) with one, JSON content type
  on every POST, the body size while streaming, and strict JSON; it adds a Content-Security-Policy.
- Errors are typed JSON, one shape for every 4xx: ``{"error", "message", "suggestion"}``; input
  is never echoed; nothing is stored by a refused request. No input reaches a 5xx.
- Request models forbid unknown fields; the OpenAPI document lists the security schemes and every
  status each route returns.
- Endpoints are plain ``def``: FastAPI runs them in its thread pool; the service serialises them.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Path, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import APIKeyHeader, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from guimem.errors import (
    ConfigError,
    ConflictError,
    DataError,
    FileConflictError,
    GuimemError,
    LifecycleError,
    NotFoundError,
    UnknownBackendError,
)
from guimem.service.core import MemoryService
from guimem.service.guard import Guard, GuardSettings
from guimem.service.models import (
    EventView,
    ItemDetail,
    ItemSummary,
    LearnReply,
    RecallReply,
    RecallRequest,
    RunTraces,
    Stats,
    TransferReply,
)
from guimem.service.schema import nul_free_requests
from guimem.service.views import episodes_view, graph_view, runs_view, screenshot_file
from guimem.types import ItemKind, ItemStatus, Trajectory

STATUS = {NotFoundError: 404, LifecycleError: 409, ConflictError: 409, FileConflictError: 409, DataError: 422,
          UnknownBackendError: 400, ConfigError: 400}
ITEM_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$"
# A method as a run folder names its traces: a registered name, or a user's import path (pkg.mod:Class).
METHOD_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63}){0,7}(:[A-Za-z_][A-Za-z0-9_]{0,63})?$"
# A file inside the data directory: relative segments that never start with a dot, ending in .jsonl.
DATA_FILE = r"^([A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}/){0,4}[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}\.jsonl$"


class ErrorBody(BaseModel):
    """Every 4xx answer."""

    error: str
    message: str
    suggestion: str | None = None


def _documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    meaning = {400: "Malformed request (not JSON, NUL bytes, NaN, lone surrogates) or a bad argument",
               401: "Missing or wrong API key", 403: "A non-loopback Host or Origin while no API key is set",
               404: "No such item, trace or file", 409: "The change conflicts with the item's state or a file",
               413: "Body over the size limit", 415: "The body is not application/json",
               422: "The body does not match the schema, or the data is not valid"}
    return {c: {"model": ErrorBody, "description": meaning[c]} for c in codes}


READ = _documented(400, 401, 403, 422)
WRITE = _documented(400, 401, 403, 413, 415, 422)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LearnRequest(_Strict):
    """Episodes to learn from, in one transaction."""

    trajectories: list[Trajectory] = Field(max_length=1000)
    end_round: bool = False


class PathRequest(_Strict):
    """A ``.jsonl`` file inside the service's data directory, relative to it."""

    path: str = Field(min_length=7, max_length=330, pattern=DATA_FILE,
                      examples=["exports/steer.jsonl"])


class CurationRequest(_Strict):
    """Why an item is admitted or retired by hand."""

    reason: str = Field(default="manual", max_length=1000)


class EndRoundRequest(_Strict):
    """A round boundary takes no arguments: send an empty object."""


def strict(model: type[BaseModel]) -> Any:
    """A dependency that validates the raw body against ``model`` in strict JSON mode.

    FastAPI validates bodies in lax Python mode (``0`` becomes ``False``, ``false`` becomes ``0``);
    the schema promises more, so the body is also checked strictly, as JSON Schema reads it
    (where ``2.0`` is an integer).
    """
    async def check(request: Request) -> None:
        try:
            value = _integral(json.loads(await request.body() or b"null"))
            model.model_validate_json(json.dumps(value), strict=True)
        except ValidationError as exc:
            raise RequestValidationError(exc.errors(include_url=False, include_input=False)) from None
        except (ValueError, RecursionError):  # the guard bounds nesting first; this is defence in depth
            raise StarletteHTTPException(400, "the body is not strict JSON") from None

    return Depends(check)


def _integral(value: Any) -> Any:
    """Floats with no fractional part as ints (JSON Schema's ``integer`` includes ``2.0``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_integral(v) for v in value]
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    return value


def _error(status: int, error: str, message: str, suggestion: str | None = None) -> JSONResponse:
    return JSONResponse(ErrorBody(error=error, message=message, suggestion=suggestion).model_dump(),
                        status_code=status)


def _first_problem(exc: RequestValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "the request does not match the schema"
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
    return f"{where or 'body'}: {first.get('msg', 'invalid')}"[:300]


def public_message(exc: GuimemError, folders: tuple[FilePath, ...] = ()) -> str:
    """What a 4xx says: never an id from the request, never the absolute path of a served folder."""
    if isinstance(exc, NotFoundError):
        return f"no such {exc.what}"
    if isinstance(exc, LifecycleError):
        return f"transition {exc.current} -> {exc.target} is not allowed"
    message = exc.message
    for folder in folders:
        for shown in dict.fromkeys((str(folder.resolve()), str(folder))):
            message = message.replace(shown + "/", "").replace(shown, "the served folder")
    return message


def _install_error_handlers(app: FastAPI, folders: tuple[FilePath, ...] = ()) -> None:
    @app.exception_handler(GuimemError)
    def on_error(request: Request, exc: GuimemError) -> JSONResponse:
        status = next((code for cls, code in STATUS.items() if isinstance(exc, cls)), 400)
        return _error(status, type(exc).__name__, public_message(exc, folders), exc.suggestion)

    @app.exception_handler(RequestValidationError)
    def on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(422, "ValidationError", _first_problem(exc), "see /openapi.json for the request schema")

    @app.exception_handler(StarletteHTTPException)
    def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = {404: "no such route", 405: "method not allowed"}.get(exc.status_code, str(exc.detail))
        response = _error(exc.status_code, "HTTPError", message)
        response.headers.update(exc.headers or {})  # 405 says which methods are allowed
        return response


class _API(FastAPI):
    """FastAPI whose OpenAPI document declares request strings NUL-free, as the guard enforces."""

    def openapi(self) -> dict[str, Any]:
        """The document, built once (`guimem.service.schema.nul_free_requests`)."""
        if self.openapi_schema is None:
            self.openapi_schema = nul_free_requests(super().openapi())
        return self.openapi_schema


def create_app(service: MemoryService, api_key: str | None = None, max_body_bytes: int = 5_000_000,
               run_dir: FilePath | None = None, insecure: bool = False) -> FastAPI:
    """The FastAPI application serving ``service`` (wrapped by the `Guard`)."""
    app = _API(title="guimem", version="0.1.0", docs_url=None, redoc_url=None,
               description="Long-term memory for frozen GUI agents: recall before each step, learn after each "
                           "episode, consolidate at round boundaries. Authenticate with "
                           "`Authorization: Bearer <key>` or `X-API-Key: <key>` when the server has a key.")
    _install_error_handlers(app, tuple(f for f in (service.settings.data_dir, run_dir) if f is not None))
    secured = [Security(HTTPBearer(auto_error=False, scheme_name="bearer")),
               Security(APIKeyHeader(name="X-API-Key", auto_error=False, scheme_name="apiKey"))] if api_key else []

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "method": service.memory.name}

    _memory_routes(app, service, secured)
    _item_routes(app, service, secured)
    _inspector_routes(app, service, run_dir, secured)
    posts = tuple(r.path_regex for r in app.routes if isinstance(r, APIRoute) and "POST" in (r.methods or set()))
    app.add_middleware(Guard, settings=GuardSettings(api_key=api_key, max_body_bytes=max_body_bytes,
                                                     any_host=insecure, post_routes=posts))
    return app


def _memory_routes(app: FastAPI, service: MemoryService, secured: list[Any]) -> None:
    @app.post("/v1/recall", response_model=RecallReply, responses=WRITE,
              dependencies=[*secured, strict(RecallRequest)])
    def recall(request: RecallRequest) -> RecallReply:
        return service.recall(request)

    @app.post("/v1/learn", response_model=LearnReply, responses=WRITE, dependencies=[*secured, strict(LearnRequest)])
    def learn(request: LearnRequest) -> LearnReply:
        return service.learn(request.trajectories, end_round=request.end_round)

    @app.post("/v1/end_round", response_model=Stats, responses=WRITE,
              dependencies=[*secured, strict(EndRoundRequest)])
    def end_round(request: EndRoundRequest) -> Stats:
        return service.end_round()

    @app.get("/v1/stats", response_model=Stats, responses=READ, dependencies=secured)
    def stats() -> Stats:
        return service.stats()


ItemId = Annotated[str, Path(pattern=ITEM_ID, max_length=200)]


def _item_routes(app: FastAPI, service: MemoryService, secured: list[Any]) -> None:
    @app.get("/v1/items", response_model=list[ItemSummary], responses=READ, dependencies=secured)
    def list_items(kind: Annotated[ItemKind | None, Query(description="What an item is, or its stored kind")] = None,
                   status: Annotated[ItemStatus | None, Query()] = None) -> list[ItemSummary]:
        return service.list_items(kind.value if kind else None, status.value if status else None)

    @app.get("/v1/items/{item_id}", response_model=ItemDetail, responses={**READ, **_documented(404)},
             dependencies=secured)
    def show(item_id: ItemId) -> ItemDetail:
        return service.show(item_id)

    @app.get("/v1/items/{item_id}/history", response_model=list[EventView], responses={**READ, **_documented(404)},
             dependencies=secured)
    def history(item_id: ItemId) -> list[EventView]:
        return service.history(item_id)

    curation = {**WRITE, **_documented(404, 409)}
    curating = [*secured, strict(CurationRequest)]

    @app.post("/v1/items/{item_id}/admit", response_model=ItemSummary, responses=curation, dependencies=curating)
    def admit(item_id: ItemId, request: CurationRequest) -> ItemSummary:
        return service.set_status(item_id, "admitted", request.reason)

    @app.post("/v1/items/{item_id}/retire", response_model=ItemSummary, responses=curation, dependencies=curating)
    def retire(item_id: ItemId, request: CurationRequest) -> ItemSummary:
        return service.set_status(item_id, "retired", request.reason)

    @app.post("/v1/export", response_model=TransferReply, responses={**WRITE, **_documented(409)},
              dependencies=[*secured, strict(PathRequest)])
    def export(request: PathRequest) -> TransferReply:
        return service.export(FilePath(request.path))

    @app.post("/v1/import", response_model=TransferReply, responses={**WRITE, **_documented(404, 409)},
              dependencies=[*secured, strict(PathRequest)])
    def import_(request: PathRequest) -> TransferReply:
        return service.import_(FilePath(request.path))


def _static(name: str) -> str:
    return (resources.files("guimem.service") / "static" / name).read_text(encoding="utf-8")


def _inspector_routes(app: FastAPI, service: MemoryService, run_dir: FilePath | None, secured: list[Any]) -> None:
    @app.get("/v1/graph", responses=READ, dependencies=secured)
    def graph() -> dict[str, list[dict[str, object]]]:
        return graph_view(service)

    @app.get("/v1/runs", responses=READ, dependencies=secured)
    def runs() -> list[RunTraces]:
        return runs_view(run_dir)

    @app.get("/v1/runs/{method}/{round_index}", responses={**READ, **_documented(404)}, dependencies=secured)
    def episodes(method: Annotated[str, Path(pattern=METHOD_NAME)],
                 round_index: Annotated[int, Path(ge=0, le=100_000)]) -> list[dict[str, object]]:
        return episodes_view(run_dir, method, round_index)

    @app.get("/v1/runs/{method}/{round_index}/{episode}/{step}/screenshot", response_class=FileResponse,
             responses={**READ, **_documented(404), 200: {"content": {"image/png": {}}}}, dependencies=secured)
    def screenshot(method: Annotated[str, Path(pattern=METHOD_NAME)],
                   round_index: Annotated[int, Path(ge=0, le=100_000)],
                   episode: Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,64}$")],
                   step: Annotated[int, Path(ge=0, le=100_000)]) -> FileResponse:
        return FileResponse(screenshot_file(run_dir, method, round_index, episode, step), media_type="image/png")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def inspector() -> str:
        return _static("inspector.html")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(status_code=204)

    @app.get("/static/inspector.js", include_in_schema=False)
    def inspector_js() -> Response:
        return Response(_static("inspector.js"), media_type="text/javascript")

    @app.get("/static/inspector.css", include_in_schema=False)
    def inspector_css() -> Response:
        return Response(_static("inspector.css"), media_type="text/css")
