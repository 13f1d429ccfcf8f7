"""The MCP tool server (DESIGN.md §10) on the official Python SDK (``mcp`` 2.x, ``MCPServer``).

Tools: ``search_memory``, ``read_memory``, ``lookup_knowledge``, ``verify_evidence``, ``add_memory``,
``add_resource``, ``add_skill``, and the memory lifecycle: ``add_memories``, ``add_messages``, ``list_memories``,
``get_memory``, ``update_memory``, ``delete_memory``. Tool descriptions are one or two sentences: agents read the tool
list on every call.
Each has an input schema (its typed parameters) and an output schema (the engine's response model); each calls the
same function as the HTTP route (:mod:`context_engine.interfaces.http.calls`), so answers are identical.

Errors: a tool that fails returns ``isError: true`` with the envelope ``{code, message, details, request_id}`` as
its structured content and as JSON text, exactly the HTTP body. Invalid arguments get ``RET-4001`` (retrieval
tools) or ``WRT-4002`` (write and memory tools); invalid Unicode in any argument (a lone surrogate) ``RET-4001`` or
``WRT-4221``; unexpected errors ``API-5001`` with a generic message (the traceback goes to the log, on stderr). An
unknown tool name is a protocol error: a JSON-RPC error ``-32602`` (invalid params), not a tool result.

Transports: stdio (``context-engine mcp``; the caller's RequestContext is the CLI's ``--as``, default
``default:admin``) and streamable HTTP mounted on the HTTP server (the context comes from the request's API key, see
:mod:`context_engine.interfaces.http.app`). Logs go to stderr only: stdout belongs to the stdio protocol.

Cold start (issue 12): over stdio the engine opens on a background thread
(:class:`~context_engine.interfaces.mcp.background.BackgroundEngine`), so ``initialize`` and ``tools/list`` do not
wait for the stores or the embedding model; the service provider is called in the tool call's worker thread, where
it may block until the engine is open. The ``initialize`` result then carries the engine's state under
``_meta["context-engine/status"]`` (``{"engine": "opening" | "loading_model" | "ready" | "failed", "model_loaded":
bool}``), as it was when the answer was built; the same is logged as ``mcp_initialize``.
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
from pydantic import BaseModel, Field, ValidationError

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.http import calls
from context_engine.interfaces.http.models import (
    AddMemoriesRequest,
    AddMemoryRequest,
    AddMessagesRequest,
    AddResourcePathRequest,
    AddResourceTextRequest,
    AddSkillRequest,
    ListMemoriesRequest,
    MemoryItemIn,
    MemoryUriRequest,
    MessageIn,
    Timestamp,
    UpdateMemoryRequest,
    VerifyEvidenceRequest,
)
from context_engine.observability.logging import bind_request, get_logger
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import EvidenceVerification, LookupRequest, LookupResult, SemanticMode
from context_engine.schema.memory import DedupPolicy, MemoryDetail, MemoryListPage, MemoryWriteResult
from context_engine.schema.nodes import IngestReport
from context_engine.schema.query import ReadMemoryRequest, ReadMemoryResponse, SearchMemoryRequest, SearchMemoryResponse
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


def _result(model: BaseModel) -> CallToolResult:
    data = model.model_dump(mode="json")
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))], structured_content=data
    )


def _error(err: ContextEngineError, request_id: str) -> CallToolResult:
    body = err.envelope(request_id)
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
        is_error=True,
    )


def _invalid(err: ValidationError, code: ErrorCode) -> ContextEngineError:
    errors = [
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
    """``MCPServer`` whose argument-validation failures use the engine's envelope (``RET-4001``/``WRT-4002``)."""

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


def build_mcp_server(
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

    async def run(
        mcp_ctx: Context | None,
        code: ErrorCode,
        build: Callable[[], BaseModel],
        call: Callable[[ContextEngineService, Any, RequestContext], BaseModel],
    ) -> CallToolResult:
        request = _request_of(mcp_ctx)
        request_id = _new_id(request)
        try:
            ctx = resolve_ctx(request)
        except ContextEngineError as err:
            return _error(err, request_id)
        with bind_request(request_id, ctx, interface="mcp"):
            try:
                try:
                    req = build()
                except ValidationError as err:
                    raise _invalid(err, code) from None
                # service() runs in the worker thread: over stdio it blocks until the engine is open
                out = await anyio.to_thread.run_sync(lambda: call(service(), req, ctx))
                return _result(out)
            except ContextEngineError as err:
                log.info("tool_error", code=err.code.value, message=err.message)
                return _error(err, request_id)
            except Exception:  # the API-5001 envelope; the traceback goes to the log (stderr)
                log.exception("tool_crashed")
                return _error(ContextEngineError(ErrorCode.INTERNAL, "internal error; see the server log"), request_id)

    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    audited = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    )
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

    @mcp.tool(annotations=read_only)
    async def search_memory(
        query: Annotated[str, Field(description="What to look for (Chinese or English).")],
        top_k: Annotated[int, Field(description="Results wanted, 1..50.")] = 10,
        score_threshold: Annotated[
            float | None, Field(description="Final-score threshold 0..1; null: default.")
        ] = None,
        score_gte: Annotated[bool, Field(description="Compare with >= instead of >.")] = False,
        categories: Annotated[list[str] | None, Field(description="Only these categories.")] = None,
        target_uri: Annotated[str | None, Field(description="Only this visible subtree.")] = None,
        owner_space: Annotated[
            str | None, Field(description="Only this owner space (shared, user:<s>, agent:<s>).")
        ] = None,
        session_archive: Annotated[
            dict[str, Any] | None, Field(description="Recent messages: {messages: [...]}.")
        ] = None,
        planner_hints: Annotated[
            dict[str, Any] | None, Field(description="{intent, terms, must_have_terms, ...}.")
        ] = None,
        include_debug: bool = False,
        trace_level: Literal["basic", "detailed"] = "basic",
        session_id: Annotated[str | None, Field(description="Only this conversation session's messages.")] = None,
        time_range: Annotated[
            dict[str, Any] | None, Field(description="Memories with start <= occurred_at < end (ISO 8601).")
        ] = None,
        metadata_filter: Annotated[
            dict[str, Any] | None, Field(description="Memories whose metadata has key == value (or in a list).")
        ] = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, SearchMemoryResponse]:
        """First-round retrieval: L0 candidates (abstracts) ranked for the query, with the URIs worth reading next
        (next_actions). Never returns L1/L2 text: call read_memory for that."""
        args = _arguments(locals())
        return await run(
            ctx,
            ErrorCode.QUERY_INVALID,
            lambda: SearchMemoryRequest(**{k: v for k, v in args.items() if v is not None}),
            calls.search_memory,
        )

    @mcp.tool(annotations=read_only)
    async def read_memory(
        uri: Annotated[str, Field(description="A ctx:// URI from search_memory.")],
        level: Annotated[Literal["L1", "L2"], Field(description="L1 overview or L2 content.")] = "L1",
        expand_relations: bool = False,
        max_relations: Annotated[int, Field(description="One-hop relations to add, 0..50.")] = 0,
        include_debug: bool = False,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, ReadMemoryResponse]:
        """Explicit drill-down: the L1 overview or the L2 content (secrets redacted) of one node."""
        args = _arguments(locals())
        return await run(ctx, ErrorCode.QUERY_INVALID, lambda: ReadMemoryRequest(**args), calls.read_memory)

    @mcp.tool(annotations=audited)
    async def lookup_knowledge(
        query: Annotated[str, Field(description="The alert, error, symptom or question.")],
        session_id: Annotated[str | None, Field(description="Diagnosis session: repeats come back DEDUPED.")] = None,
        top_k: Annotated[int | None, Field(description="Evidence documents wanted, 1..50; null: default.")] = None,
        mode: Annotated[SemanticMode | None, Field(description="auto, primary or fallback; null: default.")] = None,
        min_similarity: Annotated[
            float | None, Field(description="Similarity floor (calibrated scale, -1..1); null: default.")
        ] = None,
        target_uri: Annotated[str | None, Field(description="Only this visible subtree.")] = None,
        context_token_budget: Annotated[int | None, Field(description="Token budget of the context pack.")] = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, LookupResult]:
        """Runbook evidence for an operations question: evidence blocks with relevance levels, a context pack under
        a token budget, and an invocation_id whose evidence refs back later quotes."""
        args = _arguments(locals())
        return await run(ctx, ErrorCode.QUERY_INVALID, lambda: LookupRequest(**args), calls.lookup_knowledge)

    @mcp.tool(annotations=read_only)
    async def verify_evidence(
        invocation_id: Annotated[str, Field(description="The invocation_id of a lookup_knowledge result.")],
        excerpt: Annotated[str, Field(description="The quoted text to check.")],
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, EvidenceVerification]:
        """Whether a quoted excerpt is backed by an evidence ref recorded for that lookup_knowledge call."""
        args = _arguments(locals())
        return await run(ctx, ErrorCode.QUERY_INVALID, lambda: VerifyEvidenceRequest(**args), _verify)

    @mcp.tool(annotations=writes)
    async def add_memory(
        text: Annotated[str, Field(description="The memory text.")],
        category: Annotated[str | None, Field(description="preference, profile, event, ...")] = None,
        uri: Annotated[str | None, Field(description="Explicit URI under ctx://user/<space>/memories/.")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="JSON object kept with it.")] = None,
        occurred_at: Annotated[Timestamp | None, Field(description="ISO 8601 or Unix seconds.")] = None,
        policy: Annotated[DedupPolicy | None, Field(description="Near-duplicate policy.")] = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, IngestReport]:
        """Store a memory in the caller's user space; the same text maps to the same node (idempotent), a
        near-duplicate is skipped by default (duplicates=1, uris names the existing one)."""
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: AddMemoryRequest(**args), calls.add_memory)

    @mcp.tool(annotations=writes)
    async def add_memories(
        items: Annotated[list[MemoryItemIn], Field(description="The memories.")],
        policy: Annotated[DedupPolicy | None, Field(description="Near-duplicate policy.")] = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, MemoryWriteResult]:
        """Store several memories in one all-or-nothing write; one outcome per item, in order."""
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: AddMemoriesRequest(**args), calls.add_memories)

    @mcp.tool(annotations=audited)
    async def add_messages(
        session_id: Annotated[str, Field(description="Conversation id (one URI segment).")],
        messages: Annotated[list[MessageIn], Field(description="In conversation order.")],
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, MemoryWriteResult]:
        """Store conversation messages of one session as memories (one per message, in order), all or nothing."""
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: AddMessagesRequest(**args), calls.add_messages)

    @mcp.tool(annotations=read_only)
    async def list_memories(
        category: str | None = None,
        session_id: str | None = None,
        limit: Annotated[int, Field(description="1..200.")] = 20,
        offset: int = 0,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, MemoryListPage]:
        """The caller's memories (L0 abstracts), newest first, one page."""
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: ListMemoriesRequest(**args), calls.list_memories)

    @mcp.tool(annotations=read_only)
    async def get_memory(
        uri: str,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, MemoryDetail]:
        """One memory's full text and its earlier versions (history)."""
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: MemoryUriRequest(**args), calls.get_memory)

    @mcp.tool(annotations=writes)
    async def update_memory(
        uri: str,
        text: str,
        metadata: Annotated[dict[str, Any] | None, Field(description="Default: kept.")] = None,
        occurred_at: Annotated[Timestamp | None, Field(description="Default: kept.")] = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, MemoryWriteResult]:
        """Replace a memory's text; the previous text stays in its history."""
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: UpdateMemoryRequest(**args), calls.update_memory)

    @mcp.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
        )
    )
    async def delete_memory(
        uri: str,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, IngestReport]:
        """Delete one memory and its versions."""
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: MemoryUriRequest(**args), calls.delete_memory)

    @mcp.tool(annotations=writes)
    async def add_resource(
        uri: Annotated[
            str, Field(description="Target: a file URI (text) or a directory URI (path) under ctx://resources/.")
        ] = "ctx://resources/",
        text: Annotated[str | None, Field(description="The document as text (markdown); give text or path.")] = None,
        path: Annotated[
            str | None, Field(description="A server-side file or directory below http.allowed_upload_roots.")
        ] = None,
        strict: Annotated[bool, Field(description="With path: fail on the first bad file.")] = False,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, IngestReport]:
        """Add a resource document (text at a file URI) or server-side files (path), then summarise and index it."""
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

    @mcp.tool(annotations=writes)
    async def add_skill(
        name: Annotated[str, Field(description="Skill name (a URI segment).")],
        description: Annotated[str, Field(description="One-line description (becomes the L0).")],
        content: Annotated[str, Field(description="The skill body (markdown).")] = "",
        category: Annotated[str | None, Field(description="Tool family.")] = None,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, IngestReport]:
        """Store a skill in the caller's agent space."""
        args = _arguments(locals())
        return await run(ctx, ErrorCode.REQUEST_INVALID, lambda: AddSkillRequest(**args), calls.add_skill)

    return mcp


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("context-engine")
    except PackageNotFoundError:
        return "0"
