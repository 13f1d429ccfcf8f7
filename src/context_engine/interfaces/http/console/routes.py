"""The console's routes: page shells and the HTML fragments they fetch (issue 16; docs/console.md).

Two kinds of route, and only these:

* **Pages** (``GET /console/<page>``): a layout, a form and empty regions; no data of any account. They need no
  key: the key lives in the browser's ``sessionStorage`` (entered once on ``/console/login``), and a full page load
  cannot carry an ``Authorization`` header.
* **Fragments** (``/console/fragments/...``): every piece of data, as server-rendered HTML, fetched by
  ``static/console.js`` with ``Authorization: Bearer <key>``. Each one takes the caller's RequestContext from the
  API's own dependency (:func:`..routes.caller`, the same authenticator and anonymous-loopback policy) and calls the
  same :mod:`..calls` function or service method as the API route of the same name, so tenancy, redaction and
  error envelopes are the API's. A fragment request body is the API request model itself.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from context_engine.api import calls
from context_engine.api.models import (
    AddMemoryRequest,
    AddResourceTextRequest,
    DeleteRequest,
    VerifyEvidenceRequest,
)
from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.http.console import charts
from context_engine.interfaces.http.console.markdown import render_markdown
from context_engine.interfaces.http.console.reports import EvalReports, ReportView
from context_engine.interfaces.http.errors import MEMORY_TAG, WRITE_TAG
from context_engine.interfaces.http.routes import Caller, Service
from context_engine.interfaces.http.validation import reject_invalid_text
from context_engine.redaction import redact_output
from context_engine.retrieval.compact import is_informational
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import LookupRequest
from context_engine.schema.query import ReadLevel, ReadMemoryRequest, SearchMemoryRequest

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
# An element id from a URI (tree nodes expand into it): stable, and free of characters a selector would trip on.
templates.env.filters["domid"] = lambda uri: "n-" + hashlib.sha1(str(uri).encode("utf-8")).hexdigest()[:16]
templates.env.filters["zip"] = lambda a, b: list(zip(a, b, strict=False))
templates.env.filters["markdown"] = render_markdown  # excerpts: markdown-it-py, then nh3 (console/markdown.py)
# RET-4221 (the planner preferred no context type) reports a decision, not a degradation: shown as a note
templates.env.tests["informational"] = is_informational


def _plain(value: Any) -> str:
    """A summary value in words: ``{'found': 2}`` -> ``found 2``; lists joined by commas; floats to 0.1."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_plain(v)}" for k, v in value.items()) or "—"
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value) or "—"
    if isinstance(value, float):
        return f"{value:.1f}"
    return "—" if value is None else str(value)


templates.env.filters["plain"] = _plain


def _when(value: Any) -> str:
    """A time to the second, in UTC (the store's clock): ``2026-12-04 10:01:26 UTC``."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return "—" if value is None else str(value)


templates.env.filters["when"] = _when
# invalid Unicode in a query parameter or a JSON body: 400/422 before anything runs, as on the API
router = APIRouter(prefix="/console", include_in_schema=False, dependencies=[Depends(reject_invalid_text)])

#: Navigation: (path, label, who may use it). The login page is not in it. A tab that needs ``admin`` (the reports),
#: ``memory`` (a user space, or an admin) or ``write`` (a key that can write somewhere: :func:`capabilities`) is
#: hidden until the whoami fragment says the key may use it (``console.js``); the page itself still answers, and its
#: fragments refuse as the API does.
NAV: tuple[tuple[str, str, str], ...] = (
    ("/console/browse", "Browse", ""),
    ("/console/search", "Search", ""),
    ("/console/lookup", "Lookup", ""),
    ("/console/memories", "Memories", "memory"),
    ("/console/sessions", "Sessions", ""),
    ("/console/eval", "Evaluation", "admin"),
    ("/console/write", "Write", "write"),
)
_URI = Annotated[str, Query(min_length=1, max_length=4096)]


def _page(request: Request, template: str, title: str, **extra: Any) -> HTMLResponse:
    return templates.TemplateResponse(
        request, template, {"title": title, "nav": NAV, "path": request.url.path, "q": request.query_params, **extra}
    )


def _fragment(request: Request, template: str, **values: Any) -> HTMLResponse:
    # every string a fragment shows passes the pattern redaction last, before escaping and filters (docs/security.md
    # "Secret redaction"), as the API's JSON answers do: an escaped or URL-encoded secret would escape the patterns
    if request.app.state.engine.settings.retrieval.redaction.enabled:
        values = redact_output(values)
    return templates.TemplateResponse(request, f"fragments/{template}", values)


# ---- pages (no data) ------------------------------------------------------------------------------------------------
@router.get("")
@router.get("/")
async def index() -> RedirectResponse:
    return RedirectResponse("/console/browse", status_code=307)


#: Pages: path below /console -> (template, title). A page is a layout and a form; its data comes in fragments.
PAGES: dict[str, tuple[str, str]] = {
    "/login": ("login.html", "Sign in"),
    "/browse": ("browse.html", "Browse"),
    "/node": ("node.html", "Node"),
    "/search": ("search.html", "Search"),
    "/lookup": ("lookup.html", "Lookup"),
    "/sessions": ("sessions.html", "Sessions"),
    "/memories": ("memories.html", "Memories"),
    "/eval": ("eval.html", "Evaluation"),
    "/eval/report": ("eval_report.html", "Evaluation report"),
    "/eval/compare": ("eval_compare.html", "Compare two runs"),
    "/write": ("write.html", "Write"),
}


def _page_route(template: str, title: str) -> Any:
    async def page(request: Request) -> HTMLResponse:
        return _page(request, template, title)

    return page


for _path, (_template, _title) in PAGES.items():
    router.add_api_route(_path, _page_route(_template, _title), methods=["GET"], response_class=HTMLResponse)


# ---- fragments (every one behind the API's caller dependency) ------------------------------------------------------
F = "/fragments"


def capabilities(ctx: RequestContext) -> dict[str, bool]:
    """What the write forms allow this caller, by the rule of :meth:`RequestContext.can_write_uri`: shared
    resources need an admin; a memory needs a user space (or an admin); a delete needs a space of one's own. A key
    with none of these is read-only (keys have no separate read-only flag: see docs/console.md)."""
    own = bool(ctx.user_space or ctx.agent_space)
    caps = {
        "add_text": ctx.is_admin,
        "add_memory": ctx.is_admin or bool(ctx.user_space),
        "delete": ctx.is_admin or own,
    }
    caps["read_only"] = not any(caps.values())
    return caps


def browse_roots(ctx: RequestContext) -> list[str]:
    """Top-level directories the caller may see: shared resources, then its user and agent spaces (all for admins)."""
    if ctx.is_admin:
        return ["ctx://resources/", "ctx://user/", "ctx://agent/"]
    roots = ["ctx://resources/"]
    if ctx.user_space:
        roots.append(f"ctx://user/{ctx.user_space}/")
    if ctx.agent_space:
        roots.append(f"ctx://agent/{ctx.agent_space}/")
    return roots


@router.get(F + "/whoami", response_class=HTMLResponse)
def whoami(request: Request, ctx: Caller) -> HTMLResponse:
    """Who the key acts as (the login check and the header line)."""
    return _fragment(request, "whoami.html", ctx=ctx, caps=capabilities(ctx))


@router.get(F + "/roots", response_class=HTMLResponse)
def roots(request: Request, ctx: Caller) -> HTMLResponse:
    return _fragment(request, "roots.html", roots=browse_roots(ctx))


def _redacted_abstract(service: Any, view: Any) -> Any:
    # L0 as search_memory shows it: the assembler passes abstracts through the pattern redaction; ls/tree do not.
    if view is None or not view.abstract:
        return view
    return view.model_copy(update={"abstract": service.redactor.redact(view.abstract, library=False).text})


@router.get(F + "/tree", response_class=HTMLResponse)
def tree(request: Request, service: Service, ctx: Caller, uri: _URI) -> HTMLResponse:
    """One directory level (``service.ls``, as ``GET /api/v1/ls``, abstracts redacted as search redacts them);
    sub-directories expand on demand."""
    nodes = [_redacted_abstract(service, n) for n in service.ls(uri, ctx)]
    return _fragment(request, "tree.html", uri=uri, nodes=nodes)


@router.get(F + "/node", response_class=HTMLResponse)
def node_detail(request: Request, service: Service, ctx: Caller, uri: _URI) -> HTMLResponse:
    """A node: metadata (``service.stat``), L0 (``service.tree`` depth 0, as ``/api/v1/tree``, redacted as
    search_memory redacts abstracts), L1 and L2 (``read_memory``, redacted as the API redacts) with relations, and a
    memory's versions (``get_memory``, redacted) and events (``list_memory_events``, newest 20)."""
    record = service.stat(uri, ctx)
    view = _redacted_abstract(service, service.tree(record.uri, ctx, max_depth=0))
    levels: dict[str, Any] = {}
    relations: list[Any] = []
    readable: tuple[tuple[ReadLevel, bool], ...] = (
        ("L1", record.has_overview),
        ("L2", record.has_content and not record.is_dir),
    )
    for level, present in readable:
        if not present:
            continue
        try:
            resp = calls.read_memory(service, ReadMemoryRequest(uri=record.uri, level=level), ctx)
        except ContextEngineError as err:
            levels[level] = {"error": f"{err.code.value}: {err.message}"}
            continue
        block = resp.block
        levels[level] = {"text": block.overview if level == "L1" else block.content_excerpt}
        relations = relations or list(block.relations)
    memory = events = None
    if record.context_type == "memory" and not record.is_dir:
        memory = service.get_memory(record.uri, ctx)
        events = service.list_memory_events(ctx, uri=record.uri, limit=EVENTS_PAGE)
    return _fragment(
        request,
        "node.html",
        record=record,
        view=view,
        levels=levels,
        relations=relations,
        memory=memory,
        events=events,
    )


@router.post(F + "/search", response_class=HTMLResponse, tags=["retrieval"])
def search_fragment(request: Request, req: SearchMemoryRequest, service: Service, ctx: Caller) -> HTMLResponse:
    """``search_memory`` (the body is the API's request) with the detailed trace, rendered, and the
    ``tool_invocation`` row it recorded."""
    # the console renders the full answer whatever the body asked (a compact one has no trace to show)
    req = req.model_copy(update={"include_debug": True, "trace_level": "detailed", "response_format": "full"})
    resp = service.search_memory(req, ctx)
    rows = service.list_invocations(ctx, tool_name="search_memory", limit=20)  # its audit row (none: read-only home)
    invocation = next((r for r in rows if r.invocation_id == resp.request_id), None)
    return _fragment(
        request, "search.html", resp=resp, invocation=invocation, **search_details(resp.thinking_trace or {})
    )


#: The search page's score columns: (component of the trace's ``assemble.scores``, heading, meaning). One score per
#: column, each on its own scale: the final score (``hit.score``) ranks the hits; ``vector`` (``max(similarity, 0)``)
#: repeats the similarity and is not shown; ``final`` is the hit's own score.
SCORE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("final", "Final score", "0–1, ranks the hits"),
    ("similarity", "Similarity", "cosine, −1–1, higher is closer"),
    ("hierarchy", "Hierarchy", "0–1, path consistency"),
    ("category", "Category boost", "0–1"),
    ("target", "Target boost", "0–1"),
)


def search_details(thinking: dict[str, Any]) -> dict[str, Any]:
    """What the search page shows from a detailed trace: score components per URI, stage timings (ms, in
    pipeline order) and the recheck's exclusions with their reasons."""
    stages = thinking.get("stages") or {}
    scores = {row["uri"]: row for row in (stages.get("assemble") or {}).get("scores", []) if "uri" in row}
    timings = thinking.get("timings_ms") or {}
    order = ["planner", "embed", "seed", "hierarchical", "recheck", "assemble"]
    bars = [(k, float(timings[k])) for k in order if k in timings]
    bars += [(k, float(v)) for k, v in timings.items() if k not in order]
    longest = max((v for _, v in bars), default=0.0) or 1.0
    excluded = [
        e for e in thinking.get("events") or [] if e.get("event") == "drop" and e.get("exclude_reason") is not None
    ]
    return {
        "scores": scores,
        "score_columns": SCORE_COLUMNS,
        "timings": [(k, v, 100.0 * v / longest) for k, v in bars],
        "excluded": excluded,
        "drops": thinking.get("drops") or {},
        "recheck": stages.get("recheck") or {},
    }


@router.post(F + "/lookup", response_class=HTMLResponse, tags=["knowledge"])
def lookup_fragment(request: Request, req: LookupRequest, service: Service, ctx: Caller) -> HTMLResponse:
    """``lookup_knowledge`` (the body is the API's request), and the ``tool_invocation`` row it recorded."""
    result = calls.lookup_knowledge(service, req, ctx)
    rows = service.list_invocations(ctx, session_id=result.session_id, tool_name="lookup_knowledge", limit=50)
    invocation = next((r for r in rows if r.invocation_id == result.invocation_id), None)
    return _fragment(request, "lookup.html", result=result, invocation=invocation)


#: Newest invocations listed on the sessions page, with or without a session.
RECENT = 20


def question_of(row: Any) -> str:
    """The question an invocation asked, as recorded (``knowledge.audit_query_text`` off: said so)."""
    query = row.input_params.get("query")
    return str(query) if query is not None else "(question not kept)"


templates.env.filters["question"] = question_of


@router.get(F + "/sessions", response_class=HTMLResponse, tags=["knowledge"])
def sessions_fragment(
    request: Request,
    service: Service,
    ctx: Caller,
    session_id: Annotated[str | None, Query(max_length=256)] = None,
) -> HTMLResponse:
    """Without ``session_id``: the sessions of the newest invocations. With it: the session's invocations (newest
    first), its trace summary (``GET /api/v1/tool_invocations/summary``) and each invocation's evidence refs."""
    if not session_id:
        rows = service.list_invocations(ctx, limit=200)
        seen: dict[str, dict[str, Any]] = {}
        for r in rows:
            if r.session_id and r.session_id not in seen:
                seen[r.session_id] = {
                    "session_id": r.session_id,
                    "last": r.created_at,
                    "count": 0,
                    "question": question_of(r),
                }
            if r.session_id:
                seen[r.session_id]["count"] += 1
        unsessioned = sum(not r.session_id for r in rows)
        return _fragment(
            request, "sessions.html", sessions=list(seen.values()), unsessioned=unsessioned, recent=rows[:RECENT]
        )
    rows = service.list_invocations(ctx, session_id=session_id, limit=200)
    summary = service.session_trace_summary(session_id, ctx)
    return _fragment(request, "session.html", session_id=session_id, rows=rows, summary=summary)


@router.post(F + "/verify", response_class=HTMLResponse, tags=["knowledge"])
def verify_fragment(request: Request, req: VerifyEvidenceRequest, service: Service, ctx: Caller) -> HTMLResponse:
    """``verify_evidence``: is the excerpt backed by an evidence ref recorded for the invocation?"""
    return _fragment(request, "verify.html", v=service.verify_evidence(req.invocation_id, req.excerpt, ctx))


#: The Memories page's page sizes: memories (and a conversation's messages), and memory events.
MEMORIES_PAGE = 50
EVENTS_PAGE = 20


@router.get(F + "/memories", response_class=HTMLResponse, tags=[MEMORY_TAG])
def memories_fragment(
    request: Request,
    service: Service,
    ctx: Caller,
    user_space: Annotated[str | None, Query(max_length=256)] = None,
    category: Annotated[str | None, Query(max_length=256)] = None,
    conversation_id: Annotated[str | None, Query(max_length=256)] = None,
    session_id: Annotated[str | None, Query(max_length=256)] = None,
    uri: Annotated[str | None, Query(max_length=4096)] = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    events_offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
) -> HTMLResponse:
    """A user's memories (``GET /api/v1/memories``: ``service.list_memories``, newest first, 50 a page from
    ``offset``), by category or conversation (``conversation_id``; ``session_id``, its first name, in addresses kept
    from before issue 29); a conversation's memories are shown as its transcript, oldest first. Below them the
    user's memory events (``GET /api/v1/memories/events``: ``service.list_memory_events``, ADD, UPDATE and DELETE,
    newest first, 20 a page from ``events_offset``). With ``uri``: that memory's events alone, deleted or not.
    ``user_space``: an admin's choice of user (another key may only name its own)."""
    space = user_space or None
    conversation = conversation_id or session_id or None
    query = {"user_space": user_space or "", "category": category or "", "conversation_id": conversation or ""}
    if uri:
        events = service.list_memory_events(ctx, user_space=space, uri=uri, limit=EVENTS_PAGE, offset=events_offset)
        return _fragment(request, "memories.html", page=None, events=events, uri=uri, query=query)
    page = service.list_memories(
        ctx,
        category=category or None,
        conversation_id=conversation,
        limit=MEMORIES_PAGE,
        offset=offset,
        user_space=space,
    )
    transcript = []
    if conversation:
        transcript = sorted(page.items, key=lambda m: (m.occurred_at or m.created_at or m.updated_at, m.uri))
    events = service.list_memory_events(ctx, user_space=space, limit=EVENTS_PAGE, offset=events_offset)
    return _fragment(
        request,
        "memories.html",
        page=page,
        transcript=transcript,
        conversation_id=conversation,
        events=events,
        uri=None,
        query=query,
    )


# ---- evaluation reports ---------------------------------------------------------------------------------------------
def _reports(service: Any, ctx: RequestContext) -> EvalReports:
    # Reports describe the server's datasets and code, not an account's data: admins only.
    if not ctx.is_admin:
        raise ContextEngineError(
            ErrorCode.URI_FORBIDDEN, "evaluation reports are shown to admin keys only", {"required_role": "admin"}
        )
    settings = service.settings
    return EvalReports(settings.home_path / "eval-reports", *settings.eval.reports_dirs)


def report_charts(report: ReportView) -> list[charts.Chart]:
    """The plots of one report: Recall@K curves, per-category (or per-measure) bars, the latency histogram."""
    results = report.data.get("results") or []
    labels = report.labels
    by_label = list(zip(labels, results, strict=True))
    out = [charts.recall_curve(report.recall_curves, "Recall@K")]
    per_category = report.data.get("per_category") or {}
    measures = list(report.data.get("measures") or [])
    if per_category and measures:
        first = measures[0]
        cats = sorted({c for by_cat in per_category.values() for c in by_cat})
        series = {label: [per_category.get(label, {}).get(c, {}).get(first, 0.0) for c in cats] for label in labels}
        out.append(charts.grouped_bars(cats, series, f"{first} per category", first))
    out.append(
        charts.grouped_bars(
            measures,
            {label: [r["metrics"].get(m, 0.0) for m in measures] for label, r in by_label},
            "Measures per method",
            "mean over judged queries",
        )
    )
    lat = {label: list((r.get("latencies_ms") or {}).values()) for label, r in by_label}
    if any(lat.values()):
        out.append(charts.latency_histogram(lat))
    else:  # reports written before per-query latencies were recorded: the percentiles only
        out.append(
            charts.grouped_bars(
                ["p50", "p95", "mean"],
                {label: [r["latency_ms"].get(k, 0.0) for k in ("p50", "p95", "mean")] for label, r in by_label},
                "Latency (ms)",
                "milliseconds",
            )
        )
    return out


@router.get(F + "/eval", response_class=HTMLResponse)
def eval_list(request: Request, service: Service, ctx: Caller) -> HTMLResponse:
    reports = _reports(service, ctx)
    return _fragment(request, "eval_list.html", reports=reports.list())


@router.get(F + "/eval/report", response_class=HTMLResponse)
def eval_report(
    request: Request, service: Service, ctx: Caller, run: Annotated[str, Query(max_length=200)]
) -> HTMLResponse:
    report = _reports(service, ctx).load(run)
    return _fragment(request, "eval_report.html", report=report, charts=report_charts(report))


@router.get(F + "/eval/compare", response_class=HTMLResponse)
def eval_compare(
    request: Request,
    service: Service,
    ctx: Caller,
    a: Annotated[str, Query(max_length=200)],
    b: Annotated[str, Query(max_length=200)],
) -> HTMLResponse:
    """Two runs side by side: each method's measures in A and B and their difference, one Recall@K plot."""
    reports = _reports(service, ctx)
    ra, rb = reports.load(a), reports.load(b)
    measures = list(dict.fromkeys([*(ra.data.get("measures") or []), *(rb.data.get("measures") or [])]))
    rows = []
    for label in dict.fromkeys([*ra.labels, *rb.labels]):
        ma = _metrics_of(ra, label)
        mb = _metrics_of(rb, label)
        rows.append((label, [(m, ma.get(m), mb.get(m)) for m in measures]))
    curves = {f"A {k}": v for k, v in ra.recall_curves.items()} | {f"B {k}": v for k, v in rb.recall_curves.items()}
    chart = charts.recall_curve(curves, "Recall@K, run A and run B")
    return _fragment(request, "eval_compare.html", a=ra, b=rb, measures=measures, rows=rows, chart=chart)


def _metrics_of(report: ReportView, label: str) -> dict[str, float]:
    for lab, r in zip(report.labels, report.data.get("results") or [], strict=True):
        if lab == label:
            return dict(r.get("metrics") or {})
    return {}


# ---- writes (the API's request models and calls; the service checks every write) -----------------------------------
@router.get(F + "/write", response_class=HTMLResponse)
def write_forms(request: Request, ctx: Caller) -> HTMLResponse:
    return _fragment(request, "write_forms.html", ctx=ctx, caps=capabilities(ctx))


@router.post(F + "/write/text", response_class=HTMLResponse, tags=[WRITE_TAG])
def write_text(request: Request, req: AddResourceTextRequest, service: Service, ctx: Caller) -> HTMLResponse:
    """As ``POST /api/v1/resources/text``."""
    report = calls.add_resource_text(service, req, ctx)
    return _fragment(request, "ingest_report.html", what="Added text", report=report)


@router.post(F + "/write/memory", response_class=HTMLResponse, tags=[MEMORY_TAG])
def write_memory(request: Request, req: AddMemoryRequest, service: Service, ctx: Caller) -> HTMLResponse:
    """As ``POST /api/v1/memories``."""
    report = calls.add_memory(service, req, ctx)
    return _fragment(request, "ingest_report.html", what="Added memory", report=report)


@router.post(F + "/write/delete", response_class=HTMLResponse, tags=[WRITE_TAG])
def write_delete(request: Request, req: DeleteRequest, service: Service, ctx: Caller) -> HTMLResponse:
    """As ``POST /api/v1/delete``."""
    report = service.delete(req.uri, ctx, recursive=req.recursive)
    return _fragment(request, "ingest_report.html", what="Deleted", report=report)
