"""Server commands: ``serve`` (HTTP API + MCP over streamable HTTP), ``mcp`` (MCP over stdio) and
``keys create|list|revoke`` (API keys). DESIGN.md §10; docs/interfaces.md.

``serve`` and ``mcp`` configure structured logging (JSON lines on stderr) before anything else; stdout stays free
(for the MCP stdio protocol). ``keys`` opens only the metadata database, not the embedding model. ``mcp`` opens
the engine on a background thread so that a client's ``initialize`` is answered before the stores and the model are
loaded (issue 12, cold start; :mod:`context_engine.interfaces.mcp.background`).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Column, Table

from context_engine.errors import ContextEngineError
from context_engine.interfaces.cli.common import app, emit, err_console, fail, out, state, stored_text

if TYPE_CHECKING:
    from context_engine.settings import Settings

keys_app = typer.Typer(
    name="keys",
    help="API keys for the HTTP and MCP servers (stored hashed, each bound to a RequestContext).",
    no_args_is_help=True,
)
app.add_typer(keys_app)


def _settings(**overrides: Any) -> Settings:
    from context_engine.settings import load_settings

    try:
        return load_settings(state.home, **overrides) if state.home else load_settings(**overrides)
    except ValueError as err:  # pydantic validation of the overrides (e.g. a bad port)
        from context_engine.errors import ErrorCode

        fail(ContextEngineError(ErrorCode.CONFIG_INVALID, f"invalid settings: {err}"))
        raise  # unreachable: fail() exits


@contextmanager
def _key_store(settings: Settings) -> Iterator[Any]:
    from context_engine.storage.factory import open_api_keys, open_metadata

    try:
        metadata = open_metadata(settings)
    except ContextEngineError as e:
        fail(e)
    try:
        yield open_api_keys(metadata, cache_ttl_s=0)
    except ContextEngineError as e:
        fail(e)
    finally:
        metadata.close()


# ---- serve ----------------------------------------------------------------------------------------------------------
@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default http.host, 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(min=0, max=65535, help="TCP port (default http.port, 8420).")] = None,
    allow_root: Annotated[
        list[Path] | None,
        typer.Option("--allow-root", help="Server-side directory that add-resource-by-path may read (repeatable)."),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="A Host name clients reach this server by, besides the loopback names and the bind address "
            "(http.allowed_hosts; repeatable): name, name:port, *.domain, or *. Other names get 421.",
        ),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            max=64,
            help="Worker processes (uvicorn workers on one port; each opens the engine and loads the model, about "
            "330 MB with the default model). They share the home: each sees the others' writes (docs/deployment.md).",
        ),
    ] = 1,
) -> None:
    """Serve the HTTP API (OpenAPI at /docs) and the MCP streamable HTTP endpoint (/mcp) with uvicorn."""
    http: dict[str, Any] = {}
    if host is not None:
        http["host"] = host
    if port is not None:
        http["port"] = port
    if allow_root:
        http["allowed_upload_roots"] = tuple(p.expanduser().resolve() for p in allow_root)
    if allow_host:
        http["allowed_hosts"] = tuple(allow_host)
    settings = _settings(http=http) if http else _settings()
    _check_address_free(settings.http.host, settings.http.port)  # before the model loads: fail fast (issue 29)
    import os

    import uvicorn

    from context_engine.interfaces.http import create_app
    from context_engine.interfaces.http.auth import is_loopback_host
    from context_engine.observability.logging import configure_logging, get_logger

    configure_logging(settings.logging)
    h = settings.http
    with _key_store(settings) as keys:
        active = keys.active_count()
    loopback = is_loopback_host(h.host)
    anonymous = loopback and (h.anonymous_loopback == "always" or (h.anonymous_loopback == "auto" and active == 0))
    shown = f"[{h.host}]" if ":" in h.host else h.host
    err_console.print(
        f"ContextEngine on http://{shown}:{h.port}  (OpenAPI /docs, MCP {h.mcp_path}, data {settings.home_path})"
    )
    if anonymous:
        why = "http.anonymous_loopback=always" if h.anonymous_loopback == "always" else "no API key exists yet"
        err_console.print(
            f"[yellow]anonymous access is ON for loopback clients[/] ({why}): requests without an API key act as "
            f"account '{settings.default_account}', role admin. Create a key with `context-engine keys create` to "
            "require keys."
        )
    else:
        err_console.print(f"API keys required ({active} active key{'s' if active != 1 else ''}).")
        if active == 0:
            err_console.print(
                "[red]no API key exists: every request will get 401. Run `context-engine keys create`.[/]"
            )
    if not loopback and not h.allowed_hosts:
        bound = "" if h.host in ("0.0.0.0", "::") else f" and {shown}"
        err_console.print(
            f"Host allow-list: the loopback names{bound} only; clients that reach this server by another name get "
            "421 API-4211: name them with --allow-host or http.allowed_hosts."
        )
    get_logger("context_engine.http").info(
        "serve",
        host=h.host,
        port=h.port,
        anonymous_access=anonymous,
        active_keys=active,
        home=str(settings.home_path),
        workers=workers,
    )
    common: dict[str, Any] = {
        "host": h.host,
        "port": h.port,
        "log_config": None,
        "access_log": False,
        "server_header": False,
        "lifespan": "on",
    }
    if workers == 1:
        uvicorn.run(create_app(settings), **common)
        return
    # Workers are fresh processes that import the app factory by name: they get this command's settings through
    # the CE_* environment (the home, and the options given here; config.toml is read again from the home).
    os.environ.update(settings_environment(settings, http))
    # uvicorn's supervisor kills a worker that misses a 5 s health ping; a worker loading the model on a busy
    # machine can hold the GIL that long, and its in-flight connections were reset: give it a minute.
    uvicorn.run(WORKER_APP_FACTORY, factory=True, workers=workers, timeout_worker_healthcheck=60, **common)


def _check_address_free(host: str, port: int) -> None:
    """Fail with ``API-4092`` (exit status 5) when ``host:port`` cannot be bound, before anything heavy is loaded.

    It binds and releases a socket as uvicorn will (``SO_REUSEADDR``: a port in ``TIME_WAIT`` is free); port 0 (any
    free port) is not checked. A bind refused for another reason (an address not on this host, a privileged port)
    gets the same code with the system's reason in ``details``.
    """
    import errno
    import socket

    from context_engine.errors import ErrorCode

    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as err:
        fail(ContextEngineError(ErrorCode.CONFIG_INVALID, f"cannot resolve the bind address {host!r}: {err}"))
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as err:
            taken = err.errno == errno.EADDRINUSE
            shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            message = (
                f"{shown} is already in use (another server, perhaps another context-engine serve); stop it or "
                "choose another --port"
                if taken
                else f"cannot listen on {shown}: {err.strerror}"
            )
            details = {"host": host, "port": port, "errno": err.errno}
            fail(ContextEngineError(ErrorCode.ADDRESS_IN_USE, message, details))


#: The ASGI app factory that ``serve --workers N`` (N > 1) hands to uvicorn by import string.
WORKER_APP_FACTORY = "context_engine.interfaces.http.app:create_app_from_environment"


def settings_environment(settings: Settings, http: dict[str, Any]) -> dict[str, str]:
    """The ``CE_*`` variables that rebuild ``settings`` in a worker process: the resolved home and the ``http``
    overrides given on the command line (``http``: field name -> value; tuples of paths as JSON lists)."""
    import json

    env = {"CE_HOME": str(settings.home_path)}
    for name, value in http.items():
        env[f"CE_HTTP__{name.upper()}"] = (
            json.dumps([str(v) for v in value]) if isinstance(value, tuple) else str(value)
        )
    return env


# ---- mcp (stdio) ----------------------------------------------------------------------------------------------------
@app.command()
def mcp() -> None:
    """Serve the MCP tools over stdio (for MCP clients that launch the server); logs go to stderr.

    The tools act as the global --as context (default: account default, role admin). The engine opens in the
    background: initialize and tools/list are answered at once, the first tool call waits for it."""
    from context_engine.interfaces.mcp.background import BackgroundEngine
    from context_engine.interfaces.mcp.server import build_mcp_server
    from context_engine.interfaces.mcp.stdio import StdioLimits
    from context_engine.observability.logging import configure_logging

    settings = _settings()
    configure_logging(settings.logging, stream=sys.stderr)
    ctx = state.ctx

    def open_service() -> Any:
        from context_engine.engine_factory import build_engine

        return build_engine(settings)

    def warm(service: Any) -> None:
        from context_engine.warm_up import warm_up

        warm_up(service, budget_s=settings.http.warm_up_s)

    engine = BackgroundEngine(open_service, warm_up=warm)

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[dict[str, Any]]:
        engine.start()
        try:
            yield {}
        finally:
            engine.close()  # waits for an opening still under way, then closes the stores

    server = build_mcp_server(
        engine.get, lambda _request: ctx, lifespan=lifespan, log_level=settings.logging.level, status=engine.status
    )
    server.stdio_limits = StdioLimits(  # type: ignore[attr-defined]  # an EngineMCPServer
        max_line_bytes=settings.http.mcp_stdio_max_line_bytes, max_json_depth=settings.http.mcp_stdio_max_json_depth
    )
    try:
        server.run("stdio")
    except ContextEngineError as e:
        fail(e)


# ---- keys -----------------------------------------------------------------------------------------------------------
def _key_row(k: Any) -> dict[str, Any]:
    return {**k.model_dump(mode="json"), "active": k.active}


@keys_app.command("create")
def keys_create(
    context: Annotated[
        str, typer.Argument(help="The RequestContext the key acts as: account:role:user_space:agent_space.")
    ],
    name: Annotated[str, typer.Option("--name", "-n", help="A label, e.g. who or what uses the key.")] = "",
) -> None:
    """Create an API key; the key is printed once and cannot be shown again."""
    from context_engine.schema.context import RequestContext

    try:
        ctx = RequestContext.parse(context, label="context")  # the parser of --as: one grammar, one error
    except ContextEngineError as e:
        fail(e)
    with _key_store(_settings()) as keys:
        info, token = keys.create(ctx, name)
    if state.json:
        emit({**_key_row(info), "api_key": token})
        return
    out.print(
        f"[green]created key {info.key_id}[/] for {ctx.account_id}:{ctx.role}:"
        f"{ctx.user_space or ''}:{ctx.agent_space or ''}"
    )
    out.print(token, markup=False, highlight=False)
    err_console.print("Store it now: only its hash is kept. Use it as 'Authorization: Bearer <key>'.")


@keys_app.command("list")
def keys_list(
    account: Annotated[str | None, typer.Option(help="Only this account.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Include revoked keys.")] = False,
) -> None:
    """List API keys (never their secrets)."""
    with _key_store(_settings()) as keys:
        found = keys.list(account, include_revoked=all_)
    if state.json:
        emit([_key_row(k) for k in found])
        return
    # the id is pasted into `keys revoke`: never wrapped or cut; the other columns shrink on a narrow terminal
    id_column = Column("key_id", no_wrap=True, min_width=max((len(k.key_id) for k in found), default=6))
    table = Table(id_column, "name", "account", "role", "user_space", "agent_space", "created", "last used", "revoked")
    for k in found:
        table.add_row(
            k.key_id,
            stored_text(k.name),
            k.account_id,
            k.role,
            k.user_space or "",
            k.agent_space or "",
            k.created_at.strftime("%Y-%m-%d %H:%M"),
            k.last_used_at.strftime("%Y-%m-%d %H:%M") if k.last_used_at else "",
            k.revoked_at.strftime("%Y-%m-%d %H:%M") if k.revoked_at else "",
        )
    out.print(table)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (from `keys list`) or the key itself.")],
) -> None:
    """Revoke an API key: it stops working at once (within http.key_cache_ttl_s on a running server)."""
    with _key_store(_settings()) as keys:
        info = keys.revoke(key_id)
    if state.json:
        emit(_key_row(info))
    else:
        out.print(f"revoked key {info.key_id}")
