"""The HTTP routes (DESIGN.md §10). Each is a thin translation: typed request in, one call into
:mod:`.calls` (or the service), typed response out. Retrieval and write routes are sync ``def``: FastAPI runs them
in its thread pool, so the CPU-bound engine never blocks the event loop.

The caller's RequestContext comes only from its API key (:func:`caller`), never from the request body.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from fastapi import APIRouter, Depends, File, Form, Query, Request, Security, UploadFile
from fastapi import Path as PathParam
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from context_engine.api import calls
from context_engine.api.models import (
    AddMemoriesRequest,
    AddMemoryRequest,
    AddMessagesRequest,
    AddResourcePathRequest,
    AddResourceTextRequest,
    AddSkillRequest,
    DeleteRequest,
    HealthResponse,
    ListMemoriesRequest,
    LsResponse,
    MemoryUriRequest,
    MoveRequest,
    ReadyResponse,
    SimilarSearchRequest,
    StatsResponse,
    ToolInvocationList,
    TreeResponse,
    UpdateMemoryRequest,
    VerifyEvidenceRequest,
)
from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.http.errors import (
    GUARD_ERRORS,
    MEMORY_ERRORS,
    MEMORY_TAG,
    READ_ERRORS,
    WRITE_ERRORS,
    WRITE_TAG,
    ErrorEnvelope,
)
from context_engine.interfaces.http.validation import reject_invalid_text
from context_engine.observability.logging import get_logger
from context_engine.schema.compact import LookupCompact, SearchMemoryCompact
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import (
    EvidenceVerification,
    LookupRequest,
    LookupResult,
    SessionTraceSummary,
    ToolInvocation,
)
from context_engine.schema.memory import AddMemoryResult, MemoryDetail, MemoryListPage, MemoryWriteResult
from context_engine.schema.memory_events import MemoryEventPage
from context_engine.schema.nodes import IngestReport
from context_engine.schema.query import ReadMemoryRequest, ReadMemoryResponse, SearchMemoryRequest, SearchMemoryResponse
from context_engine.schema.views import SimilarSearchResult
from context_engine.service import ContextEngineService

router = APIRouter(dependencies=[Depends(reject_invalid_text)])  # invalid Unicode: 400 before anything runs
_T = TypeVar("_T")
_DISCONNECT_POLL_S = 0.25  # how often a long write looks whether its client is still there
log = get_logger("context_engine.http")
_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key from `context-engine keys create`: `Authorization: Bearer ce_<id>_<secret>`.",
)


async def engine(request: Request) -> ContextEngineService:
    """The open service (``API-5031`` while starting or stopping)."""
    return request.app.state.engine.ready()


async def caller(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)] = None,
) -> RequestContext:
    """The RequestContext of the request's API key (or of anonymous loopback access); ``AUTH-4011`` otherwise."""
    state = request.app.state.engine
    state.ready()
    principal = await state.authenticator.authenticate(request)
    return principal.ctx


def timed(request: Request, fn: Callable[..., _T], *args: Any) -> _T:
    """Run one engine call and record its duration for the ``Server-Timing`` header and the access log."""
    start = time.perf_counter()
    try:
        return fn(*args)
    finally:
        request.scope.setdefault("state", {})["engine_ms"] = (time.perf_counter() - start) * 1000.0


async def cancellable_write(request: Request, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Run the write ``fn(*args, cancel=event, **kwargs)`` in the thread pool while watching the connection: when the
    client disconnects, the event is set and the write stops between embedding batches with ``WRT-4991``, before it
    has written anything (docs/security.md, "Cost bombs"), instead of working on for nobody."""
    cancel = threading.Event()

    async def watch() -> None:
        while not await request.is_disconnected():
            await anyio.sleep(_DISCONNECT_POLL_S)
        cancel.set()
        log.warning("client_disconnected", path=request.url.path, action="cancelling the write")

    start = time.perf_counter()
    failure: Exception | None = None
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watch)
        try:
            result = await anyio.to_thread.run_sync(functools.partial(fn, *args, cancel=cancel, **kwargs))
        except Exception as err:  # noqa: BLE001 - re-raised below, outside the task group (no exception group)
            failure = err
        finally:
            tasks.cancel_scope.cancel()
    request.scope.setdefault("state", {})["engine_ms"] = (time.perf_counter() - start) * 1000.0
    if failure is None:
        return result
    if isinstance(failure, ContextEngineError) and failure.code is ErrorCode.WRITE_CANCELLED:
        waited_ms = round((time.perf_counter() - start) * 1000)
        log.warning("write_cancelled", path=request.url.path, after_ms=waited_ms, **failure.details)
    raise failure


Service = Annotated[ContextEngineService, Depends(engine)]
Caller = Annotated[RequestContext, Depends(caller)]


# ---- retrieval ------------------------------------------------------------------------------------------------------
@router.post(
    "/api/v1/search_memory",
    response_model=SearchMemoryResponse | SearchMemoryCompact,
    tags=["retrieval"],
    responses=READ_ERRORS,
    operation_id="search_memory",
    summary="First-round retrieval: L0 candidates and recommended reads",
)
def search_memory(
    req: SearchMemoryRequest, service: Service, ctx: Caller, request: Request
) -> SearchMemoryResponse | SearchMemoryCompact:
    """Plan typed queries, recall L0 abstracts, expand the hierarchy, recheck, score and assemble (seed 000 §4-6).
    Never reads L1/L2: ``next_actions`` recommends the URIs worth reading with ``read_memory``.
    ``response_format``: ``full`` (default) or ``compact`` (``SearchMemoryCompact``, issue 15)."""
    return timed(request, calls.search_memory, service, req, ctx)


@router.post(
    "/api/v1/read_memory",
    response_model=ReadMemoryResponse,
    tags=["retrieval"],
    responses=READ_ERRORS,
    operation_id="read_memory",
    summary="Explicit drill-down: L1 overview or L2 content of one URI",
)
def read_memory(req: ReadMemoryRequest, service: Service, ctx: Caller, request: Request) -> ReadMemoryResponse:
    """ACL first: an invisible or missing URI gives the same ``RET-4032`` (403). L2 text is redacted."""
    return timed(request, calls.read_memory, service, req, ctx)


@router.post(
    "/api/search/similar",
    response_model=SimilarSearchResult,
    tags=["retrieval"],
    responses=READ_ERRORS,
    operation_id="search_similar",
    summary="Raw semantic search, one result per document (live evaluation)",
)
def search_similar(req: SimilarSearchRequest, service: Service, ctx: Caller, request: Request) -> SimilarSearchResult:
    """``{query, top_k}`` -> ``{results: [{doc_id, score, ...}]}``, best first; ``score`` is cosine similarity.
    No planner, hint layer, session dedup or audit: the raw semantic layer, for live acceptance (seed 001 §9)."""
    return timed(request, calls.similar_search, service, req, ctx)


# ---- lookup_knowledge -----------------------------------------------------------------------------------------------
@router.post(
    "/api/v1/lookup_knowledge",
    response_model=LookupResult | LookupCompact,
    tags=["knowledge"],
    responses=READ_ERRORS,
    operation_id="lookup_knowledge",
    summary="Runbook evidence for an operations question",
)
def lookup_knowledge(
    req: LookupRequest, service: Service, ctx: Caller, request: Request
) -> LookupResult | LookupCompact:
    """Hint layer + semantic layer over L2 chunks, relevance levels, session dedup, context pack, one audit row.
    ``response_format``: ``full`` (default) or ``compact`` (``LookupCompact``, issue 15)."""
    return timed(request, calls.lookup_knowledge, service, req, ctx)


@router.get(
    "/api/v1/tool_invocations",
    response_model=ToolInvocationList,
    tags=["knowledge"],
    responses=READ_ERRORS,
    operation_id="list_tool_invocations",
    summary="The caller's audit rows (an admin: its account's), newest first",
)
def list_tool_invocations(
    service: Service,
    ctx: Caller,
    session_id: Annotated[str | None, Query(max_length=256, description="Only this session.")] = None,
    tool_name: Annotated[str | None, Query(max_length=64, description="Only this tool.")] = None,
    since: Annotated[datetime | None, Query(description="created_at >= since (ISO 8601).")] = None,
    until: Annotated[datetime | None, Query(description="created_at < until (ISO 8601).")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> ToolInvocationList:
    rows = service.list_invocations(
        ctx, session_id=session_id, tool_name=tool_name, since=since, until=until, limit=limit, offset=offset
    )
    return ToolInvocationList(items=rows, limit=limit, offset=offset)


@router.get(
    "/api/v1/tool_invocations/summary",
    response_model=SessionTraceSummary,
    tags=["knowledge"],
    responses=READ_ERRORS,
    operation_id="session_trace_summary",
    summary="What a session's tool calls did",
)
def session_trace_summary(
    service: Service, ctx: Caller, session_id: Annotated[str, Query(min_length=1, max_length=256)]
) -> SessionTraceSummary:
    return service.session_trace_summary(session_id, ctx)


@router.get(
    "/api/v1/tool_invocations/{invocation_id}",
    response_model=ToolInvocation,
    tags=["knowledge"],
    responses={
        **READ_ERRORS,
        404: {"model": ErrorEnvelope, "description": "No such invocation for this caller (RET-4041)."},
    },
    operation_id="get_tool_invocation",
    summary="One audit row of the caller (an admin: of its account)",
)
def get_tool_invocation(
    service: Service, ctx: Caller, invocation_id: Annotated[str, PathParam(min_length=1, max_length=64)]
) -> ToolInvocation:
    """404 ``RET-4041`` when the caller has no such invocation: another user's reads exactly like a missing one."""
    return service.get_invocation(invocation_id, ctx)


@router.post(
    "/api/v1/verify_evidence",
    response_model=EvidenceVerification,
    tags=["knowledge"],
    responses=READ_ERRORS,
    operation_id="verify_evidence",
    summary="Is a quoted excerpt backed by a recorded evidence ref?",
)
def verify_evidence(req: VerifyEvidenceRequest, service: Service, ctx: Caller) -> EvidenceVerification:
    return service.verify_evidence(req.invocation_id, req.excerpt, ctx)


# ---- browsing -------------------------------------------------------------------------------------------------------
@router.get(
    "/api/v1/stats",
    response_model=StatsResponse,
    tags=["browse"],
    responses=READ_ERRORS,
    operation_id="stats",
    summary="Counts of the account's nodes and the index's state (admin keys)",
)
def stats(service: Service, ctx: Caller) -> StatsResponse:
    """What ``context-engine stats`` prints (issue 29: the CLI's ``--url`` mode). Account-wide counts: an admin key
    only (``403 RET-4032`` for others, who see part of the account); every count is of the key's account alone,
    ``index_records`` too (it was the shared index's total: one tenant could watch another's writes)."""
    if not ctx.is_admin:
        raise ContextEngineError(ErrorCode.URI_FORBIDDEN, "stats of the account need an admin key")
    info = service.stats(ctx)
    info.pop("home", None)  # the server's own path is no business of a remote caller
    return StatsResponse(**info)


@router.get(
    "/api/v1/ls",
    response_model=LsResponse,
    tags=["browse"],
    responses=READ_ERRORS,
    operation_id="ls",
    summary="Children of a directory with their L0 abstracts",
)
def ls(
    service: Service,
    ctx: Caller,
    uri: Annotated[str, Query(max_length=4096, description="A directory URI.")] = "ctx://resources/",
) -> LsResponse:
    return LsResponse(uri=uri, nodes=service.ls(uri, ctx))


@router.get(
    "/api/v1/tree",
    response_model=TreeResponse,
    tags=["browse"],
    responses=READ_ERRORS,
    operation_id="tree",
    summary="A subtree with each node's L0 abstract",
)
def tree(
    service: Service,
    ctx: Caller,
    uri: Annotated[str, Query(max_length=4096, description="Root of the tree.")] = "ctx://resources/",
    max_depth: Annotated[int, Query(ge=0, le=10, description="Levels below the root.")] = 3,
) -> TreeResponse:
    return TreeResponse(uri=uri, root=service.tree(uri, ctx, max_depth=max_depth))


# ---- writes ---------------------------------------------------------------------------------------------------------
@router.post(
    "/api/v1/resources",
    response_model=IngestReport,
    tags=[WRITE_TAG],
    responses=WRITE_ERRORS,
    operation_id="add_resource_path",
    summary="Add server-side files below an allowed root",
)
async def add_resource_path(
    req: AddResourcePathRequest, service: Service, ctx: Caller, request: Request
) -> IngestReport:
    return await cancellable_write(request, calls.add_resource_path, service, req, ctx)


@router.post(
    "/api/v1/resources/text",
    response_model=IngestReport,
    tags=[WRITE_TAG],
    responses=WRITE_ERRORS,
    operation_id="add_resource_text",
    summary="Add one resource document given as text",
)
async def add_resource_text(
    req: AddResourceTextRequest, service: Service, ctx: Caller, request: Request
) -> IngestReport:
    return await cancellable_write(request, calls.add_resource_text, service, req, ctx)


@router.post(
    "/api/v1/resources/upload",
    response_model=IngestReport,
    tags=[WRITE_TAG],
    responses=WRITE_ERRORS,
    operation_id="add_resource_upload",
    summary="Upload .md/.markdown/.txt files as resources",
)
async def add_resource_upload(
    service: Service,
    ctx: Caller,
    request: Request,
    files: Annotated[list[UploadFile], File(description="One or more files (multipart field 'files').")],
    target_uri: Annotated[str, Form(description="Target directory (or file URI for one file).")] = ("ctx://resources/"),
    strict: Annotated[bool, Form(description="Fail on the first bad file.")] = False,
) -> IngestReport:
    """The whole body is limited by ``http.max_upload_bytes`` and each file by ``ingest.max_file_bytes``."""
    workdir = Path(tempfile.mkdtemp(prefix="ce-upload-"))
    try:
        staged = [(f.filename or "upload.md", await f.read()) for f in files]
        return await cancellable_write(
            request, calls.add_resource_files, service, staged, target_uri, ctx, strict=strict, workdir=workdir
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ---- memories (issue 11) --------------------------------------------------------------------------------------------
@router.post(
    "/api/v1/memories",
    response_model=AddMemoryResult,
    tags=[MEMORY_TAG],
    responses=MEMORY_ERRORS,
    operation_id="add_memory",
    summary="Store a memory in the caller's user space",
)
def add_memory(req: AddMemoryRequest, service: Service, ctx: Caller) -> AddMemoryResult:
    """The same normalised text is the same memory (``unchanged``); a near-duplicate follows ``policy``: with
    ``skip`` nothing is written, ``duplicates`` is 1 and ``uris`` names the existing memory. ``items[0]`` is the
    memory's outcome, as in the batch answers (``status``, ``duplicate_of``, ``similarity``)."""
    return calls.add_memory(service, req, ctx)


@router.post(
    "/api/v1/memories/batch",
    response_model=MemoryWriteResult,
    tags=[MEMORY_TAG],
    responses=MEMORY_ERRORS,
    operation_id="add_memories",
    summary="Store a batch of memories in one all-or-nothing write",
)
def add_memories(req: AddMemoriesRequest, service: Service, ctx: Caller, request: Request) -> MemoryWriteResult:
    """One outcome per item, in input order: ``added``, ``unchanged``, ``duplicate`` (with ``duplicate_of``) or
    ``replaced``. A bad item fails the whole batch (its index in ``details.index``); nothing is written then."""
    return timed(request, calls.add_memories, service, req, ctx)


@router.post(
    "/api/v1/memories/messages",
    response_model=MemoryWriteResult,
    tags=[MEMORY_TAG],
    responses=MEMORY_ERRORS,
    operation_id="add_messages",
    summary="Store the messages of one conversation as memories",
)
def add_messages(req: AddMessagesRequest, service: Service, ctx: Caller, request: Request) -> MemoryWriteResult:
    """Message ``i`` becomes ``ctx://user/<space>/memories/sessions/<conversation_id>/<seq>.md`` (``items[i].uri``);
    one all-or-nothing write, numbering continuing the conversation. ``session_id``: the deprecated name of
    ``conversation_id``, still accepted."""
    return timed(request, calls.add_messages, service, req, ctx)


@router.get(
    "/api/v1/memories",
    response_model=MemoryListPage,
    tags=[MEMORY_TAG],
    responses=MEMORY_ERRORS,
    operation_id="list_memories",
    summary="The caller's memories, newest first, one page",
)
def list_memories(req: Annotated[ListMemoriesRequest, Query()], service: Service, ctx: Caller) -> MemoryListPage:
    """L0 abstracts with ``created_at``, ``updated_at``, ``occurred_at``, ``metadata`` and ``version``;
    ``next_offset`` is null on the last page."""
    return calls.list_memories(service, req, ctx)


@router.get(
    "/api/v1/memories/item",
    response_model=MemoryDetail,
    tags=[MEMORY_TAG],
    responses=MEMORY_ERRORS,
    operation_id="get_memory",
    summary="One memory: its text and earlier versions",
)
def get_memory(
    service: Service,
    ctx: Caller,
    uri: Annotated[str, Query(max_length=4096, description="The memory's URI.")],
) -> MemoryDetail:
    """The current text (secrets redacted) and ``history`` (earlier versions, oldest first). Missing and not
    visible give the same ``403 RET-4032`` body."""
    return calls.get_memory(service, MemoryUriRequest(uri=uri), ctx)


@router.get(
    "/api/v1/memories/events",
    response_model=MemoryEventPage,
    tags=[MEMORY_TAG],
    responses=MEMORY_ERRORS,
    operation_id="list_memory_events",
    summary="A user's memory events (ADD, UPDATE, DELETE), newest first, one page",
)
def list_memory_events(
    service: Service,
    ctx: Caller,
    user_space: Annotated[
        str | None, Query(max_length=255, description="An admin key: this user's events. Others: only their own.")
    ] = None,
    uri: Annotated[str | None, Query(max_length=4096, description="Only this memory's events, deleted or not.")] = None,
    limit: Annotated[int, Query(ge=1, le=200, description="Page size, 1..200.")] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000, description="Events to skip.")] = 0,
) -> MemoryEventPage:
    """Each change of a memory, recorded with its write: ``ADD`` (``version_after``, ``abstract_after``), ``UPDATE``
    (both versions and abstracts), ``DELETE`` (what the memory was). The caller's own user space; an admin key names
    the user with ``user_space``; another account's events are never read. A ``uri`` that is no memory the caller
    may see is ``403 RET-4032``, the same whether or not it ever existed. An empty ``user_space`` is no narrowing."""
    return service.list_memory_events(ctx, user_space=user_space or None, uri=uri, limit=limit, offset=offset)


@router.post(
    "/api/v1/memories/update",
    response_model=MemoryWriteResult,
    tags=[MEMORY_TAG],
    responses=MEMORY_ERRORS,
    operation_id="update_memory",
    summary="Replace a memory's text, keeping the previous version",
)
def update_memory(req: UpdateMemoryRequest, service: Service, ctx: Caller, request: Request) -> MemoryWriteResult:
    """Re-embedded, ``version`` + 1 (``updated``), or ``unchanged`` for the same text. Missing, not visible or not
    writable: the same ``403 RET-4032`` body."""
    return timed(request, calls.update_memory, service, req, ctx)


@router.post(
    "/api/v1/memories/delete",
    response_model=IngestReport,
    tags=[MEMORY_TAG],
    responses=MEMORY_ERRORS,
    operation_id="delete_memory",
    summary="Delete one memory and its versions",
)
def delete_memory(req: MemoryUriRequest, service: Service, ctx: Caller) -> IngestReport:
    """Missing, not visible or not writable: the same ``403 RET-4032`` body."""
    return calls.delete_memory(service, req, ctx)


@router.post(
    "/api/v1/skills",
    response_model=IngestReport,
    tags=[WRITE_TAG],
    responses=WRITE_ERRORS,
    operation_id="add_skill",
    summary="Store a skill in the caller's agent space",
)
def add_skill(req: AddSkillRequest, service: Service, ctx: Caller) -> IngestReport:
    return calls.add_skill(service, req, ctx)


@router.post(
    "/api/v1/delete",
    response_model=IngestReport,
    tags=[WRITE_TAG],
    responses=WRITE_ERRORS,
    operation_id="delete",
    summary="Delete a node (a directory with recursive)",
)
def delete(req: DeleteRequest, service: Service, ctx: Caller) -> IngestReport:
    return service.delete(req.uri, ctx, recursive=req.recursive)


@router.post(
    "/api/v1/move",
    response_model=IngestReport,
    tags=[WRITE_TAG],
    responses=WRITE_ERRORS,
    operation_id="move",
    summary="Move or rename a node and its subtree",
)
def move(req: MoveRequest, service: Service, ctx: Caller) -> IngestReport:
    return service.move(req.src, req.dst, ctx)


# ---- operations -----------------------------------------------------------------------------------------------------
@router.get(
    "/healthz", response_model=HealthResponse, tags=["operations"], operation_id="healthz", responses=GUARD_ERRORS
)
async def healthz() -> HealthResponse:
    """Liveness: the process answers (the engine may still be loading)."""
    return HealthResponse()


@router.get(
    "/readyz",
    response_model=ReadyResponse,
    tags=["operations"],
    operation_id="readyz",
    responses={**GUARD_ERRORS, 503: {"model": ErrorEnvelope, "description": "Starting or stopping (API-5031)."}},
)
async def readyz(request: Request) -> ReadyResponse:
    """Readiness: the engine is open (model loaded, stores open) and requests are served; ``degraded`` with the
    ``problems`` when a derived structure is damaged (a vector index whose files are missing or truncated: reads are
    served from the metadata database meanwhile, and `context-engine reindex --full` rebuilds it)."""
    state = request.app.state.engine
    service = state.ready()
    problems = await run_in_threadpool(service.health)  # opens and checks the vector index: file reads
    return ReadyResponse(
        status="degraded" if problems else "ready",
        problems=problems,
        embedding_model=service.embedder.model_name,
        index_backend=service.index.name,
        auth=f"api_key; anonymous loopback {state.authenticator.anonymous_policy()}",
        pid=os.getpid(),
    )


@router.get(
    "/metrics",
    tags=["operations"],
    operation_id="metrics",
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {}}, "description": "Prometheus text format."},
        **GUARD_ERRORS,
    },
)
async def metrics(request: Request) -> Response:
    """Prometheus metrics of this process (the mapping from seed 000 §8 names is in docs/interfaces.md)."""
    service = request.app.state.engine.ready()
    return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)
