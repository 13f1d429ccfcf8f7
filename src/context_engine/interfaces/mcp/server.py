"""The MCP tool server (DESIGN.md §10) on the official Python SDK (``mcp`` 2.x, ``MCPServer``).

Tools: ``search_memory``, ``read_memory``, ``lookup_knowledge``, ``verify_evidence``, the hierarchy browsed
compactly (``ls``: a directory's children or one node at L0 or L1, paged; ``tree``: a subtree at L0, breadth-first,
bounded), ``add_memory``, ``add_resource``, ``add_skill``, and the memory lifecycle: ``add_memories``,
``add_messages``, ``list_memories``, ``get_memory``, ``update_memory``, ``delete_memory``. Agents read the tool list
on every call, so it is kept under 9 KB as sent (issue 15; ``bench/payload_sizes.py`` measures it): one-line
descriptions, exact but lean input schemas in the portable subset of MCP Inspector's ``--strict``
(:func:`lean_schema`: types, bounds, enums and required fields kept, generated titles dropped, no ``type`` arrays)
and no output schemas. A renamed argument's old name (``session_id``, now ``conversation_id``: issue 29) is still
accepted and left out of the tool list (:data:`DEPRECATED`). Each tool calls the same function as the HTTP route
(:mod:`context_engine.api.calls`), so answers are identical; ``search_memory`` and ``lookup_knowledge``
answer in the compact form by default (``response_format="compact"``, :mod:`context_engine.schema.compact`), the
full one on request.

Errors: a tool that fails returns ``isError: true`` with the envelope ``{code, message, details, request_id}`` as
its structured content and as JSON text, exactly the HTTP body. Invalid arguments get ``RET-4001`` (retrieval
tools) or ``WRT-4002`` (write and memory tools); invalid Unicode in any argument (a lone surrogate) ``RET-4001`` or
``WRT-4221``; unexpected errors ``API-5001`` with a generic message (the traceback goes to the log, on stderr). An
unknown tool name is a protocol error: a JSON-RPC error ``-32602`` (invalid params), not a tool result.

Transports: stdio (``context-engine mcp``; the caller's RequestContext is the CLI's ``--as``, default ``default:admin``;
the transport of :mod:`context_engine.interfaces.mcp.stdio`, which answers every line: a line that is not JSON gets
``-32700``) and streamable HTTP mounted on the HTTP server (the context comes from the request's API key, see
:mod:`context_engine.interfaces.http.app`). Logs go to stderr only: stdout belongs to the stdio protocol.

Cold start (issue 12): over stdio the engine opens on a background thread
(:class:`~context_engine.interfaces.mcp.background.BackgroundEngine`), so ``initialize`` and ``tools/list`` do not
wait for the stores or the embedding model; the service provider is called in the tool call's worker thread, where
it may block until the engine is open. The ``initialize`` result then carries the engine's state under
``_meta["context-engine/status"]`` (``{"engine": "opening" | "loading_model" | "warming" | "ready" | "failed",
"model_loaded": bool}``), as it was when the answer was built; the same is logged as ``mcp_initialize``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from mcp_types import Tool as MCPTool
from pydantic import BaseModel, Field, ValidationError

from context_engine.api import calls
from context_engine.api.models import (
    AddMemoriesRequest,
    AddMemoryRequest,
    AddMessagesRequest,
    AddResourcePathRequest,
    AddResourceTextRequest,
    AddSkillRequest,
    ListMemoriesRequest,
    LsRequest,
    MemoryItemIn,
    MemoryUriRequest,
    MessageIn,
    Timestamp,
    TreeRequest,
    UpdateMemoryRequest,
    VerifyEvidenceRequest,
)
from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.observability.logging import bind_request, get_logger
from context_engine.redaction import redact_output
from context_engine.schema.compact import BrowseLevel
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import EvidenceVerification, LookupRequest, SemanticMode
from context_engine.schema.memory import DedupPolicy
from context_engine.schema.query import ReadMemoryRequest, ResponseFormat, SearchMemoryRequest
from context_engine.schema.text import find_invalid_text, invalid_text_error

if TYPE_CHECKING:
    from context_engine.service import ContextEngineService

log = get_logger("context_engine.mcp")

STATUS_META_KEY = "context-engine/status"
"""The ``_meta`` key of the ``initialize`` result that holds the engine's status (stdio)."""

ServiceProvider = Callable[[], "ContextEngineService"]
ContextResolver = Callable[[Any], RequestContext]
"""Given the MCP request's transport request (a Starlette ``Request`` over HTTP, ``None`` on stdio), the caller."""

INSTRUCTIONS = (
    "ContextEngine stores memories, skills and resources as nodes with three levels of detail (L0 abstract, "
    "L1 overview, L2 content). Start with search_memory: it returns L0 candidates and recommends which URIs to "
    "read; then call read_memory at L1, and at L2 only when the detail is needed. For operations questions "
    "(alerts, error codes, runbooks) use lookup_knowledge with a session_id: documents already returned in the "
    "session come back as DEDUPED instead of repeating their text."
)


_UNIT = {"minimum": 0, "maximum": 1}

DEPRECATED = {"deprecated": True}
"""``json_schema_extra`` of an argument kept under its old name (issue 29): still accepted, mapped by the request
model, but not advertised: :meth:`EngineMCPServer.list_tools` leaves it out (an agent reads the list on every call)."""

REQUIRED_ARGS: dict[str, tuple[str, ...]] = {"add_messages": ("conversation_id",)}
"""Arguments listed as required although the tool's signature lets them out, because a deprecated name may stand
in for them (``session_id``); a call with neither is refused by the request model."""


def _result(model: BaseModel, *, redact: bool = True) -> CallToolResult:
    # every string of the answer passes the pattern redaction last (docs/security.md "Secret redaction"), as over HTTP
    data = model.model_dump(mode="json")
    data = redact_output(data) if redact else data
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))  # what the agent reads: no padding
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def lean_schema(node: Any) -> Any:
    """A JSON Schema with the same constraints in fewer bytes (the tool list is read on every agent call), written
    in the portable subset that MCP Inspector's ``--strict`` checks (0 warnings; tests/mcp/test_inspector_strict.py):

    * pydantic's generated ``title`` annotations, ``default: null`` and ``additionalProperties: true`` (the JSON
      Schema default) dropped;
    * an optional argument whose default is ``null`` (``X | None = None``: null means "not given") is written as
      ``X`` alone, without the ``null`` branch: the argument is left out to mean the default. The tools still accept
      an explicit ``null`` (their pydantic models do); the schema just does not advertise it, since no single
      spelling of a nullable field is portable (a ``type`` array is not, and OpenAPI-style dialects have no ``null``
      type);
    * other unions stay ``anyOf`` branches of one ``type`` each, never a ``type`` array (``["string", "null"]``),
      which clients that map tool schemas onto a single-``type`` dialect reject or weaken.
    """
    if isinstance(node, list):
        return [lean_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "$defs") and isinstance(value, dict):
            out[key] = {name: lean_schema(sub) for name, sub in value.items()}  # names, not keywords
        elif _generated_noise(key, value):
            continue
        else:
            out[key] = lean_schema(value)
    options = out.get("anyOf")
    if isinstance(options, list) and "default" in node and node["default"] is None and _NULL in options:
        rest = [o for o in options if o != _NULL]  # null only stands for "not given": leave it out
        del out["anyOf"]
        return {**rest[0], **out} if len(rest) == 1 else {**out, "anyOf": rest}
    return out


_NULL = {"type": "null"}


def _generated_noise(key: str, value: Any) -> bool:
    """A keyword pydantic writes that constrains nothing: a generated ``title``, ``default: null``,
    ``additionalProperties: true``."""
    return (
        (key == "title" and isinstance(value, str))
        or (key == "default" and value is None)
        or (key == "additionalProperties" and value is True)
    )


def _error(err: ContextEngineError, request_id: str) -> CallToolResult:
    body = redact_output(err.envelope(request_id))  # may quote what the caller sent: redacted as a log line is
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
        is_error=True,
    )


def _invalid(err: ValidationError, code: ErrorCode) -> ContextEngineError:
    errors: list[dict[str, Any]] = [
        {"loc": [str(x) for x in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": e.get("type")}
        for e in err.errors()[:20]
    ]
    where = ", ".join(".".join(e["loc"]) + ": " + e["msg"] for e in errors[:3])
    return ContextEngineError(code, f"invalid arguments: {where}", {"errors": errors})


def _request_of(mcp_ctx: Context | None) -> Any:
    if mcp_ctx is None:
        return None
    try:
        return mcp_ctx.request_context.request
    except ValueError:  # no active request (direct in-process calls)
        return None


class EngineMCPServer(MCPServer):
    """``MCPServer`` whose argument-validation failures use the engine's envelope (``RET-4001``/``WRT-4002``) and
    whose tool list is lean (issue 15): input schemas through :func:`lean_schema`, no output schema (the answers
    are the models of ``schema/``, documented in the HTTP API's OpenAPI; a schema of each would triple the list)."""

    async def list_tools(self) -> list[Any]:
        # built with only the fields that have a value: the stdio transport sends every field that was set
        out = []
        for t in await super().list_tools():
            fields: dict[str, Any] = {
                "name": t.name,
                "description": t.description,
                "input_schema": _advertised(t.name, lean_schema(t.input_schema)),
            }
            if t.annotations:
                fields["annotations"] = t.annotations
            out.append(MCPTool(**fields))
        return out

    write_tools: frozenset[str] = frozenset(
        {
            "add_memory",
            "add_resource",
            "add_skill",
            "add_memories",
            "add_messages",
            "list_memories",
            "get_memory",
            "update_memory",
            "delete_memory",
        }
    )

    stdio_limits: Any = None
    """The :class:`~context_engine.interfaces.mcp.stdio.StdioLimits` of the stdio transport (``None``: defaults)."""

    async def run_stdio_async(self) -> None:
        """Serve over stdio through :func:`~context_engine.interfaces.mcp.stdio.stdio_transport`, which answers
        every line (the SDK's transport drops a line it cannot parse, e.g. one with a lone surrogate)."""
        from context_engine.interfaces.mcp.stdio import stdio_transport

        async with stdio_transport(self.stdio_limits) as (read_stream, write_stream):
            server = self._lowlevel_server
            await server.run(read_stream, write_stream, server.create_initialization_options())

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if self._tool_manager.get_tool(name) is None:  # a protocol error (JSON-RPC), not a failed tool result
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"unknown tool {_printable(name)!r}; see tools/list",
                data={"tools": sorted(t.name for t in self._tool_manager.list_tools())},
            )
        write = name in self.write_tools
        found = find_invalid_text(arguments or {})
        if found is not None:  # before pydantic: a lone surrogate would otherwise reach the stores
            code = ErrorCode.CONTENT_INVALID if write else ErrorCode.QUERY_INVALID
            return _error(invalid_text_error(found, code), _new_id(_request_of(context)))
        try:
            return await super().call_tool(name, arguments, context)
        except Exception as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                code = ErrorCode.REQUEST_INVALID if write else ErrorCode.QUERY_INVALID
                return _error(_invalid(cause, code), _new_id(_request_of(context)))
            raise


def _advertised(tool: str, schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without its deprecated arguments (:data:`DEPRECATED`), with :data:`REQUIRED_ARGS` required."""
    props = schema.get("properties") or {}
    old = {name for name, sub in props.items() if isinstance(sub, dict) and sub.get("deprecated") is True}
    required = [*(r for r in schema.get("required", []) if r not in old), *REQUIRED_ARGS.get(tool, ())]
    if not old and not REQUIRED_ARGS.get(tool):
        return schema
    out = {**schema, "properties": {k: v for k, v in props.items() if k not in old}}
    if required:
        out["required"] = list(dict.fromkeys(required))
    return out


def _printable(name: str) -> str:
    return name.encode("utf-8", "backslashreplace").decode("utf-8")[:100]


def _verify(service: ContextEngineService, req: VerifyEvidenceRequest, ctx: RequestContext) -> EvidenceVerification:
    return service.verify_evidence(req.invocation_id, req.excerpt, ctx)


def _arguments(values: dict[str, Any]) -> dict[str, Any]:
    """A tool's own arguments from its ``locals()``: without the MCP context and the closure's ``run`` helper."""
    return {k: v for k, v in values.items() if k not in ("ctx", "run")}


def _new_id(request: Any) -> str:
    state = getattr(getattr(request, "scope", None), "get", lambda *_: None)("state") or {}
    return state.get("request_id") or uuid.uuid4().hex[:16]


class _StatusOnInitialize:
    """SDK middleware: adds ``status()`` to the ``initialize`` result's ``_meta`` (:data:`STATUS_META_KEY`) and logs
    it as ``mcp_initialize``; every other message passes through unchanged."""

    def __init__(self, status: Callable[[], dict[str, Any]]) -> None:
        self._status = status

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            status = self._status()
            log.info("mcp_initialize", **status)
            result = {**result, "_meta": {**(result.get("_meta") or {}), STATUS_META_KEY: status}}
        return result


class _ToolRunner:
    """One tool call: the caller's context from the transport request, the typed request built (a validation error
    becomes ``code``), the service call in a worker thread, and the answer or the error envelope."""

    def __init__(self, service: ServiceProvider, resolve_ctx: ContextResolver) -> None:
        self._service = service
        self._resolve_ctx = resolve_ctx

    async def __call__(
        self,
        mcp_ctx: Context | None,
        code: ErrorCode,
        build: Callable[[], BaseModel],
        call: Callable[[ContextEngineService, Any, RequestContext], BaseModel],
    ) -> CallToolResult:
        request = _request_of(mcp_ctx)
        request_id = _new_id(request)
        try:
            ctx = self._resolve_ctx(request)
        except ContextEngineError as err:
            return _error(err, request_id)
        with bind_request(request_id, ctx, interface="mcp"):
            try:
                try:
                    req = build()
                except ValidationError as err:
                    raise _invalid(err, code) from None
                # service() runs in the worker thread: over stdio it blocks until the engine is open
                def invoke() -> tuple[BaseModel, bool]:
                    svc = self._service()
                    return call(svc, req, ctx), svc.settings.retrieval.redaction.enabled

                out, redact = await anyio.to_thread.run_sync(invoke)
                return _result(out, redact=redact)
            except ContextEngineError as err:
                log.info("tool_error", code=err.code.value, message=err.message)
                return _error(err, request_id)
            except Exception:  # the API-5001 envelope; the traceback goes to the log (stderr)
                log.exception("tool_crashed")
                return _error(ContextEngineError(ErrorCode.INTERNAL, "internal error; see the server log"), request_id)

def build_mcp_server(  # noqa: C901 - one nested function per MCP tool (known debt, pyproject.toml mccabe)
    service: ServiceProvider,
    resolve_ctx: ContextResolver,
    *,
    lifespan: Any = None,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO",
    status: Callable[[], dict[str, Any]] | None = None,
) -> MCPServer:
    """The MCP server with the engine's tools.

    Args:
        service: returns the open service; called per tool call in the call's worker thread, so it may block
            while the engine opens (stdio: :meth:`BackgroundEngine.get
            <context_engine.interfaces.mcp.background.BackgroundEngine.get>`).
        resolve_ctx: the caller's RequestContext from the transport request (see :data:`ContextResolver`).
        lifespan: an ``MCPServer`` lifespan (stdio starts opening the engine there); ``None`` for the HTTP mount.
        log_level: the SDK's log level.
        status: the engine's status, a JSON object added to the ``initialize`` result's ``_meta`` under
            :data:`STATUS_META_KEY`; ``None`` adds nothing (the HTTP mount, whose engine is open before it serves).
    """
    # MCPServer's constructor calls logging.basicConfig (a console handler on the root logger); logging is the
    # entry point's job (observability.logging.configure_logging), so the root logger is put back as it was.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    mcp = EngineMCPServer(
        "context-engine",
        title="ContextEngine",
        instructions=INSTRUCTIONS,
        version=_version(),
        lifespan=lifespan,
        log_level=log_level,
        middleware=[_StatusOnInitialize(status)] if status is not None else None,
    )
    root.handlers[:] = handlers
    root.setLevel(level)

    run = _ToolRunner(service, resolve_ctx)

    # Only the hints that differ from the MCP defaults (readOnly false, destructive true, idempotent false,
    # openWorld true) are set, and delete_memory's destructive one: the rest would be bytes that say nothing.
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    audited = ToolAnnotations(destructive_hint=False, open_world_hint=False)
    writes = ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=False)

    @mcp.tool(annotations=read_only, description="Search L0 abstracts, best first; read_memory the URIs it recommends.")
    async def search_memory(
        query: Annotated[str, Field(description="Chinese or English.")],
        top_k: Annotated[int, Field(json_schema_extra={"minimum": 1, "maximum": 50})] = 10,
        score_threshold: Annotated[
            float | None, Field(description="Final score floor; omit: the default.", json_schema_extra=_UNIT)
        ] = None,
        score_gte: Annotated[bool, Field(description=">= instead of >.")] = False,
        categories: list[str] | None = None,
        target_uri: Annotated[str | None, Field(description="Subtree.")] = None,
        owner_space: Annotated[str | None, Field(description="shared, user:<s> or agent:<s>.")] = None,
        session_archive: Annotated[dict[str, Any] | None, Field(description="{messages: [...]}")] = None,
        planner_hints: Annotated[dict[str, Any] | None, Field(description="{intent, terms, ...}")] = None,
        include_debug: bool = False,
        trace_level: Literal["basic", "detailed"] = "basic",
        conversation_id: Annotated[str | None, Field(description="Messages of this conversation.")] = None,
        time_range: Annotated[
            dict[str, Any] | None, Field(description="{start, end}: ISO 8601, on occurred_at.")
        ] = None,
        metadata_filter: Annotated[dict[str, Any] | None, Field(description="{key: value or [values]}")] = None,
        response_format: ResponseFormat = "compact",
        user_space: Annotated[str | None, Field(description="Admin: as this user.")] = None,
        session_id: Annotated[str | None, Field(json_schema_extra=DEPRECATED)] = None,  # conversation_id's old name
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = _arguments(locals())
        return await run(
            ctx,
            ErrorCode.QUERY_INVALID,
            lambda: SearchMemoryRequest.model_validate({k: v for k, v in args.items() if v is not None}),
            calls.search_memory,
        )

    @mcp.tool(annotations=read_only, description="Read one URI at L1 (overview) or L2 (content, paged).")
    async def read_memory(
        uri: str,
        level: Literal["L1", "L2"] = "L1",
        expand_relations: bool = False,
        max_relations: Annotated[
            int, Field(description="Up to the server limit (50).", json_schema_extra={"minimum": 0})
        ] = 0,
        include_debug: bool = False,
        offset: Annotated[int, Field(json_schema_extra={"minimum": 0})] = 0,
        max_chars: int | None = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = _arguments(locals())
        return await run(ctx, ErrorCode.QUERY_INVALID, lambda: ReadMemoryRequest(**args), calls.read_memory)

    @mcp.tool(
        annotations=audited,
        description="Runbook evidence for an ops question; repeats in a session come back DEDUPED.",
    )
    async def lookup_knowledge(
        query: str,
        session_id: str | None = None,
        top_k: Annotated[int | None, Field(json_schema_extra={"minimum": 1, "maximum": 50})] = None,
        mode: SemanticMode | None = None,
        min_similarity: Annotated[float | None, Field(json_schema_extra={"minimum": -1, "maximum": 1})] = None,
        target_uri: str | None = None,
        context_token_budget: Annotated[int | None, Field(json_schema_extra={"minimum": 1})] = None,
        response_format: ResponseFormat = "compact",
        include_debug: bool = False,
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = _arguments(locals())
        return await run(ctx, ErrorCode.QUERY_INVALID, lambda: LookupRequest(**args), calls.lookup_knowledge)

    @mcp.tool(annotations=read_only, description="Check that a quote is backed by a lookup's evidence.")
    async def verify_evidence(
        invocation_id: str,
        excerpt: str,
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = _arguments(locals())
        return await run(ctx, ErrorCode.QUERY_INVALID, lambda: VerifyEvidenceRequest(**args), _verify)

    @mcp.tool(annotations=read_only, description="A ctx:// directory's children, or one node: L0 or L1 text, paged.")
    async def ls(
        uri: str = "ctx://resources/",
        level: BrowseLevel = "L0",
        limit: Annotated[int, Field(ge=1, le=200)] = 50,
        offset: Annotated[int, Field(ge=0)] = 0,  # the bound (LsRequest) answers RET-4001: not worth tool-list bytes
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = _arguments(locals())
        return await run(ctx, ErrorCode.QUERY_INVALID, lambda: LsRequest(**args), calls.ls_compact)

    @mcp.tool(annotations=read_only, description="A ctx:// subtree, short L0 texts, breadth-first.")
    async def tree(
        uri: str = "ctx://resources/",
        max_depth: Annotated[int, Field(ge=0, le=10)] = 2,
        max_nodes: Annotated[int, Field(ge=1, le=1000)] = 100,
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = _arguments(locals())
        return await run(ctx, ErrorCode.QUERY_INVALID, lambda: TreeRequest(**args), calls.tree_compact)

    @mcp.tool(annotations=writes, description="Store a memory; near-duplicates skipped unless policy says.")
    async def add_memory(
        text: str,
        category: str | None = None,
        uri: Annotated[str | None, Field(description="Under ctx://user/<s>/memories/.")] = None,
        metadata: dict[str, Any] | None = None,
        occurred_at: Annotated[Timestamp | None, Field(description="ISO 8601 or Unix s.")] = None,
        policy: DedupPolicy | None = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: AddMemoryRequest(**args), calls.add_memory)

    @mcp.tool(annotations=writes, description="Store several memories, all or nothing.")
    async def add_memories(
        items: list[MemoryItemIn],
        policy: DedupPolicy | None = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: AddMemoriesRequest(**args), calls.add_memories)

    @mcp.tool(annotations=audited, description="Store a conversation's messages as memories, all or nothing.")
    async def add_messages(
        messages: list[MessageIn],
        conversation_id: Annotated[str | None, Field(description="One URI segment.")] = None,  # required: REQUIRED_ARGS
        session_id: Annotated[str | None, Field(json_schema_extra=DEPRECATED)] = None,  # conversation_id's old name
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = {k: v for k, v in _arguments(locals()).items() if v is not None}
        return await run(
            ctx, ErrorCode.REQUEST_INVALID, lambda: AddMessagesRequest.model_validate(args), calls.add_messages
        )

    @mcp.tool(annotations=read_only, description="The caller's memories, newest first.")
    async def list_memories(
        category: Annotated[str | None, Field(max_length=255)] = None,
        conversation_id: Annotated[str | None, Field(max_length=255)] = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        offset: Annotated[int, Field(ge=0, le=1_000_000_000)] = 0,
        user_space: Annotated[str | None, Field(max_length=255, description="Admin: this user's.")] = None,
        session_id: Annotated[str | None, Field(max_length=255, json_schema_extra=DEPRECATED)] = None,  # old name
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = _arguments(locals())
        return await run(
            ctx, ErrorCode.REQUEST_INVALID, lambda: ListMemoriesRequest.model_validate(args), calls.list_memories
        )

    @mcp.tool(annotations=read_only, description="One memory's text and history.")
    async def get_memory(
        uri: str,
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: MemoryUriRequest(**args), calls.get_memory)

    @mcp.tool(annotations=writes, description="Replace a memory's text (old text kept in history).")
    async def update_memory(
        uri: str,
        text: str,
        metadata: dict[str, Any] | None = None,
        occurred_at: Timestamp | None = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: UpdateMemoryRequest(**args), calls.update_memory)

    @mcp.tool(
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=False),
        description="Delete a memory.",
    )
    async def delete_memory(
        uri: str,
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: MemoryUriRequest(**args), calls.delete_memory)

    @mcp.tool(annotations=writes, description="Add a document: text at a file URI, or a server-side path.")
    async def add_resource(
        uri: Annotated[str, Field(description="Under ctx://resources/.")] = "ctx://resources/",
        text: str | None = None,
        path: str | None = None,
        strict: Annotated[bool, Field(description="Fail on a bad file.")] = False,
        ctx: Context | None = None,
    ) -> CallToolResult:
        if (text is None) == (path is None):
            return _error(
                ContextEngineError(ErrorCode.REQUEST_INVALID, "give exactly one of text and path"),
                _new_id(_request_of(ctx)),
            )
        if text is not None:
            return await run(
                ctx,
                ErrorCode.REQUEST_INVALID,
                lambda: AddResourceTextRequest(text=text, uri=uri),
                calls.add_resource_text,
            )
        return await run(
            ctx,
            ErrorCode.REQUEST_INVALID,
            lambda: AddResourcePathRequest(path=path or "", target_uri=uri, strict=strict),
            calls.add_resource_path,
        )

    @mcp.tool(annotations=writes, description="Store a skill in the caller's agent space.")
    async def add_skill(
        name: str,
        description: Annotated[str, Field(description="One line (the L0).")],
        content: str = "",
        category: str | None = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: AddSkillRequest(**args), calls.add_skill)

    return mcp


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("context-engine")
    except PackageNotFoundError:
        return "0"
