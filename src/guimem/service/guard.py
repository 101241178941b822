"""What stands between the network and the memory: an ASGI middleware every request passes first.

In order, for every HTTP request:

1. **Host and Origin.** Without an API key the service is for this machine only: a ``Host`` that
   is not loopback (DNS rebinding) or an ``Origin`` of another site (a web page posting to it)
   is refused with 403.
2. **API key.** With a key, every route but the public ones (``/health``, the inspector page and
   its static files, ``/openapi.json``) needs ``Authorization: Bearer <key>`` (that exact scheme)
   or ``X-API-Key: <key>``; anything else is 401.
3. **Content type.** A request with a body (every ``POST``) must say ``application/json`` (415),
   so a cross-site form or ``text/plain`` post cannot change memory.
4. **Body.** Read while streaming and refused with 413 the moment it passes the limit (nothing
   larger is ever buffered); it must be strict UTF-8 JSON (400): finite numbers, bounded nesting, no NUL or lone
   surrogates in strings.
5. **Headers.** Every response carries a strict Content-Security-Policy and no-sniff/no-referrer
   headers.

Errors use the service's one shape, ``{"error", "message", "suggestion"}``, and never echo input.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from guimem.types.strictjson import StrictJSONError, loads_strict

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC_PATHS = frozenset({"/health", "/", "/favicon.ico", "/openapi.json", "/static/inspector.js",
                          "/static/inspector.css"})
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data: blob:; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
LOOPBACK_NAMES = frozenset({"localhost", "localhost."})


class Refusal(Exception):  # noqa: N818 - a control-flow signal inside this module, never raised outside it
    """A request the guard answers itself."""

    def __init__(self, status: int, error: str, message: str, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.suggestion = suggestion


def error_body(error: str, message: str, suggestion: str | None = None) -> bytes:
    """The service's one error shape, as bytes."""
    return json.dumps({"error": error, "message": message, "suggestion": suggestion}).encode()


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (with or without a port, IPv6 in brackets)."""
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1:name.find("]")] if "]" in name else name[1:]
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def presented_keys(scope: Scope) -> list[str]:
    """The keys a request presents: ``X-API-Key``, and ``Authorization: Bearer <key>`` (strictly that scheme)."""
    keys = []
    key = _header(scope, b"x-api-key")
    if key:
        keys.append(key)
    scheme, _, token = (_header(scope, b"authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and token.strip() and " " not in token.strip():
        keys.append(token.strip())
    return keys


def check_json(body: bytes) -> None:
    """Refuse bodies that are not strict UTF-8 JSON (see `loads_strict`: finite numbers, nesting at most
    64 deep, no NUL characters or lone surrogates in strings).

    Raises:
        Refusal: 400, naming the problem without echoing the body.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refusal(400, "BadRequest", f"the body is not UTF-8 (byte {exc.start})") from None
    try:
        loads_strict(text)
    except StrictJSONError as exc:
        raise Refusal(400, "BadRequest", f"the body is not strict JSON: {exc}",
                      "send one JSON object as described in /openapi.json") from None


@dataclass
class GuardSettings:
    """How strict the guard is.

    Attributes:
        api_key: The key, or None (then only loopback hosts and origins are served).
        max_body_bytes: The largest body accepted.
        any_host: Without a key, accept any ``Host`` (``guimem serve --insecure``); cross-site
            origins stay refused.
        post_routes: Paths that take a JSON body; a POST elsewhere is left to the router (405).
    """

    api_key: str | None = None
    max_body_bytes: int = 5_000_000
    any_host: bool = False
    post_routes: tuple[re.Pattern[str], ...] = ()


class Guard:
    """The ASGI middleware described in this module's docstring."""

    def __init__(self, app: ASGIApp, settings: GuardSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []),
                                      *[(k, v) for k, v in SECURITY_HEADERS if k not in names]]
            await send(message)

        try:
            self._check_headers(scope)
            body = await self._read_body(scope, receive)
        except Refusal as refusal:
            await _respond(send_with_headers, refusal)
            return
        await self.app(scope, _replay(body, receive), send_with_headers)

    def _check_headers(self, scope: Scope) -> None:
        """`_check_request`, where a header value that makes any parser raise is a 400, never a 500."""
        try:
            self._check_request(scope)
        except Refusal:
            raise
        except Exception:  # a header value no parser expected: refuse it, whatever the parser raised
            raise Refusal(400, "BadRequest", "a header value is malformed") from None

    def _check_request(self, scope: Scope) -> None:
        path = scope.get("path", "")
        if "\x00" in path or "%00" in scope.get("raw_path", b"").decode("latin-1"):
            raise Refusal(400, "BadRequest", "the path holds a NUL byte")
        if self.settings.api_key is None:
            host = _header(scope, b"host") or ""
            if not self.settings.any_host and not is_loopback_host(host):
                raise Refusal(403, "Forbidden", "this service has no API key, so it answers only to loopback hosts",
                              "use http://127.0.0.1:PORT, or start it with GUIMEM_API_KEY set")
            origin = _header(scope, b"origin")
            if origin is not None and origin != "null" and not is_loopback_host(_origin_host(origin)):
                raise Refusal(403, "Forbidden", "requests from other sites' pages are refused",
                              "call the API from this machine, or set GUIMEM_API_KEY")
            if origin == "null":
                raise Refusal(403, "Forbidden", "requests from opaque origins are refused")
        elif path not in PUBLIC_PATHS:
            expected = self.settings.api_key.encode()
            if not any(hmac.compare_digest(k.encode(), expected) for k in presented_keys(scope)):
                raise Refusal(401, "Unauthorized", "missing or wrong API key",
                              "send Authorization: Bearer <key> or X-API-Key: <key>")
        if self._takes_json(scope):
            kind = (_header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
            if kind != "application/json":
                raise Refusal(415, "UnsupportedMediaType", "the body must be application/json",
                              "send Content-Type: application/json")

    def _takes_json(self, scope: Scope) -> bool:
        path = scope.get("path", "")
        return scope.get("method") == "POST" and any(r.match(path) for r in self.settings.post_routes)

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes:
        limit = self.settings.max_body_bytes
        declared = _header(scope, b"content-length")
        if declared is not None and (not (declared.strip().isascii() and declared.strip().isdigit())
                                     or int(declared) > limit):
            raise Refusal(413, "PayloadTooLarge", f"request body over {limit} bytes")
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            return b""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise Refusal(400, "BadRequest", "the client went away")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:  # stop reading: the rest of the body is never buffered
                raise Refusal(413, "PayloadTooLarge", f"request body over {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body.strip() and self._takes_json(scope):
            check_json(body)
        return body


def _origin_host(origin: str) -> str:
    """The host part of an ``Origin`` header; anything that does not parse is a 400, never a 500."""
    try:
        return urlsplit(origin).netloc
    except Exception:  # urlsplit raises ValueError on "http://[::1" and friends; refuse whatever it raises
        raise Refusal(400, "BadRequest", "the Origin header is not a URL") from None


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _respond(send: Send, refusal: Refusal) -> None:
    body = error_body(refusal.error, refusal.message, refusal.suggestion)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if refusal.status == 413:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
