"""search_memory / read_memory commands: ``search`` and ``read`` (DESIGN.md §5-6, §10). Thin over the service.

``search QUERY`` runs the full search_memory pipeline for the ``--as`` context and prints a table (uri, level,
score, read recommendation; fitted to the console width, long URIs shortened in the middle), the answer's
``match: strong|weak|none`` line (how confident the best hit is; ``none``: the store most likely lacks the answer),
the next actions (full URIs) and any degradation warnings; informational notes (``RET-4221``: no context type
preferred) only with ``--verbose``. ``--json`` prints the hits (a list of RetrievedBlock objects), ``--json --full``
the whole response, ``--json --compact`` the compact answer that MCP agents get (``SearchMemoryCompact``, issue 15).
``search --queries FILE`` runs every non-empty line of FILE as a query in one process (one engine start), each printed
under a ``search: <query>`` header; with ``--json`` a list of ``{"query", "hits"}`` (or ``"response"``).

``read URI --level L0|L1|L2`` reads one level: L1/L2 through read_memory (ACL first, secrets redacted, L2 one page of
at most ``--max-chars`` from ``--offset``; the next page's command is printed on stderr), L0 from the content store
after the same ACL check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.cli.common import (
    app,
    emit,
    err_console,
    fail,
    open_engine,
    out,
    renamed_option,
    short_uri,
    shown,
    state,
    uri_width,
)
from context_engine.schema.levels import Level

if TYPE_CHECKING:
    from context_engine.schema.query import ReadMemoryResponse, SearchMemoryRequest, SearchMemoryResponse


def _session(path: Path | None) -> dict | None:
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        fail(ContextEngineError(ErrorCode.QUERY_INVALID, f"--session-archive {path}: not a readable JSON file ({err})"))
    if isinstance(data, list):
        return {"messages": data}
    return data


@app.command()
def search(
    query: Annotated[str | None, typer.Argument(help="What to look for (omit with --queries).")] = None,
    top_k: Annotated[int, typer.Option("--top-k", "-k", help="Results, 1..50.")] = 10,
    threshold: Annotated[
        float | None, typer.Option("--threshold", help="Minimum final score (0..1); default from config.")
    ] = None,
    gte: Annotated[bool, typer.Option("--gte", help="Keep scores equal to the threshold (>= instead of >).")] = False,
    category: Annotated[list[str] | None, typer.Option("--category", "-c", help="Narrow to categories.")] = None,
    target_uri: Annotated[str | None, typer.Option(help="Restrict to this visible subtree.")] = None,
    owner_space: Annotated[
        str | None, typer.Option(help="Narrow to one owner space: shared, user:<s> or agent:<s>.")
    ] = None,
    context_type: Annotated[
        str | None, typer.Option(help="Force the context type (memory, skill or resource) instead of planning it.")
    ] = None,
    session_archive: Annotated[
        Path | None,
        typer.Option(
            "--session-archive", help="JSON file with recent messages (a list, or {messages: [...]}): session_archive."
        ),
    ] = None,
    debug: Annotated[
        bool, typer.Option("--debug", help="Include the detailed thinking trace (with --json --full).")
    ] = False,
    full: Annotated[
        bool, typer.Option("--full", help="With --json: print the whole response, not only the hits.")
    ] = False,
    compact: Annotated[
        bool, typer.Option("--compact", help="With --json: print the compact answer (what MCP agents get).")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also print informational planner notes (RET-4221).")
    ] = False,
    queries: Annotated[
        Path | None,
        typer.Option("--queries", help="UTF-8 file with one query per line, all run in this one process."),
    ] = None,
    conversation: Annotated[
        str | None, typer.Option("--conversation", help="Only the messages of this conversation (memories).")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Only memories that occurred at or after this ISO 8601 time.")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Only memories that occurred before this ISO 8601 time.")
    ] = None,
    meta: Annotated[
        list[str] | None,
        typer.Option("--meta", help="KEY=VALUE metadata filter on memories (repeat a key for any of several values)."),
    ] = None,
    user_space: Annotated[
        str | None,
        typer.Option("--user-space", help="An admin: search as this user (its memories and the shared resources)."),
    ] = None,
    session: Annotated[
        Path | None, typer.Option("--session", hidden=True, help="Deprecated: --session-archive.")
    ] = None,
    session_id: Annotated[
        str | None, typer.Option("--session-id", hidden=True, help="Deprecated: --conversation.")
    ] = None,
) -> None:
    """search_memory: L0-first retrieval (plan, L0 recall, hierarchical expansion, recheck, assemble)."""
    from pydantic import ValidationError

    if full and compact:
        fail(ContextEngineError(ErrorCode.QUERY_INVALID, "give at most one of --full and --compact"))
    session_archive = renamed_option("search", "--session-archive", session_archive, "--session", session)
    conversation = renamed_option("search", "--conversation", conversation, "--session-id", session_id)
    texts = _queries(query, queries)
    archive = _session(session_archive)
    time_range = {"start": since, "end": until} if since or until else None
    try:
        metadata_filter = _meta_filter(meta)
        requests = _requests(
            texts,
            top_k=top_k,
            score_threshold=threshold,
            score_gte=gte,
            categories=list(category or []),
            target_uri=target_uri,
            owner_space=owner_space,
            session_archive=archive,
            planner_hints={"intent": context_type} if context_type else None,
            include_debug=debug,
            trace_level="detailed" if debug else "basic",
            conversation_id=conversation,
            time_range=time_range,
            metadata_filter=metadata_filter,
            user_space=user_space,
        )
    except ValidationError as err:
        fields = [".".join(map(str, e["loc"])) for e in err.errors()]
        fail(ContextEngineError(ErrorCode.QUERY_INVALID, f"invalid search options: {', '.join(fields)}"))
    except ContextEngineError as err:
        fail(err)
    with open_engine() as engine:
        responses = [engine.search_memory(request, state.ctx) for request in requests]
        cut = engine.settings.retrieval.compact_abstract_max_chars
    if state.json:
        results = [_json_result(r, full, cut if compact else None, debug) for r in responses]
        if queries is None:
            emit(results[0])
        else:
            key = "response" if full or compact else "hits"
            emit([{"query": q, key: r} for q, r in zip(texts, results, strict=True)])
        return
    for i, (text, response) in enumerate(zip(texts, responses, strict=True)):
        if queries is not None:
            if i:
                out.print()
            out.print(f"search: {shown(text)}", markup=False, highlight=False)
        _print_search(response, verbose)


def _queries(query: str | None, path: Path | None) -> list[str]:
    """The query argument, or the non-empty lines of ``--queries`` (exactly one of the two)."""
    if (query is None) == (path is None):
        fail(ContextEngineError(ErrorCode.QUERY_INVALID, "give either a QUERY or --queries FILE", {"field": "query"}))
    if path is None:
        assert query is not None
        return [query]
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        fail(ContextEngineError(ErrorCode.QUERY_INVALID, f"--queries {path}: not a readable UTF-8 file ({err})"))
    texts = [line.strip() for line in lines if line.strip()]
    if not texts:
        fail(ContextEngineError(ErrorCode.QUERY_INVALID, f"--queries {path}: no query in the file"))
    return texts


def _json_result(response: SearchMemoryResponse, full: bool, compact_cut: int | None, debug: bool) -> object:
    """The JSON of one answer: the whole response (``full``), the compact answer (``compact_cut``, its L0 length;
    with ``debug`` its debug part) or the hits."""
    if compact_cut is not None:
        from context_engine.retrieval.compact import compact_search

        compact = compact_search(response, include_debug=debug, abstract_max_chars=compact_cut)
        return compact.model_dump(mode="json")
    return response.model_dump(mode="json") if full else [h.model_dump(mode="json") for h in response.hits]


def _print_search(response: SearchMemoryResponse, verbose: bool) -> None:
    """One response as the table (fitted to the console), the ``match:`` line, the next actions and the warnings;
    informational notes only when ``verbose``. User text goes in as :class:`Text`, never as markup."""
    from context_engine.retrieval.compact import is_informational

    table = Table(show_lines=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("uri", no_wrap=True)
    table.add_column("level", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("read", no_wrap=True)
    width = uri_width(len(str(len(response.hits))), 5, 5, 7)
    for i, h in enumerate(response.hits, 1):
        table.add_row(str(i), Text(short_uri(h.uri, width)), h.level_hit, f"{h.score:.3f}", h.read_recommendation)
    out.print(table)
    style = {"strong": "green", "weak": "yellow", "none": "red"}.get(response.match_quality, "")
    out.print(Text.assemble(("match:", "dim"), " ", (response.match_quality, style)), highlight=False)
    for h in response.hits:  # next_actions, in rank order; whole URIs, never wrapped
        if h.read_recommendation != "none":
            level = "L1" if h.read_recommendation == "read_l1" else "L2"
            line = Text.assemble(("next:", "dim"), f" context-engine read {h.uri} --level {level}")
            out.print(line, highlight=False, soft_wrap=True)
    for warning in response.trace.warnings:
        # RET-4221 only says that no context type was preferred: every type was searched anyway
        informational = is_informational(warning)
        if informational and not verbose:
            continue
        kind = ("note", "dim") if informational else ("warning", "yellow")
        err_console.print(Text.assemble(kind, f" {shown(warning)}"), highlight=False)


@app.command()
def read(
    uri: Annotated[str, typer.Argument(help="A node URI.")],
    level: Annotated[Level, typer.Option("--level", "-l", help="L0 abstract, L1 overview or L2 content.")] = Level.L1,
    relations: Annotated[
        int, typer.Option("--relations", help="Add up to this many one-hop relations (L1/L2).", min=0, max=1000)
    ] = 0,
    offset: Annotated[int, typer.Option("--offset", help="L2: where the page starts (a 'next:' offset).", min=0)] = 0,
    max_chars: Annotated[
        int | None, typer.Option("--max-chars", help="L2: page size, 1..12000 (default 12000).", min=1)
    ] = None,
) -> None:
    """read_memory: one level of a node (secrets redacted; L2 one page at a time, --offset for the next)."""
    from context_engine.schema.query import ReadMemoryRequest

    with open_engine() as engine:
        if level is Level.L0:
            text = engine.read(uri, Level.L0, state.ctx)
            payload = {"uri": uri, "level": "L0", "text": text}
        else:
            response = engine.read_memory(
                ReadMemoryRequest(
                    uri=uri,
                    level="L1" if level is Level.L1 else "L2",
                    expand_relations=relations > 0,
                    max_relations=relations,
                    offset=offset,
                    max_chars=max_chars,
                ),
                state.ctx,
            )
            payload = read_payload(response, level)
    print_read(payload, level)


def read_payload(response: ReadMemoryResponse, level: Level) -> dict[str, Any]:
    """What ``read`` prints with ``--json``: the level's text, the block and the L2 paging."""
    block = response.block
    return {
        "uri": block.uri,
        "level": level.value,
        "text": (block.overview if level is Level.L1 else block.content_excerpt) or "",
        "request_id": response.request_id,
        "block": block.model_dump(mode="json"),
        "offset": response.offset,
        "next_offset": response.next_offset,
        "total_chars": response.total_chars,
    }


def print_read(payload: dict[str, Any], level: Level) -> None:
    """Print a ``read`` answer: JSON with ``--json``, else the text, its relations and the next page's command."""
    if state.json:
        emit(payload)
        return
    out.print(shown(payload["text"]), markup=False, highlight=False)
    if level is Level.L0:
        return
    for rel in payload["block"]["relations"]:
        out.print(f"[dim]related ({rel['relation_type']}, {rel['weight']:.2f}):[/] {rel['to_uri']}", highlight=False)
    if payload.get("next_offset") is not None:
        err_console.print(
            Text.assemble(
                ("next:", "dim"),
                f" context-engine read {payload['uri']} --level L2 --offset {payload['next_offset']}"
                f" ({payload['next_offset']} of {payload['total_chars']} characters shown)",
            ),
            highlight=False,
            soft_wrap=True,
        )


def _meta_filter(pairs: list[str] | None) -> dict[str, object] | None:
    """``--meta KEY=VALUE`` options as a metadata filter: a value is read as JSON when it parses (numbers, booleans),
    else as text; a key given twice matches any of its values."""
    if not pairs:
        return None
    out: dict[str, list[object]] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ContextEngineError(ErrorCode.QUERY_INVALID, f"--meta expects KEY=VALUE, got {pair!r}")
        try:
            value: object = json.loads(raw)
        except ValueError:
            value = raw
        out.setdefault(key, []).append(value)
    return {k: v[0] if len(v) == 1 else v for k, v in out.items()}


def _requests(texts: list[str], **fields: object) -> list[SearchMemoryRequest]:
    from context_engine.schema.query import SearchMemoryRequest

    return [SearchMemoryRequest(query=text, **fields) for text in texts]  # type: ignore[arg-type]
