"""lookup_knowledge commands: ``lookup``, ``invocations``, ``verify-evidence`` (DESIGN §7, §9, §10)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.cli.common import (
    app,
    emit,
    fail,
    open_engine,
    out,
    short_uri,
    shown,
    state,
    stored_text,
)

if TYPE_CHECKING:
    from context_engine.schema.knowledge import LookupResult

_LEVEL_STYLE = {"PRECISE": "bold green", "HIGHLY_RELEVANT": "green", "REFERENCE": "yellow", "DEDUPED": "dim"}


@app.command()
def lookup(
    query: Annotated[str, typer.Argument(help="The alert, error or symptom (English or Chinese).")],
    session: Annotated[
        str | None, typer.Option("--session", "-s", help="Diagnosis session id: documents are not repeated in it.")
    ] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", "-k", help="Evidence blocks, 1..50.")] = None,
    mode: Annotated[str | None, typer.Option(help="Semantic layer: auto, primary or fallback.")] = None,
    min_similarity: Annotated[
        float | None, typer.Option(help="Search threshold on the calibrated similarity (the sim column), -1..1.")
    ] = None,
    target_uri: Annotated[str | None, typer.Option(help="Restrict to this subtree.")] = None,
    budget: Annotated[int | None, typer.Option(help="Token budget of the context pack.")] = None,
    full: Annotated[bool, typer.Option("--full", help="Print every block's text, not only the context pack.")] = False,
    compact: Annotated[
        bool, typer.Option("--compact", help="With --json: print the compact answer (what MCP agents get).")
    ] = False,
) -> None:
    """lookup_knowledge: runbook evidence for an alert or symptom, with hints, levels and an audit record."""
    if mode is not None and mode not in ("auto", "primary", "fallback"):
        fail(ContextEngineError(ErrorCode.QUERY_INVALID, f"--mode must be auto, primary or fallback, not {mode!r}"))
    with open_engine() as engine:
        result = engine.lookup_knowledge(
            query,
            state.ctx,
            session_id=session,
            top_k=top_k,
            mode=mode,
            min_similarity=min_similarity,
            target_uri=target_uri,
            context_token_budget=budget,
        )
    if state.json:
        if compact:
            from context_engine.knowledge.compact import compact_lookup

            emit(compact_lookup(result).model_dump(mode="json"))
        else:
            emit(result.model_dump(mode="json"))
        return
    _print_evidence(result)
    _print_texts_and_trace(result, full)


def _print_evidence(result: LookupResult) -> None:
    """The hints, the evidence table and the deduplicated documents of a lookup, as ``lookup`` prints them."""
    h = result.hints
    hints = Table.grid(padding=(0, 1))
    hints.add_row("[bold]hints[/]", stored_text(f"keywords: {', '.join(h.matched_keywords) or '-'}"))
    domain_filter = result.traces.domain_filter or "none"
    hints.add_row("", stored_text(f"domains: {', '.join(h.domains) or '-'}  (filter: {domain_filter})"))
    for m in h.matches[:8]:
        hints.add_row("", stored_text(f"[{m.strength}] {m.title} ({', '.join(m.keywords)})"))
    out.print(hints)
    table = Table(
        "#",
        "level",
        "sim",
        "fused",
        "boost",
        "document",
        "section",
        "chunks",
        title=f"evidence: {result.evidence_status} (ranked by fused + boost with hybrid on, else sim + boost)",
    )
    # level and document never wrap; the document gets about a fifth of the console, long URIs shortened in the
    # middle (whole in --json); the section wraps
    table.columns[1].no_wrap = table.columns[5].no_wrap = True
    doc_width = max(16, out.width * 22 // 100)
    for i, b in enumerate(result.evidence_blocks, 1):
        style = _LEVEL_STYLE.get(b.relevance_level.value, "")
        table.add_row(
            str(i),
            Text(b.relevance_level.value, style=style),
            f"{b.similarity:.3f}",
            "" if b.fusion_score is None else f"{b.fusion_score:.3f}",
            f"{b.hint_boost:.2f}" if b.hint_boost else "",
            Text(short_uri(b.doc_id, doc_width), no_wrap=True),
            stored_text(b.breadcrumb),
            ",".join(map(str, b.chunk_indexes)),
        )
    out.print(table)
    for b in result.evidence_blocks:
        if b.dedup_reason:
            out.print(stored_text(f"deduped {b.doc_id}: {b.dedup_reason}", style="dim"), soft_wrap=True)


def _print_texts_and_trace(result: LookupResult, full: bool) -> None:
    """Every block's text (``--full``) or the context pack, then the invocation's timings, attempts and warnings."""
    if full:
        for i, b in enumerate(result.evidence_blocks, 1):
            if b.text:
                heading = stored_text(f"[{i}] {b.title} — {b.breadcrumb}")
                out.print(Panel(stored_text(b.text), title=heading, expand=False))
    elif result.context_pack.text:
        title = f"context pack ({result.context_pack.token_estimate} tokens)"
        out.print(Panel(stored_text(result.context_pack.text), title=title))
    t = result.traces
    out.print(
        f"[dim]invocation {result.invocation_id} · {t.total_ms:.1f} ms (embed {t.embed_ms:.1f}, semantic "
        f"{t.semantic_ms:.1f}) · attempts: "
        + "; ".join(f"{a.backend}/{a.reason}{'/' + a.domain_filter if a.domain_filter else ''}" for a in t.attempts)
        + (f" · fallback: {t.fallback_reason}" if t.fallback_reason else "")
        + "[/]"
    )
    for w in t.warnings:
        out.print(Text.assemble(("warning", "yellow"), f": {shown(w)}"))


def _time(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        fail(ContextEngineError(ErrorCode.QUERY_INVALID, f"{option} must be an ISO 8601 time, got {value!r}"))
        raise  # unreachable: fail() exits
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@app.command()
def invocations(
    session: Annotated[str | None, typer.Option("--session", "-s", help="Only this session.")] = None,
    tool: Annotated[str | None, typer.Option(help="Only this tool (e.g. lookup_knowledge).")] = None,
    since: Annotated[str | None, typer.Option(help="From this ISO time (inclusive).")] = None,
    until: Annotated[str | None, typer.Option(help="Up to this ISO time (exclusive).")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Rows, newest first.")] = 20,
    invocation_id: Annotated[str | None, typer.Option("--id", help="Show one invocation in full.")] = None,
    summary: Annotated[bool, typer.Option(help="Per-session trace summary (needs --session).")] = False,
) -> None:
    """The tool_invocation audit trail: by session, tool and time; one in full; or a session summary."""
    with open_engine() as engine:
        if invocation_id:
            found = engine.get_invocation(invocation_id, state.ctx)  # RET-4041 as over HTTP
            emit(found.model_dump(mode="json"))
            return
        if summary:
            if not session:
                fail(ContextEngineError(ErrorCode.QUERY_INVALID, "--summary needs --session"))
            report = engine.session_trace_summary(session, state.ctx)
            if state.json:
                emit(report.model_dump(mode="json"))
            else:
                _print_summary(report)
            return
        rows = engine.list_invocations(
            state.ctx,
            session_id=session,
            tool_name=tool,
            since=_time(since, "--since"),
            until=_time(until, "--until"),
            limit=limit,
        )
    if state.json:
        emit([r.model_dump(mode="json") for r in rows])
        return
    table = Table("time", "id", "session", "tool", "layer", "L0", "L1", "level", "evidence", "ms", "ok", "query")
    for r in rows:
        table.add_row(
            r.created_at.isoformat(timespec="seconds"),
            r.invocation_id[:12],
            stored_text(r.session_id or ""),
            r.tool_name,
            r.retrieval_layer,
            str(r.l0_match_count),
            str(r.l1_match_count),
            r.relevance_level,
            r.retrieval_details.evidence_status or "",
            f"{r.duration_ms:.1f}",
            "yes" if r.success else f"[red]{r.error_code or 'no'}[/]",
            stored_text(str(r.input_params.get("query", ""))[:60]),
        )
    out.print(table)


def _print_summary(report: Any) -> None:
    out.print(
        f"[bold]session {escape(shown(report.session_id))}[/]: {report.invocation_count} calls "
        f"({report.success_count} ok, {report.failure_count} failed), {len(report.documents)} documents, "
        f"{report.dedup_count} deduped, {report.fallback_count} with fallback, {report.total_duration_ms:.1f} ms"
    )
    out.print(f"levels: {report.relevance_levels}  evidence: {report.evidence_statuses}")
    table = Table("time", "id", "level", "evidence", "documents", "deduped", "query")
    for line in report.invocations:
        table.add_row(
            line.created_at.isoformat(timespec="seconds"),
            line.invocation_id[:12],
            line.relevance_level,
            line.evidence_status or "",
            stored_text("\n".join(line.doc_ids)),
            stored_text("\n".join(line.deduped_doc_ids)),
            stored_text(line.query_preview),
        )
    out.print(table)


@app.command("verify-evidence")
def verify_evidence(
    invocation_id: Annotated[str, typer.Argument(help="The invocation id of a lookup.")],
    excerpt: Annotated[str, typer.Argument(help="The quoted excerpt to check.")],
) -> None:
    """Is the excerpt backed by an evidence ref recorded for the invocation? Exit 1 when it is not."""
    with open_engine() as engine:
        check = engine.verify_evidence(invocation_id, excerpt, state.ctx)
    if state.json:
        emit(check.model_dump(mode="json"))
    elif check.verified:
        out.print(
            f"[green]verified[/] ({check.match}) at {escape(shown(str(check.raw_path)))} of "
            f"{check.matched_invocation_id}"
        )
    else:
        out.print(f"[red]not verified[/]: {escape(shown(check.reason))}")
    if not check.verified:
        raise typer.Exit(1)
