"""The one error envelope over HTTP (DESIGN.md §8): ``{code, message, details, request_id}``.

* :class:`ContextEngineError` -> its envelope with the status of the error table (``ErrorCode.http_status``).
* Request validation (pydantic) -> ``400`` with ``RET-4001`` on read endpoints and ``WRT-4002`` on write and memory
  endpoints (routes tagged ``write`` or ``memories``: the memory API's own checks are ``WRT-*`` too, so one endpoint
  never answers the same mistake with two codes); ``details.errors`` lists each problem's location, message and type,
  never the input.
* Invalid Unicode (a lone surrogate, bytes that are not UTF-8) anywhere in a request -> ``422 WRT-4221`` on write
  and memory endpoints and ``400 RET-4001`` on read endpoints (:mod:`.validation`, :mod:`context_engine.schema.text`).
* A body that could not be read or parsed otherwise -> ``400``, ``RET-4001`` or ``WRT-4002`` as for validation.
* Starlette's own 404/405 -> ``API-4041``/``API-4051``.
* Anything else -> ``500`` ``API-5001`` with a generic message; the traceback goes to the server log with the
  ``request_id``, never to the client (see :mod:`.middleware`).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.http.responses import RedactedJSONResponse
from context_engine.schema.text import invalid_text_error

WRITE_TAG = "write"
MEMORY_TAG = "memories"


class ErrorEnvelope(BaseModel):
    """The error body of every endpoint (DESIGN §8). ``code`` decides the HTTP status (see docs/interfaces.md)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "code": "RET-4032",
                    "message": "the URI does not exist or is not visible to this caller",
                    "details": {"uri": "ctx://resources/ops/x.md"},
                    "request_id": "4f1c2a9e0b7d4e55",
                }
            ]
        },
    )

    code: str = Field(description="Error code, e.g. RET-4001; the three digits after the dash are the HTTP status.")
    message: str = Field(description="What is wrong and how to fix it.")
    details: dict[str, Any] = Field(default_factory=dict, description="Machine-readable context (never secrets).")
    request_id: str | None = Field(None, description="The request id (X-Request-ID), also in the server log.")


def _status_doc(description: str) -> dict[str, Any]:
    return {"model": ErrorEnvelope, "description": description}


_ORIGIN = "an Origin header naming a host outside http.allowed_hosts (API-4031)"
#: What the Host and Origin guard (:mod:`.protection`) can answer on every route, before the route runs.
GUARD_ERRORS: dict[int | str, dict[str, Any]] = {
    403: _status_doc("A cross-site request: an Origin header naming a host outside http.allowed_hosts (API-4031)."),
    421: _status_doc(
        "A Host header outside http.allowed_hosts and the loopback names (API-4211): DNS rebinding, or a name this "
        "server was not told it has (serve --allow-host)."
    ),
}
COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _status_doc("Invalid request (RET-4001..4003, WRT-4001/4002)."),
    401: _status_doc("No valid API key (AUTH-4011)."),
    **GUARD_ERRORS,
    413: _status_doc("Request body over the size limit (WRT-4131)."),
    500: _status_doc("Unexpected server error (API-5001); details are in the server log under the request_id."),
    503: _status_doc("The engine is starting or stopping (API-5031); retry."),
}
READ_ERRORS: dict[int | str, dict[str, Any]] = {
    **COMMON_ERRORS,
    403: _status_doc(
        f"The URI or target is not visible to this caller, or does not exist (RET-4031/4032); or {_ORIGIN}."
    ),
}
_WRITE_LIMITS: dict[int | str, dict[str, Any]] = {
    500: _status_doc(
        "Storage failed (WRT-5001; details.read_only on a read-only home, not retryable), or an unexpected server "
        "error (API-5001)."
    ),
    503: _status_doc(
        "Not ready (API-5031), embedding failed (WRT-5031), or no write turn within ingest.write_wait_s "
        "(WRT-5032); retry."
    ),
}
WRITE_ERRORS: dict[int | str, dict[str, Any]] = {
    **READ_ERRORS,
    **_WRITE_LIMITS,
    404: _status_doc("Server-side path not found or not below an allowed root (WRT-4041)."),
    409: _status_doc("Conflict, e.g. a non-empty directory without recursive (WRT-4091)."),
    413: _status_doc(
        "Request body over the size limit (WRT-4131), or a document over ingest.max_chunks_per_document (WRT-4132)."
    ),
    415: _status_doc("Unsupported file type (WRT-4151)."),
    422: _status_doc("Content empty, binary or not UTF-8 (WRT-4221)."),
}
MEMORY_ERRORS: dict[int | str, dict[str, Any]] = {
    **COMMON_ERRORS,
    400: _status_doc(
        "Invalid request: bad URI, category or session id (WRT-4001), bad field, role, timestamp, "
        "metadata or paging (WRT-4002)."
    ),
    **_WRITE_LIMITS,
    403: _status_doc(
        f"The memory does not exist or is not visible/writable for this caller (RET-4032, one body); or {_ORIGIN}."
    ),
    413: _status_doc("Body, batch (memory.max_batch_items), text or metadata over its limit (WRT-4131)."),
    422: _status_doc("Text or message content empty, binary or not UTF-8 (WRT-4221)."),
}


def request_id_of(request: Request) -> str | None:
    """The id the middleware assigned to this request (``None`` outside the middleware, e.g. in unit tests)."""
    state = request.scope.get("state") or {}
    return state.get("request_id")


def envelope_response(
    err: ContextEngineError, request_id: str | None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """The JSON response for ``err``: its envelope with the status from the error table."""
    hdrs = dict(headers or {})
    if err.code is ErrorCode.UNAUTHENTICATED:
        hdrs.setdefault("WWW-Authenticate", 'Bearer realm="context-engine"')
    if request_id:
        hdrs.setdefault("X-Request-ID", request_id)
    # an envelope may quote a URI or a value the caller sent: redacted like a log line, always
    return RedactedJSONResponse(err.envelope(request_id), status_code=err.code.http_status, headers=hdrs)


def _validation_code(request: Request) -> ErrorCode:
    route = request.scope.get("route")
    tags = getattr(route, "tags", None) or []
    return ErrorCode.REQUEST_INVALID if WRITE_TAG in tags or MEMORY_TAG in tags else ErrorCode.QUERY_INVALID


def invalid_text_code(request: Request) -> ErrorCode:
    """The code for invalid Unicode in a request: ``WRT-4221`` on write and memory routes, ``RET-4001`` on reads."""
    write = _validation_code(request) is ErrorCode.REQUEST_INVALID
    return ErrorCode.CONTENT_INVALID if write else ErrorCode.QUERY_INVALID


def _clean_errors(errors: Any) -> list[dict[str, Any]]:
    """Location, message and type of each validation problem; the caller's input is not echoed back."""
    out: list[dict[str, Any]] = []
    for e in list(errors)[:20]:
        out.append({"loc": [str(x) for x in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": e.get("type")})
    return out


async def _on_engine_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ContextEngineError)
    return envelope_response(exc, request_id_of(request))


def _batch_index(errors: list[dict[str, Any]]) -> int | None:
    """The position of the first bad item of a batch (``body.messages.3.content``: 3), as the engine's own batch
    errors give it in ``details.index``; ``None`` when no error is inside a batch."""
    for e in errors:
        loc = e["loc"]
        for name, at in zip(loc, loc[1:], strict=False):
            if name in ("messages", "items") and at.isdigit():
                return int(at)
    return None


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = _clean_errors(exc.errors())
    where = ", ".join(".".join(e["loc"]) + ": " + e["msg"] for e in errors[:3])
    details: dict[str, Any] = {"errors": errors}
    index = _batch_index(errors)
    if index is not None:
        details["index"] = index  # a failing batch names its bad item on every path (docs/interfaces.md)
    err = ContextEngineError(_validation_code(request), f"invalid request: {where}", details)
    return envelope_response(err, request_id_of(request))


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        err = ContextEngineError(ErrorCode.ROUTE_NOT_FOUND, f"no endpoint at {request.url.path}; see /docs")
    elif exc.status_code == 405:
        err = ContextEngineError(
            ErrorCode.METHOD_NOT_ALLOWED, f"{request.method} is not allowed on {request.url.path}; see /docs"
        )
    elif exc.status_code == 413:
        err = ContextEngineError(ErrorCode.PAYLOAD_TOO_LARGE, "request body too large")
    elif exc.status_code in (401, 403):
        err = ContextEngineError(ErrorCode.UNAUTHENTICATED, "missing or invalid API key")
    elif exc.status_code >= 500:
        err = ContextEngineError(ErrorCode.INTERNAL, "internal error")
    elif isinstance(exc.__cause__, UnicodeDecodeError):  # a JSON body whose bytes are not UTF-8
        err = invalid_text_error(("body",), invalid_text_code(request))
    elif exc.status_code == 400:
        err = ContextEngineError(_validation_code(request), str(exc.detail))
    else:
        err = ContextEngineError(ErrorCode.REQUEST_INVALID, str(exc.detail))
    headers = dict(exc.headers or {})
    return envelope_response(err, request_id_of(request), headers)


def install_error_handlers(app: FastAPI) -> None:
    """Register the envelope handlers on ``app`` (unexpected exceptions are handled by the middleware)."""
    app.add_exception_handler(ContextEngineError, _on_engine_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
