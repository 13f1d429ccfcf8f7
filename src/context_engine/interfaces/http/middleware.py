"""The outermost HTTP middleware (plain ASGI, no per-request task): request id, body size limit, access log, HTTP
metrics, and the ``500`` envelope for unexpected errors (DESIGN.md §8, §9).

* ``request_id``: the caller's ``X-Request-ID`` when it is 1-64 characters of ``[A-Za-z0-9._:-]``, else a new
  random one; echoed in the ``X-Request-ID`` response header, in every error envelope and on every log line.
* Body size: ``Content-Length`` over the limit is refused before reading (``413``, ``WRT-4131``); a chunked body is
  counted while it is read and refused the same way once it passes the limit. Upload paths get their own limit.
* Body timing: a body that stops short of its ``Content-Length`` (no bytes for ``http.body_idle_timeout_s``), or
  that is not complete ``http.body_timeout_s`` after its first read however its bytes trickle in, is answered ``400``
  (``RET-4001`` on read routes, ``WRT-4002`` on write routes) and the connection closed, instead of holding the
  connection open for ever. A body longer than its ``Content-Length`` is cut there by the HTTP parser:
  the rest is not a valid next request and the server answers it ``400`` and closes.
* ``Server-Timing: engine;dur=<ms>, app;dur=<ms>`` on engine calls: the engine's own time and the whole server-side
  time, so a client can tell what the interface adds (``bench/http_load.py`` uses it).
* Unexpected exceptions: logged with the traceback and the request id; the client gets ``500 API-5001`` with a
  generic message. No stack trace ever reaches a client.
"""

from __future__ import annotations

import re
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any, ClassVar

import anyio
from fastapi import HTTPException
from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.http.errors import envelope_response
from context_engine.observability.logging import bind_request, context_fields, get_logger

_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
log = get_logger("context_engine.http")


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a streamed body passes the limit (FastAPI re-raises HTTP exceptions as is)."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=f"request body over {limit} bytes")
        self.limit = limit


class BodyIncomplete(HTTPException):
    """Raised from ``receive`` when no more body bytes arrive within the idle timeout (a Content-Length over the
    body): ``400``; the connection is closed after the answer."""

    def __init__(self, timeout_s: float, received: int, *, whole: bool = False) -> None:
        why = (
            f"not complete within {timeout_s:g} s"
            if whole
            else f"then nothing for {timeout_s:g} s (Content-Length larger than the body?)"
        )
        super().__init__(
            status_code=400,
            detail=f"request body incomplete: {received} bytes arrived, {why}",
            headers={"Connection": "close"},
        )


class HttpMetrics:
    """``ce_http_requests_total{method,route,status}`` and ``ce_http_request_duration_seconds{method,route}``.

    Registered once per registry (several apps over one service share them).
    """

    _by_registry: ClassVar[weakref.WeakKeyDictionary[CollectorRegistry, HttpMetrics]] = weakref.WeakKeyDictionary()

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "ce_http_requests",
            "HTTP requests by method, route template and status",
            ["method", "route", "status"],
            registry=registry,
        )
        self.duration = Histogram(
            "ce_http_request_duration_seconds",
            "HTTP request latency by method and route template",
            ["method", "route"],
            buckets=_BUCKETS,
            registry=registry,
        )

    @classmethod
    def on(cls, registry: CollectorRegistry) -> HttpMetrics:
        found = cls._by_registry.get(registry)
        if found is None:
            found = cls._by_registry[registry] = cls(registry)
        return found


def new_request_id(header: str | None) -> str:
    """The caller's id when well-formed, else 16 random hex characters."""
    if header and _REQUEST_ID_RE.match(header):
        return header
    return uuid.uuid4().hex[:16]


class _ResponseStart:
    """The send side of one request: adds ``X-Request-ID`` (unless the app set one) and, when the engine recorded its
    time, ``Server-Timing`` to the response start, and remembers the status and whether the response started."""

    def __init__(self, send: Send, request_id: str, state: dict[str, Any], started: float) -> None:
        self._send = send
        self._request_id = request_id
        self._state = state
        self._started = started
        self.code = 500
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.code, self.started = message["status"], True
            raw = list(message.get("headers", []))
            if not any(k.lower() == b"x-request-id" for k, _ in raw):
                raw.append((b"x-request-id", self._request_id.encode("latin-1")))
            engine_ms = self._state.get("engine_ms")
            if engine_ms is not None:  # what the engine took vs the whole server side (Server-Timing, W3C)
                app_ms = (time.perf_counter() - self._started) * 1000.0
                raw.append((b"server-timing", f"engine;dur={engine_ms:.3f}, app;dur={app_ms:.3f}".encode()))
            message = {**message, "headers": raw}
        await self._send(message)


class _BodyReader:
    """The receive side of one request: the body bounded in size (``BodyTooLarge``) and in time (``BodyIncomplete``:
    no byte for ``idle_timeout_s``, or not complete ``timeout_s`` after its first read)."""

    def __init__(self, receive: Receive, limit: int, idle_timeout_s: float, timeout_s: float) -> None:
        self._receive = receive
        self._limit = limit
        self._idle_timeout_s = idle_timeout_s
        self._timeout_s = timeout_s
        self._received = 0
        self._body_done = False
        self._deadline: float | None = None  # set at the first read of the body

    async def __call__(self) -> Message:
        if self._body_done:  # later calls wait for the disconnect (streaming responses): no timeout there
            return await self._receive()
        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + self._timeout_s
        left = max(0.0, self._deadline - now)
        with anyio.move_on_after(min(self._idle_timeout_s, left)) as waited:
            message = await self._receive()
        if waited.cancelled_caught:
            whole = left < self._idle_timeout_s
            raise BodyIncomplete(self._timeout_s if whole else self._idle_timeout_s, self._received, whole=whole)
        if message["type"] == "http.request":
            self._received += len(message.get("body", b""))
            self._body_done = not message.get("more_body", False)
            if self._received > self._limit:
                raise BodyTooLarge(self._limit)
        return message

class RequestMiddleware:
    """See the module docstring.

    Args:
        app: the wrapped ASGI app.
        max_request_bytes: body limit of every path except ``upload_paths``.
        max_upload_bytes: body limit of ``upload_paths``.
        upload_paths: exact paths with the upload limit.
        metrics: a callable returning the :class:`HttpMetrics` to record into (``None``: not recorded); a callable
            because the service (and its registry) is opened later, in the app's lifespan.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_request_bytes: int,
        max_upload_bytes: int,
        upload_paths: frozenset[str] = frozenset(),
        metrics: Callable[[], HttpMetrics | None] = lambda: None,
        body_idle_timeout_s: float = 10.0,
        body_timeout_s: float = 60.0,
    ) -> None:
        self.app = app
        self.body_idle_timeout_s = body_idle_timeout_s
        self.body_timeout_s = body_timeout_s
        self.max_request_bytes = max_request_bytes
        self.max_upload_bytes = max_upload_bytes
        self.upload_paths = upload_paths
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        request_id = new_request_id(headers.get("x-request-id"))
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        limit = self.max_upload_bytes if scope.get("path") in self.upload_paths else self.max_request_bytes
        sender = _ResponseStart(send, request_id, state, started)
        reader = _BodyReader(receive, limit, self.body_idle_timeout_s, self.body_timeout_s)

        with bind_request(request_id):
            try:
                declared = headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > limit:
                    await self._too_large(limit, request_id, scope, receive, sender)
                else:
                    await self.app(scope, reader, sender)
            except BodyTooLarge:
                if not sender.started:
                    await self._too_large(limit, request_id, scope, receive, sender)
            except BodyIncomplete as exc:  # outside FastAPI's handlers (the MCP endpoint)
                if not sender.started:
                    err = ContextEngineError(ErrorCode.REQUEST_INVALID, str(exc.detail))
                    await envelope_response(err, request_id, {"Connection": "close"})(scope, receive, sender)
            except Exception:  # the 500 envelope; the traceback goes to the server log
                log.exception("unhandled error", method=scope.get("method"), path=scope.get("path"))
                if not sender.started:
                    err = ContextEngineError(
                        ErrorCode.INTERNAL, "internal error; the server log has the details under this request_id"
                    )
                    await envelope_response(err, request_id)(scope, receive, sender)
            finally:
                self._record(scope, state, sender.code, time.perf_counter() - started)

    async def _too_large(self, limit: int, request_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        err = ContextEngineError(
            ErrorCode.PAYLOAD_TOO_LARGE, f"request body over the limit of {limit} bytes", {"limit_bytes": limit}
        )
        response = envelope_response(err, request_id, {"Connection": "close"})
        await response(scope, receive, send)

    def _record(self, scope: Scope, state: dict[str, Any], status: int, elapsed_s: float) -> None:
        route = scope.get("route")
        # the route template keeps label cardinality bounded; plain routes (docs, MCP) by path, unknown paths as one
        template = getattr(route, "path", None) or ("unmatched" if status >= 400 else scope.get("path", "unmatched"))
        method = scope.get("method", "")
        metrics = self.metrics()
        if metrics is not None:
            metrics.requests.labels(method=method, route=template, status=str(status)).inc()
            metrics.duration.labels(method=method, route=template).observe(elapsed_s)
        fields: dict[str, Any] = {
            "method": method,
            "route": template,
            "status": status,
            "duration_ms": round(elapsed_s * 1000.0, 3),
        }
        if state.get("engine_ms") is not None:
            fields["engine_ms"] = round(state["engine_ms"], 3)
        ctx = state.get("ctx")
        if ctx is not None:
            fields.update(context_fields(ctx))
            fields["auth"] = state.get("auth")
        client = scope.get("client")
        if client:
            fields["client"] = client[0]
        (log.warning if status >= 500 else log.info)("http_request", **fields)
