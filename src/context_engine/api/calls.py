"""The engine calls that the HTTP routes and the MCP tools share, so the same question gets the same answer (and the
same log line) whichever way it is asked. No FastAPI, MCP or typer imports here: both interfaces call these
functions.

Each function takes the service, a typed request and the caller's :class:`RequestContext`, calls exactly one
service method, and writes one structured log event with the seed 000 §8 fields (query text only as
``query_hash`` unless ``logging.log_query_text``).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from context_engine.api.models import (
    AddMemoriesRequest,
    AddMemoryRequest,
    AddMessagesRequest,
    AddResourcePathRequest,
    AddResourceTextRequest,
    AddSkillRequest,
    ListMemoriesRequest,
    LsRequest,
    MemoryUriRequest,
    SimilarSearchRequest,
    TreeRequest,
    UpdateMemoryRequest,
)
from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.knowledge.compact import compact_lookup
from context_engine.observability.logging import get_logger, query_fields
from context_engine.retrieval.compact import shorten
from context_engine.schema.compact import (
    BrowseLevel,
    BrowseNode,
    LookupCompact,
    LsCompact,
    SearchMemoryCompact,
    TreeCompact,
)
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import LookupRequest, LookupResult
from context_engine.schema.memory import (
    AddMemoryResult,
    MemoryDetail,
    MemoryItem,
    MemoryListPage,
    MemoryWriteResult,
    Message,
)
from context_engine.schema.nodes import IngestReport
from context_engine.schema.query import ReadMemoryRequest, ReadMemoryResponse, SearchMemoryRequest, SearchMemoryResponse
from context_engine.schema.uri import parse_uri
from context_engine.schema.views import NodeView

if TYPE_CHECKING:
    from context_engine.service import ContextEngineService, SimilarSearchResult

log = get_logger("context_engine.interfaces")


# ---- retrieval ------------------------------------------------------------------------------------------------------
def search_memory(
    service: ContextEngineService, req: SearchMemoryRequest, ctx: RequestContext
) -> SearchMemoryResponse | SearchMemoryCompact:
    """``service.search_memory`` (``response_format="full"``) or ``service.search_memory_compact`` (``"compact"``).
    The pipeline itself writes the ``search_memory`` event with the seed 000 §8 fields (``query_hash,
    typed_query_count, top_k, seed_count, final_count, warnings, recheck_drop_reasons``...)."""
    if req.response_format == "compact":
        return service.search_memory_compact(req, ctx)
    return service.search_memory(req, ctx)


def read_memory(service: ContextEngineService, req: ReadMemoryRequest, ctx: RequestContext) -> ReadMemoryResponse:
    """``service.read_memory`` plus a ``read_memory`` log event (URI and level, never the text).

    A malformed ``uri`` (``''``, ``ctx://``, ``http://x``, ``ctx://resources/../x``) is ``RET-4001``, as on ``ls``
    and ``tree`` (``MemoryReadService``: decided from the text alone, before any store is read, so it says nothing
    about what exists). A well-formed URI the caller cannot see, or that does not exist, keeps the one ``RET-4032``.

    Raises:
        ContextEngineError: what ``service.read_memory`` raises.
    """
    resp = service.read_memory(req, ctx)
    log.info("read_memory", uri=req.uri, level=req.level, relations=len(resp.block.relations))
    return resp


def lookup_knowledge(
    service: ContextEngineService, req: LookupRequest, ctx: RequestContext
) -> LookupResult | LookupCompact:
    """``service.lookup_knowledge`` plus a ``lookup_knowledge`` log event; the compact form (issue 15) when
    ``req.response_format == "compact"``."""
    result = service.lookup_knowledge(req, ctx)
    log.info(
        "lookup_knowledge",
        **query_fields(req.query, service.settings.logging),
        top_k=req.top_k,
        session_id=req.session_id,
        invocation_id=result.invocation_id,
        evidence_status=result.evidence_status,
        relevance_level=result.relevance_level.value if result.relevance_level else None,
        final_count=len(result.evidence_blocks),
        fallback_reason=result.traces.fallback_reason,
        dedup_reason=result.dedup_reason,
        warnings=result.traces.warnings,
        engine_request_id=result.traces.request_id,
    )
    if req.response_format == "compact":
        return compact_lookup(result, include_debug=req.include_debug)
    return result


def similar_search(
    service: ContextEngineService, req: SimilarSearchRequest, ctx: RequestContext
) -> SimilarSearchResult:
    """``service.similar_search`` (raw semantic search, one result per document) plus a log event."""
    result = service.similar_search(
        req.query,
        ctx,
        top_k=req.top_k,
        level=req.level,
        mode=req.mode,
        context_types=list(req.context_types) if req.context_types is not None else None,
        categories=req.categories,
        target_uri=req.target_uri,
    )
    log.info(
        "similar_search",
        **query_fields(req.query, service.settings.logging),
        top_k=req.top_k,
        level=req.level,
        final_count=len(result.results),
        backend=result.backend,
        warnings=result.warnings,
    )
    return result


# ---- writes ---------------------------------------------------------------------------------------------------------
def _path_refused(roots: Sequence[Path]) -> ContextEngineError:
    # One message for "outside the roots" and "missing": the server's file system is not probed through the API.
    return ContextEngineError(
        ErrorCode.PATH_NOT_FOUND,
        "path not found below an allowed upload root (http.allowed_upload_roots)"
        if roots
        else "adding server-side paths is disabled: configure http.allowed_upload_roots, or upload the files",
        {"allowed_roots_configured": bool(roots)},
    )


def resolve_server_path(raw: str, roots: Sequence[Path]) -> Path:
    """The real path of ``raw`` when it exists below one of ``roots`` (symlinks resolved), else ``WRT-4041``.

    A relative ``raw`` is taken relative to the first root. ``raw`` itself being a symlink that leads outside the
    roots is refused like any path outside them. Symlinks inside a directory are not checked here: the loader,
    called with ``follow_symlinks=False`` (:func:`add_resource_path`), skips every link that leads outside the folder
    and lists it in the report's ``skipped_paths``, so no link can bring other server files into the store.
    """
    real_roots = [Path(r).expanduser().resolve() for r in roots]
    if not real_roots or not raw or "\x00" in raw:
        raise _path_refused(roots)
    p = Path(raw).expanduser()
    if not p.is_absolute():
        p = real_roots[0] / p
    real = p.resolve()

    def inside(x: Path) -> bool:
        return any(x == r or r in x.parents for r in real_roots)

    if not inside(real) or not real.exists():
        raise _path_refused(roots)
    return real


def add_resource_path(
    service: ContextEngineService,
    req: AddResourcePathRequest,
    ctx: RequestContext,
    *,
    cancel: threading.Event | None = None,
) -> IngestReport:
    """Add a server-side file or directory found below ``http.allowed_upload_roots`` (see
    :func:`resolve_server_path`). ``cancel``: see :meth:`ContextEngineService.add_resource`."""
    path = resolve_server_path(req.path, service.settings.http.allowed_upload_roots)
    # never through links out of the folder: the allowed roots are a boundary, whatever the local CLI may allow
    report = service.add_resource(path, req.target_uri, ctx, strict=req.strict, follow_symlinks=False, cancel=cancel)
    log.info("add_resource", source="path", target_uri=req.target_uri, nodes=report.nodes, failed=report.failed)
    return report


def add_resource_text(
    service: ContextEngineService,
    req: AddResourceTextRequest,
    ctx: RequestContext,
    *,
    cancel: threading.Event | None = None,
) -> IngestReport:
    """Add one resource document given as text (``uri`` must be a file URI under ``ctx://resources/``)."""
    uri = parse_uri(req.uri)
    if uri.context_type != "resource":
        raise ContextEngineError(ErrorCode.URI_INVALID, f"{uri} is not under ctx://resources/", {"uri": str(uri)})
    report = service.add_text(req.text, uri, ctx, cancel=cancel)
    log.info("add_resource", source="text", target_uri=str(uri), nodes=report.nodes)
    return report


def add_resource_files(
    service: ContextEngineService,
    files: Sequence[tuple[str, bytes]],
    target_uri: str,
    ctx: RequestContext,
    *,
    strict: bool,
    workdir: Path,
    cancel: threading.Event | None = None,
) -> IngestReport:
    """Add uploaded files (``(file name, bytes)``) below ``target_uri``, staged in ``workdir`` (a fresh directory).

    File names are reduced to their last path component and must be valid URI segments (``WRT-4001``). One file
    behaves like ``add_resource`` of a file (it raises on a bad file); several behave like a directory (bad files
    are counted in ``failed``, unless ``strict``). Messages never show ``workdir``.
    """
    from context_engine.schema.uri import validate_segment

    if not files:
        raise ContextEngineError(ErrorCode.REQUEST_INVALID, "no file in the upload (multipart field 'files')")
    names: set[str] = set()
    for name, data in files:
        base = validate_segment(Path(name.replace("\\", "/")).name or name)
        if base.startswith("."):
            raise ContextEngineError(ErrorCode.URI_INVALID, f"hidden file name {base!r} is not allowed")
        if base in names:
            raise ContextEngineError(ErrorCode.CONFLICT, f"file name {base!r} appears twice in the upload")
        names.add(base)
        (workdir / base).write_bytes(data)
    source = workdir / next(iter(names)) if len(files) == 1 else workdir
    try:
        report = service.add_resource(source, target_uri, ctx, strict=strict, cancel=cancel)
    except ContextEngineError as err:
        hidden = str(workdir)
        if hidden in err.message or hidden in str(err.details):
            raise ContextEngineError(
                err.code,
                err.message.replace(hidden + "/", "").replace(hidden, "."),
                _strip(err.details, hidden),
                retryable=err.retryable,
            ) from None
        raise
    log.info("add_resource", source="upload", files=len(files), target_uri=target_uri, nodes=report.nodes)
    return report


def _strip(details: dict[str, Any], hidden: str) -> dict[str, Any]:
    return {k: (v.replace(hidden + "/", "") if isinstance(v, str) else v) for k, v in details.items()}


# ---- memories (issue 11) --------------------------------------------------------------------------------------------
def add_memory(service: ContextEngineService, req: AddMemoryRequest, ctx: RequestContext) -> AddMemoryResult:
    """``service.add_memory`` (dedup and ``policy`` without ``uri``) plus an ``add_memory`` log event (never the
    text). ``report.duplicates`` is 1 when a near-duplicate was skipped; ``report.uris`` then names the existing one."""
    report = service.add_memory(
        req.text,
        ctx,
        uri=req.uri,
        category=req.category,
        metadata=req.metadata,
        occurred_at=req.occurred_at,
        policy=req.policy,
    )
    log.info("add_memory", category=req.category, uris=report.uris, duplicates=report.duplicates)
    return report


def add_memories(service: ContextEngineService, req: AddMemoriesRequest, ctx: RequestContext) -> MemoryWriteResult:
    """``service.add_memories``: one all-or-nothing write, one outcome per item in input order."""
    items: list[MemoryItem | dict[str, Any]] = [i.model_dump(exclude_none=True) for i in req.items]
    result = service.add_memories(items, ctx, policy=req.policy)
    log.info(
        "add_memories", items=len(items), nodes=result.nodes, unchanged=result.unchanged, duplicates=result.duplicates
    )
    return result


def add_messages(service: ContextEngineService, req: AddMessagesRequest, ctx: RequestContext) -> MemoryWriteResult:
    """``service.add_messages``: the messages of one conversation, one all-or-nothing write; ``items[i].uri`` is
    message ``i``'s memory. A missing ``content`` is sent as empty text, so it fails like a blank one (``WRT-4221``)."""
    messages: list[Message | dict[str, Any]] = [m.model_dump(exclude_none=True) for m in req.messages]
    result = service.add_messages(messages, req.conversation_id, ctx)
    log.info("add_messages", conversation_id=req.conversation_id, messages=len(messages), nodes=result.nodes)
    return result


def list_memories(service: ContextEngineService, req: ListMemoriesRequest, ctx: RequestContext) -> MemoryListPage:
    """``service.list_memories``: the caller's memories, newest first, one page."""
    return service.list_memories(
        ctx,
        category=req.category,
        conversation_id=req.conversation_id,
        limit=req.limit,
        offset=req.offset,
        user_space=req.user_space,
    )


def get_memory(service: ContextEngineService, req: MemoryUriRequest, ctx: RequestContext) -> MemoryDetail:
    """``service.get_memory``: text (redacted) and earlier versions; ``RET-4032`` when missing or not visible."""
    return service.get_memory(req.uri, ctx)


def update_memory(service: ContextEngineService, req: UpdateMemoryRequest, ctx: RequestContext) -> MemoryWriteResult:
    """``service.update_memory`` plus a log event; ``RET-4032`` when missing, not visible or not writable."""
    result = service.update_memory(req.uri, req.text, ctx, metadata=req.metadata, occurred_at=req.occurred_at)
    log.info("update_memory", uri=req.uri, status=result.items[0].status, version=result.items[0].version)
    return result


def delete_memory(service: ContextEngineService, req: MemoryUriRequest, ctx: RequestContext) -> IngestReport:
    """``service.delete_memory`` plus a log event; ``RET-4032`` when missing, not visible or not writable."""
    report = service.delete_memory(req.uri, ctx)
    log.info("delete_memory", uri=req.uri, nodes=report.nodes)
    return report


def add_skill(service: ContextEngineService, req: AddSkillRequest, ctx: RequestContext) -> IngestReport:
    report = service.add_skill(req.name, req.description, req.content, ctx, category=req.category)
    log.info("add_skill", uris=report.uris)
    return report


# ---- browsing, compact (the MCP ls / tree tools) --------------------------------------------------------------------
def ls_compact(service: ContextEngineService, req: LsRequest, ctx: RequestContext) -> LsCompact:
    """``service.ls`` as an agent reads it: one page (``offset``, ``limit``) of the children in URI order, each
    with its L0 abstract or, with ``level="L1"``, its overview (one ``read_memory`` per node that has one). The
    same tenancy as ``ls``: an invisible or missing URI is ``RET-4032`` with one body for both."""
    views = service.ls(req.uri, ctx)
    page = views[req.offset : req.offset + req.limit]
    nodes = [_browse_node(service, v, ctx, level=req.level) for v in page]
    end = req.offset + len(page)
    log.info("ls", uri=req.uri, level=req.level, nodes=len(nodes), total=len(views))
    return LsCompact(uri=req.uri, nodes=nodes, total=len(views), next_offset=end if end < len(views) else None)


def tree_compact(service: ContextEngineService, req: TreeRequest, ctx: RequestContext) -> TreeCompact:
    """``service.tree`` as an agent reads it: L0 abstracts cut at ``retrieval.compact_abstract_max_chars``, nodes
    taken breadth-first (a level before the next, URI order within) until ``max_nodes``; a directory whose children
    were left out says how many (``more``) and the answer says ``truncated``."""
    root = service.tree(req.uri, ctx, max_depth=req.max_depth)
    if root is None:
        return TreeCompact(uri=req.uri, root=None)
    cut = service.settings.retrieval.compact_abstract_max_chars
    out = _browse_node(service, root, ctx, max_chars=cut)
    budget, truncated = req.max_nodes - 1, False
    queue: deque[tuple[NodeView, BrowseNode]] = deque([(root, out)])
    while queue:
        view, node = queue.popleft()
        if view.children is None:
            continue
        kept = view.children[:budget]
        budget -= len(kept)
        node.children = [_browse_node(service, c, ctx, max_chars=cut) for c in kept]
        node.more = len(view.children) - len(kept)
        truncated = truncated or node.more > 0
        queue.extend(zip(kept, node.children, strict=True))
    log.info("tree", uri=req.uri, max_depth=req.max_depth, nodes=req.max_nodes - budget, truncated=truncated)
    return TreeCompact(uri=req.uri, root=out, truncated=truncated)


def _browse_node(
    service: ContextEngineService,
    view: NodeView,
    ctx: RequestContext,
    *,
    level: BrowseLevel = "L0",
    max_chars: int | None = None,
) -> BrowseNode:
    levels: list[Literal["L1", "L2"]] = ["L1"] if view.has_overview else []
    levels += ["L2"] if view.has_content else []
    if level == "L1" and view.has_overview:
        block = service.read_memory(ReadMemoryRequest(uri=view.uri, level="L1"), ctx).block
        return BrowseNode(uri=view.uri, text=block.overview or "", level="L1", levels=levels)
    text = shorten(view.abstract, max_chars) if max_chars else view.abstract
    return BrowseNode(uri=view.uri, text=text, levels=levels)
