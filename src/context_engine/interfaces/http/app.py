"""The FastAPI application factory (DESIGN.md §10): thin routes over one :class:`ContextEngineService`.

``create_app(settings)`` builds the app; its lifespan opens the engine once per process unless a ready ``service`` is
passed in (tests, embedding in another app), then warms what the first requests need (the model, the tokenizer, the
vector index, each account's derived indexes: :mod:`context_engine.warm_up`) before the app is ready. The MCP
streamable HTTP endpoint (``http.mcp_path``, default ``/mcp``) is mounted on the same server, behind the same API keys.

Layers, outermost first: :class:`~.middleware.RequestMiddleware` (request id, body limit, access log, HTTP
metrics, 500 envelope) -> FastAPI (routing, validation, the envelope handlers of :mod:`.errors`) -> routes
(:mod:`.routes`) -> :mod:`.calls` -> the service. Blocking service calls run in a thread pool (sync routes).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from starlette.requests import HTTPConnection
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.http.auth import Authenticator
from context_engine.interfaces.http.errors import install_error_handlers
from context_engine.interfaces.http.mcp_refusal import refuse_mcp_request
from context_engine.interfaces.http.middleware import HttpMetrics, RequestMiddleware
from context_engine.interfaces.http.protection import HostAllowList, HostGuardMiddleware, SecurityHeadersMiddleware
from context_engine.interfaces.http.responses import RedactedJSONResponse
from context_engine.observability.logging import get_logger
from context_engine.schema.context import RequestContext
from context_engine.settings import HttpSettings, Settings, load_settings
from context_engine.storage.factory import open_api_keys
from context_engine.storage.protocols import KeyStore

log = get_logger("context_engine.http")

UPLOAD_PATH = "/api/v1/resources/upload"

API_DESCRIPTION = """\
ContextEngine over HTTP: the same service as the CLI, the MCP tools and the Python API.

* **Authentication**: `Authorization: Bearer <API key>` (create keys with `context-engine keys create`). Each key is
  bound to one RequestContext (account, role, user space, agent space). On a loopback bind with no key in the store
  the embedded single-user default (account `default`, role `admin`) may be used without a key.
* **Errors**: every error is the envelope `{code, message, details, request_id}`; the HTTP status is the three digits
  after the dash of `code` (e.g. `RET-4032` -> 403).
* **Request ids**: send `X-Request-ID` (1-64 of `[A-Za-z0-9._:-]`) or get a generated one back in the same header.
* **More**: the engine's layers, stages, stores and error codes are described in the repository's
  `docs/architecture.md`; every error code with its status in `docs/interfaces.md`.
"""


@dataclass
class EngineState:
    """What the routes need, on ``app.state.engine``; filled by the lifespan."""

    settings: Settings
    service: Any = None  # ContextEngineService once open
    owns_service: bool = False
    keys: KeyStore | None = None
    authenticator: Authenticator | None = None
    http_metrics: HttpMetrics | None = None
    mcp: Any = None
    warm_up: Any = None  # the startup warm-up's WarmUpReport (context_engine.warm_up), once done

    def ready(self) -> Any:
        """The open service, or ``API-5031`` while the engine is starting or stopping."""
        if self.service is None or self.authenticator is None:
            raise ContextEngineError(ErrorCode.NOT_READY, "the engine is starting or stopping; retry", retryable=True)
        return self.service


class McpHttpEndpoint:
    """The MCP streamable HTTP ASGI app behind API-key authentication (the same keys as the API).

    The caller's principal is stored in ``scope["state"]``; the MCP tools read it from the transport request. A
    request refused before it reaches the MCP server is answered by :func:`~.mcp_refusal.refuse_mcp_request`: a
    JSON-RPC request without a valid key gets ``400`` with a JSON-RPC error carrying the envelope (not ``401``,
    which MCP clients take for an OAuth challenge and never show; docs/interfaces.md, MCP).
    """

    def __init__(self, state: EngineState) -> None:
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = (scope.get("state") or {}).get("request_id")
        try:
            self.state.ready()
            assert self.state.authenticator is not None and self.state.mcp is not None
            await self.state.authenticator.authenticate(HTTPConnection(scope))
        except ContextEngineError as err:
            await refuse_mcp_request(err, request_id, scope, receive, send)
            return
        await self.state.mcp.session_manager.asgi_app(scope, receive, send)


def _mcp_context(request: Any) -> RequestContext:
    """RequestContext of an MCP call over HTTP: what :class:`McpHttpEndpoint` authenticated."""
    ctx = None if request is None else (request.scope.get("state") or {}).get("ctx")
    if ctx is None:
        raise ContextEngineError(ErrorCode.UNAUTHENTICATED, "missing API key")
    return ctx


def create_app(settings: Settings | None = None, *, service: Any = None, embedder: Any = None) -> FastAPI:
    """Build the HTTP application.

    Args:
        settings: the engine settings (``http`` section: bind host, limits, anonymous policy, MCP path).
            Default: ``service.settings`` or ``load_settings()``.
        service: an open ``ContextEngineService`` to serve (not closed by the app). ``None``: the lifespan opens
            one from ``settings`` and closes it at shutdown.
        embedder: passed to the service the lifespan opens (tests share one loaded model).
    """
    settings = settings or (service.settings if service is not None else load_settings())
    http = settings.http
    state = EngineState(settings=settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if service is None:
                from context_engine.engine_factory import build_engine

                state.service = await anyio.to_thread.run_sync(lambda: build_engine(settings, embedder=embedder))
                state.owns_service = True
                stack.callback(_close, state)
            else:
                state.service = service
            # everything the first requests need, before /readyz can answer (issue 26; context_engine/warm_up.py)
            state.warm_up = await anyio.to_thread.run_sync(lambda: warm_up_engine(state.service, http.warm_up_s))
            state.keys = open_api_keys(state.service.metadata, cache_ttl_s=http.key_cache_ttl_s)
            state.http_metrics = HttpMetrics.on(state.service.metrics.registry)
            anyio.to_thread.current_default_thread_limiter().total_tokens = http.threadpool_workers
            if state.mcp is not None:  # a fresh session manager per lifespan (each can run only once)
                _mount_mcp_manager(state.mcp, http)
                await stack.enter_async_context(state.mcp.session_manager.run())
            state.authenticator = Authenticator(
                state.keys, http, RequestContext(account_id=settings.default_account, role="admin")
            )
            log.info(
                "http_ready",
                host=http.host,
                port=http.port,
                anonymous_loopback=state.authenticator.anonymous_policy(),
                active_keys=state.keys.active_count(),
                mcp_path=http.mcp_path if state.mcp is not None else None,
            )
            try:
                yield
            finally:
                state.authenticator = None

    # every answer's strings pass the pattern redaction last (docs/security.md "Secret redaction")
    redacted: dict[str, Any] = (
        {"default_response_class": RedactedJSONResponse} if settings.retrieval.redaction.enabled else {}
    )
    # Swagger UI (/docs) and ReDoc (/redoc) from the assets the fastapi-offline wheel ships, served under
    # /static-offline-docs: the pages render with no network access (FastAPI's defaults load them from a CDN).
    app = FastAPIOffline(
        title="ContextEngine",
        version=_version(),
        description=API_DESCRIPTION,
        lifespan=lifespan,
        swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from validator.swagger.io
        **redacted,
        openapi_tags=[
            {"name": "retrieval", "description": "search_memory / read_memory (docs/search_memory.md)."},
            {"name": "knowledge", "description": "lookup_knowledge and its audit trail (docs/lookup_knowledge.md)."},
            {"name": "write", "description": "Add, delete and move nodes (docs/architecture.md, the write path)."},
            {
                "name": "memories",
                "description": "Memories and conversations: add, batch, messages, list, get with "
                "history, update, delete (docs/memories.md).",
            },
            {"name": "browse", "description": "ls / tree with L0 abstracts."},
            {"name": "operations", "description": "Health, readiness and Prometheus metrics (docs/interfaces.md)."},
        ],
    )
    app.state.engine = state
    install_error_handlers(app)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    from context_engine.interfaces.http.routes import router

    app.include_router(router)
    from context_engine.interfaces.http.console import mount_console

    mount_console(app)  # the web console (/console): same service, keys and tenancy checks as the API
    if http.mcp_enabled:
        from context_engine.interfaces.mcp.server import build_mcp_server

        state.mcp = build_mcp_server(lambda: state.ready(), _mcp_context, log_level=settings.logging.level)
        app.router.routes.append(
            Route(
                http.mcp_path,
                endpoint=McpHttpEndpoint(state),
                methods=["GET", "POST", "DELETE"],
                include_in_schema=False,
            )
        )
    # Host and Origin allow-list on every route, MCP included (DNS rebinding; .protection), inside the request
    # middleware so that a refusal carries the request id and is logged; the security headers outermost, so that
    # every answer (the request middleware's 413 and 500 included) has them.
    app.add_middleware(HostGuardMiddleware, hosts=HostAllowList.from_settings(http))
    app.add_middleware(
        RequestMiddleware,
        max_request_bytes=http.max_request_bytes,
        max_upload_bytes=http.max_upload_bytes,
        upload_paths=frozenset({UPLOAD_PATH}),
        metrics=lambda: state.http_metrics,
        body_idle_timeout_s=http.body_idle_timeout_s,
        body_timeout_s=http.body_timeout_s,
    )
    app.add_middleware(SecurityHeadersMiddleware, docs_paths=(app.docs_url or "", app.redoc_url or ""))
    return app


def create_app_from_environment() -> FastAPI:
    """The app of one ``serve --workers N`` worker process: ``create_app(load_settings())``, the settings coming
    from the ``CE_*`` environment that ``serve`` sets before it starts the workers (the home included). Each worker
    opens its own engine (and loads the model) in its lifespan and accepts connections only once it is ready. A
    worker is a fresh process: it configures logging as ``serve`` does (JSON lines on stderr)."""
    from context_engine.observability.logging import configure_logging

    settings = load_settings()
    configure_logging(settings.logging)
    return create_app(settings)


def _mount_mcp_manager(mcp: Any, http: HttpSettings) -> None:
    """Create the MCP server's streamable HTTP session manager: stateless (any replica can answer any request),
    JSON responses and the HTTP body limit. The SDK's own Host and Origin check is off: the app's
    :class:`~.protection.HostGuardMiddleware` checks them on every route, on every bind, with ``http.allowed_hosts``
    (the SDK checked ``/mcp`` alone, and only on a loopback bind)."""
    from mcp.server.transport_security import TransportSecuritySettings

    mcp.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=http.max_request_bytes,
        host=http.host,
    )


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema without its default ``422 HTTPValidationError`` responses: validation errors are ``400``
    envelopes here (``RET-4001``/``WRT-4002``), documented on each operation with the other error statuses."""
    if app.openapi_schema:
        return app.openapi_schema
    from fastapi.openapi.utils import get_openapi

    spec = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes, tags=app.openapi_tags
    )
    default_422 = "#/components/schemas/HTTPValidationError"
    for ops in spec.get("paths", {}).values():
        for op in ops.values():
            resp = op.get("responses", {}).get("422")
            ref = ((resp or {}).get("content", {}).get("application/json", {}).get("schema", {}) or {}).get("$ref")
            if ref == default_422:
                del op["responses"]["422"]
    schemas = spec.get("components", {}).get("schemas", {})
    text = str(spec.get("paths"))
    for name in ("HTTPValidationError", "ValidationError"):
        if f"#/components/schemas/{name}'" not in text:
            schemas.pop(name, None)
    app.openapi_schema = spec
    return spec


def warm_up_engine(service: Any, budget_s: float) -> Any:
    """Load the model, the tokenizer, the vector index and the accounts' derived indexes now (once per process), not
    on the first request (:func:`context_engine.warm_up.warm_up`; ``budget_s``: ``http.warm_up_s``); returns its
    report."""
    from context_engine.warm_up import warm_up

    return warm_up(service, budget_s=budget_s)


def _close(state: EngineState) -> None:
    service, state.service = state.service, None
    if service is not None:
        service.close()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("context-engine")
    except PackageNotFoundError:
        return "0"
