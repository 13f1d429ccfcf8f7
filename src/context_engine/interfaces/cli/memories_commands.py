"""Memory lifecycle commands (issue 11; DESIGN.md §10): ``add-messages``, ``memories``, ``get-memory``,
``update-memory``, ``delete-memory``. Thin over the service, like every command; ``add-memory`` is in
``store_commands.py``.

``add-messages FILE --conversation ID`` (``--session``: its deprecated name, issue 29) reads one JSON message
``{role, content, speaker?, timestamp?, metadata?}`` per line (blank lines skipped) and sends them in batches of
``memory.max_batch_items``: each batch is one all-or-nothing write, and every line is checked to be a JSON object of
message fields before the first batch is sent. An error names the file's line (``details.line``) and, when earlier
batches were already written, how many messages they held (``details.written``).

Text that comes from the user (abstracts, memory text, metadata) is printed escaped, never as rich markup, and its
control characters (ESC...) as their escapes (``common.shown``).
"""

from __future__ import annotations

import json
import re
from contextlib import ExitStack
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.cli.common import (
    app,
    emit,
    fail,
    open_engine,
    out,
    print_report,
    progress_bar,
    renamed_option,
    short_uri,
    shown,
    state,
    stored_text,
)

if TYPE_CHECKING:
    from context_engine.schema.memory import MemoryDetail, MemoryListPage, MemoryOutcome

__all__ = ["DedupPolicyOption", "json_object_option", "timestamp_option"]

_UNIX_SECONDS = re.compile(r"^-?\d+(\.\d+)?$")


class DedupPolicyOption(StrEnum):
    """``--policy``: what a near-duplicate memory write does (``memory.dedup_policy`` when not given)."""

    # upper-case member names: a member called ``replace`` would hide ``str.replace`` (the CLI shows the values)
    SKIP = "skip"
    KEEP = "keep"
    REPLACE = "replace"


def json_object_option(raw: str | None, option: str) -> dict[str, Any] | None:
    """The JSON object given to ``option`` (``None`` when not given); ``WRT-4002`` for bad JSON or a non-object."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as err:
        fail(ContextEngineError(ErrorCode.REQUEST_INVALID, f"{option}: not valid JSON ({err})", {"field": option}))
    if not isinstance(value, dict):
        fail(
            ContextEngineError(
                ErrorCode.REQUEST_INVALID,
                f'{option} must be a JSON object, e.g. \'{{"source": "chat"}}\'',
                {"field": option},
            )
        )
    return value


def timestamp_option(raw: str | None) -> str | float | None:
    """``--occurred-at``: ISO 8601 text as given (the engine parses it), or Unix seconds when it is a number."""
    if raw is None:
        return None
    text = raw.strip()
    return float(text) if _UNIX_SECONDS.match(text) else text


# ---- add-messages ---------------------------------------------------------------------------------------------------
def _read_messages(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, message fields)`` for each non-blank line of ``path``; ``WRT-4002`` naming the first bad
    line (not JSON, not an object, unknown field, wrong type), ``WRT-4221`` for text that is not UTF-8, ``WRT-4041``
    for a missing or unreadable file."""
    # The HTTP/MCP message model, so a line means what a request body means; imported here because the HTTP
    # package costs seconds to import and only this command needs it.
    from pydantic import ValidationError

    from context_engine.api.models import MessageIn

    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()  # a UTF-8 BOM is allowed
    except UnicodeDecodeError as err:
        fail(ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path} is not valid UTF-8 (byte {err.start})"))
    except OSError as err:
        fail(ContextEngineError(ErrorCode.PATH_NOT_FOUND, f"cannot read {path}: {err.strerror or err}"))
    messages: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as err:
            fail(
                ContextEngineError(
                    ErrorCode.REQUEST_INVALID,
                    f"{where}: not valid JSON ({err.msg} at column {err.colno})",
                    {"line": number, "column": err.colno},
                )
            )
        if not isinstance(raw, dict):
            fail(
                ContextEngineError(
                    ErrorCode.REQUEST_INVALID, f"{where}: a message must be a JSON object", {"line": number}
                )
            )
        try:
            message = MessageIn.model_validate(raw)
        except ValidationError as err:
            problems = [".".join(map(str, e["loc"])) + ": " + e["msg"] for e in err.errors()[:3]]
            fail(
                ContextEngineError(
                    ErrorCode.REQUEST_INVALID, f"{where}: {'; '.join(problems)}", {"line": number, "fields": problems}
                )
            )
        messages.append((number, message.model_dump(exclude_none=True)))
    if not messages:
        fail(ContextEngineError(ErrorCode.REQUEST_INVALID, f"{path}: no message in the file"))
    return messages


def _at_line(err: ContextEngineError, path: Path, lines: list[int], written: int) -> ContextEngineError:
    """The service's error for one batch, pointed at the file's line (``details.index`` is the batch position)."""
    details = dict(err.details)
    message = err.message
    index = details.get("index")
    if isinstance(index, int) and 0 <= index < len(lines):
        details["line"] = lines[index]
        message = f"{path} line {lines[index]}: " + re.sub(r"^item \d+:? ", "", message)
    if written:
        details["written"] = written
        message += f" ({written} messages of earlier batches were written)"
    return ContextEngineError(err.code, message, details, retryable=err.retryable)


@app.command("add-messages")
def add_messages(
    file: Annotated[Path, typer.Argument(help="JSONL: one {role, content, speaker?, timestamp?, metadata?} per line.")],
    conversation: Annotated[
        str | None, typer.Option("--conversation", help="The conversation id (one URI segment).")
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", "-s", hidden=True, help="Deprecated: --conversation.")
    ] = None,
) -> None:
    """Store conversation messages as memories of one conversation (batches of memory.max_batch_items)."""
    from context_engine.schema.memory import MemoryWriteResult

    conversation = renamed_option("add-messages", "--conversation", conversation, "--session", session)
    if conversation is None:
        fail(ContextEngineError(ErrorCode.REQUEST_INVALID, "add-messages needs --conversation ID"))
    numbered = _read_messages(file)
    outcomes: list[MemoryOutcome] = []
    totals = MemoryWriteResult(items=[])
    with open_engine() as engine, ExitStack() as stack:
        size = engine.settings.memory.max_batch_items
        # a progress bar only when the file takes several batches (it goes to stderr)
        tick = stack.enter_context(progress_bar()) if len(numbered) > size else None
        for start in range(0, len(numbered), size):
            batch = numbered[start : start + size]
            try:
                result = engine.add_messages([m for _, m in batch], conversation, state.ctx)
            except ContextEngineError as err:
                raise _at_line(err, file, [n for n, _ in batch], len(outcomes)) from None
            outcomes.extend(result.items)
            for field in ("nodes", "directories", "vectors", "unchanged", "duplicates", "pending"):
                setattr(totals, field, getattr(totals, field) + getattr(result, field))
            if tick is not None:
                tick("messages", len(outcomes), len(numbered))
    totals.items = outcomes
    if state.json:
        emit(totals.model_dump(mode="json"))
        return
    first, last = outcomes[0].uri, outcomes[-1].uri
    span = escape(first) if first == last else f"{escape(first)} .. {escape(last.rsplit('/', 1)[-1])}"
    out.print(
        f"[green]{len(outcomes)} messages added[/] to conversation {escape(conversation)}: {span}: "
        f"nodes={totals.nodes} directories={totals.directories} vectors={totals.vectors}"
        + (f" [yellow]pending={totals.pending} (run `context-engine reindex`)[/]" if totals.pending else ""),
        highlight=False,
        soft_wrap=True,  # one line: its URIs stay whole
    )


# ---- memories (list) ------------------------------------------------------------------------------------------------
def _when(value: Any) -> str:
    """A UTC time to the minute for the table (the JSON output has the exact value)."""
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else ""


@app.command("memories")
def memories(
    category: Annotated[str | None, typer.Option("--category", "-c", help="Only this category.")] = None,
    conversation: Annotated[
        str | None, typer.Option("--conversation", help="Only this conversation's messages.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Page size, 1..200.")] = 20,
    offset: Annotated[int, typer.Option("--offset", help="Memories to skip.")] = 0,
    user_space: Annotated[str | None, typer.Option("--user-space", help="An admin: list this user's memories.")] = None,
    session: Annotated[
        str | None, typer.Option("--session", "-s", hidden=True, help="Deprecated: --conversation.")
    ] = None,
) -> None:
    """List the caller's memories, newest first (updated, UTC), with their L0 abstracts."""
    conversation = renamed_option("memories", "--conversation", conversation, "--session", session)
    with open_engine() as engine:
        page: MemoryListPage = engine.list_memories(
            state.ctx,
            category=category,
            conversation_id=conversation,
            limit=limit,
            offset=offset,
            user_space=user_space,
        )
    if state.json:
        emit(page.model_dump(mode="json"))
        return
    table = Table(show_lines=False)
    table.add_column("uri", no_wrap=True)  # shortened in the middle to fit (whole in --json)
    table.add_column("v", justify="right", no_wrap=True)
    table.add_column("updated", no_wrap=True)
    table.add_column("occurred", no_wrap=True)
    table.add_column("abstract", overflow="fold", ratio=1)
    width = min(max((len(m.uri) for m in page.items), default=3), out.width // 4)
    for m in page.items:
        table.add_row(
            Text(short_uri(m.uri, width)),
            str(m.version),
            _when(m.updated_at),
            _when(m.occurred_at),
            stored_text(m.abstract),
        )
    out.print(table)
    shown = f"{page.offset + 1}-{page.offset + len(page.items)}" if page.items else "none"
    tail = f"; next page: --offset {page.next_offset}" if page.next_offset is not None else ""
    out.print(f"[dim]{shown} of {page.total}{tail}[/]", highlight=False)


def _iso(value: Any) -> str | None:
    """A UTC time to the second (``--json`` has the exact value)."""
    return value.isoformat(timespec="seconds") if value is not None else None


# ---- get / update / delete ------------------------------------------------------------------------------------------
@app.command("get-memory")
def get_memory(uri: Annotated[str, typer.Argument(help="The memory's URI.")]) -> None:
    """Show one memory: its text, metadata, times and earlier versions (history, oldest first)."""
    with open_engine() as engine:
        detail: MemoryDetail = engine.get_memory(uri, state.ctx)
    if state.json:
        emit(detail.model_dump(mode="json"))
        return
    out.print(f"[bold]{escape(detail.uri)}[/]  version {detail.version}", highlight=False)
    fields = {
        "category": detail.category,
        "conversation": detail.conversation_id,
        "created": _iso(detail.created_at),
        "updated": _iso(detail.updated_at),
        "occurred": _iso(detail.occurred_at),
        "metadata": json.dumps(detail.metadata, ensure_ascii=False) if detail.metadata else None,
    }
    for key, value in fields.items():
        if value is not None:
            out.print(f"[dim]{key}:[/] {escape(shown(value))}", highlight=False, soft_wrap=True)
    out.print(shown(detail.text), markup=False, highlight=False)
    for v in detail.history:
        out.print(
            f"[dim]version {v.version} (written {_iso(v.created_at)}, replaced {_iso(v.replaced_at)}):[/]",
            highlight=False,
        )
        out.print(shown(v.text), markup=False, highlight=False)


@app.command("update-memory")
def update_memory(
    uri: Annotated[str, typer.Argument(help="The memory's URI.")],
    text: Annotated[str, typer.Argument(help="The new text.")],
    metadata: Annotated[
        str | None, typer.Option("--metadata", help="New metadata, a JSON object (default: kept).")
    ] = None,
    occurred_at: Annotated[
        str | None, typer.Option("--occurred-at", help="New occurred_at: ISO 8601 or Unix seconds (default: kept).")
    ] = None,
) -> None:
    """Replace a memory's text (re-embedded, version + 1); the previous text stays in its history."""
    md = json_object_option(metadata, "--metadata")
    with open_engine() as engine:
        result = engine.update_memory(uri, text, state.ctx, metadata=md, occurred_at=timestamp_option(occurred_at))
    if state.json:
        emit(result.model_dump(mode="json"))
        return
    item = result.items[0]
    verb = "memory updated" if item.status == "updated" else "memory unchanged (same text)"
    out.print(f"[green]{verb}[/]: {escape(item.uri)} version {item.version}", highlight=False)


@app.command("delete-memory")
def delete_memory(uri: Annotated[str, typer.Argument(help="The memory's URI.")]) -> None:
    """Delete one memory and its versions (a missing or invisible one is the same RET-4032)."""
    with open_engine() as engine:
        report = engine.delete_memory(uri, state.ctx)
    print_report(report, "memory deleted")
