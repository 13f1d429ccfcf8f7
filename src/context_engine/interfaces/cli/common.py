"""Shared CLI plumbing: the typer app, global options, engine opening, output and error envelopes.

Global options: ``--home PATH`` (``CE_HOME``), ``--json`` (machine-readable output), ``--as
account:role:user_space:agent_space`` (the RequestContext; default: account ``default``, role ``admin``), ``--url``
(``CE_URL``) and ``--api-key`` (``CE_API_KEY``): send the read and write commands to a running server instead of
opening a home (:mod:`context_engine.interfaces.cli.remote`).
Errors print the envelope ``{code, message, details, request_id}`` and exit with the code's exit status.

Cold start (issue 12): the command modules import only typer, rich and :mod:`context_engine.errors` at module level;
the schema, settings, service and everything under them are imported inside the command functions, so
``context-engine --help`` builds no pydantic model and loads no store or model.
"""

from __future__ import annotations

import gc
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from typer.core import TyperGroup

from context_engine.errors import ContextEngineError

if TYPE_CHECKING:
    from context_engine.schema.context import RequestContext
    from context_engine.schema.nodes import IngestReport


def _flags_as_flags(command: Any, ctx: Any) -> None:
    """Show on/off options (``--json``, ``--all``, ``--help``) without a value type in the help of ``command`` and
    of its subcommands: typer 0.29's rich help prints ``<bool>`` for them, as if they took a value. An empty
    metavar is what its ``display_type_rich`` shows instead; parsing does not use it."""
    help_option = command.get_help_option(ctx)
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _flags_as_flags(sub, ctx)


class _CheckedGroup(TyperGroup):
    """The root command group: checks every argument for invalid Unicode once, before any command runs; shows
    flags as flags in every help text (:func:`_flags_as_flags`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        _flags_as_flags(self, ctx)  # the root's own options and, through its commands, every subcommand's
        return super().get_params(ctx)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        state.json = bool(ctx.params.get("json_out"))  # the callback has not run yet: fail() needs the format
        _check_arguments(name, {"--as": ctx.params.get("as_") or "", **{str(i): a for i, a in enumerate(rest, 1)}})
        return name, cmd, rest


app = typer.Typer(
    cls=_CheckedGroup,
    name="context-engine",
    help="ContextEngine: store memories, skills and resources as L0/L1/L2 nodes under ctx:// URIs and retrieve them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Piped output is laid out for 100 columns, like a terminal's: tables shorten URIs in the middle to fit (the full
# URIs are in --json and on the `next:` lines, which are never wrapped).
PIPE_WIDTH = 100
out = Console(width=None if sys.stdout.isatty() else PIPE_WIDTH, emoji=False)
err_console = Console(stderr=True, emoji=False)


class _State:
    home: Path | None = None
    json: bool = False
    url: str | None = None  # --url: commands go to this server (open_engine yields a RemoteEngine)
    api_key: str | None = None
    shared_engine: Any = None  # set by `batch`: every command of the batch uses this engine
    _ctx: RequestContext | None = None  # None: DEFAULT_CONTEXT, imported when first asked for

    @property
    def ctx(self) -> RequestContext:
        if self._ctx is None:
            from context_engine.schema.context import DEFAULT_CONTEXT

            return DEFAULT_CONTEXT
        return self._ctx

    @ctx.setter
    def ctx(self, value: RequestContext | None) -> None:
        self._ctx = value


state = _State()


# Commands that write: invalid Unicode in their arguments is WRT-4221 (content), in the others RET-4001 (query).
WRITE_COMMANDS = frozenset(
    {"add", "add-memory", "add-skill", "add-messages", "update-memory", "delete-memory", "rm", "mv", "init", "reindex"}
)


@app.callback()
def _main(
    home: Annotated[
        Path | None, typer.Option("--home", envvar="CE_HOME", help="Data directory (default ~/.context-engine).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
    as_: Annotated[
        str | None,
        typer.Option("--as", help="Act as account:role:user_space:agent_space (default: default:admin)."),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            envvar="CE_URL",
            help="Send the command to a running server (e.g. http://127.0.0.1:8420) instead of opening a home: "
            "search, read, ls, tree, lookup, add-memory, add-messages, memories, get-memory, update-memory, "
            "delete-memory, stats.",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", envvar="CE_API_KEY", help="The API key for --url (prefer CE_API_KEY: not in ps)."),
    ] = None,
) -> None:
    state.home = home
    state.json = json_out
    state.url = url or None
    state.api_key = api_key or None
    state.ctx = None  # reset to the default: one process may run several invocations (tests, shells)
    if as_ and state.url:
        from context_engine.errors import ErrorCode

        fail(
            ContextEngineError(
                ErrorCode.REQUEST_INVALID,
                "--as sets who acts on a local home; with --url the API key (--api-key, CE_API_KEY) says who you are",
                {"option": "--as"},
            )
        )
    if as_:
        from context_engine.schema.context import RequestContext

        try:
            state.ctx = RequestContext.parse(as_)
        except ContextEngineError as e:
            fail(e)


def _check_arguments(command: str | None, args: dict[str, str]) -> None:
    """Refuse arguments with invalid Unicode before any command runs: bytes that are not UTF-8 reach Python as lone
    surrogates (``surrogateescape``), which no store can encode. ``args``: ``--as`` and the command's arguments by
    position (1-based, options and their values counted)."""
    from context_engine.errors import ErrorCode
    from context_engine.schema.text import find_invalid_text, invalid_text_error

    found = find_invalid_text(args)
    if found is not None:
        code = ErrorCode.CONTENT_INVALID if command in WRITE_COMMANDS else ErrorCode.QUERY_INVALID
        what = "--as" if found[0] == "--as" else f"argument {found[0]} of {command}"
        details = invalid_text_error(("argument", found[0]), code).details
        fail(ContextEngineError(code, f"{what} is not valid UTF-8 text; pass well-formed UTF-8", details))


def fail(e: ContextEngineError) -> None:
    if state.json:
        out.print_json(data=e.envelope())
    else:
        err_console.print(f"[bold red]error {e.code.value}[/]: {escape(shown(e.message))}")
        if e.details:
            err_console.print(f"[dim]details: {escape(shown(json.dumps(e.details, ensure_ascii=False)))}[/]")
    raise typer.Exit(e.code.exit_code)


def renamed_option(command: str, new_flag: str, new: Any, old_flag: str, old: Any) -> Any:
    """The value of an option renamed in issue 29 ("one word per concept"): ``new``, or ``old`` when only the old
    option (hidden from ``--help``, still accepted) was given, with a note on stderr. Both with different values:
    ``WRT-4002`` (exit 2)."""
    if old is None:
        return new
    from context_engine.schema.renames import renamed_argument

    err_console.print(f"[yellow]note[/]: {old_flag} is deprecated; use {new_flag}", highlight=False)
    try:
        return renamed_argument(command, new_flag, new, old_flag, old, warn=False)
    except ContextEngineError as err:
        fail(err)


@contextmanager
def open_engine(*, recover: bool = True) -> Iterator[Any]:
    """The engine of ``--home``; ``recover=False`` skips the startup check of the write journal (``reindex --check``
    reports what it would repair). Inside ``batch`` every command shares the batch's engine (closed by it)."""
    if state.shared_engine is not None:
        try:
            yield state.shared_engine
        except ContextEngineError as e:
            fail(e)
        return
    if state.url:
        with _remote_engine() as remote:
            yield remote
        return
    # Opening allocates most of a process's long-lived objects (the engine's imports, an index's id tables); at the
    # default thresholds the cyclic collector scans them again and again: ~0.15 s of a one-shot `search` (issue 12).
    # Collect rarely while opening, then move what is open out of the collector's way (gc.freeze) until the engine is
    # closed (gc.unfreeze: a process running many commands, e.g. tests, frees it all again).
    thresholds = gc.get_threshold()
    gc.set_threshold(100_000, 50, 50)
    try:
        from context_engine.engine_factory import build_engine
        from context_engine.settings import load_settings

        try:
            settings = load_settings(state.home) if state.home else load_settings()
            engine = build_engine(settings, recover_writes=recover)
        except ContextEngineError as e:
            fail(e)
    finally:
        gc.set_threshold(*thresholds)
    gc.freeze()
    try:
        yield engine
    except ContextEngineError as e:
        fail(e)
    finally:
        engine.close()
        gc.unfreeze()


@contextmanager
def _remote_engine() -> Iterator[Any]:
    """A :class:`~context_engine.interfaces.cli.remote.RemoteEngine` on ``--url``: the client only (no store, no
    model); closed at the end of the command."""
    from context_engine.client import Client
    from context_engine.interfaces.cli.remote import RemoteEngine

    engine = RemoteEngine(Client(state.url or "", state.api_key))
    try:
        yield engine
    except ContextEngineError as e:
        fail(e)
    finally:
        engine.close()


# C0 and C1 control characters but newline and tab (and the CR of a CRLF), and DEL: ESC starts the sequences that
# recolour, move the cursor, retitle the window or write the clipboard; rich passes ESC and C1 through as they are.
_CONTROL = re.compile("\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    """``text`` as the human-readable output prints it: each control character other than newline and tab written as
    its escape (ESC as the four characters ``\\x1b``), so text from the store (a memory, an abstract, a document, a
    metadata value, an error message quoting input) cannot drive the operator's terminal. Every human-readable print
    of such text goes through here; ``--json`` output does not (JSON writes C0 control characters as ``\\u001b``),
    and what is stored is never changed."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def stored_text(text: str, style: str = "") -> Text:
    """:func:`shown` as a rich :class:`Text` (never read as markup): a table cell, a panel's body, a tree label."""
    return Text(shown(text), style=style)


def short_uri(uri: str, width: int) -> str:
    """``uri`` in at most ``width`` terminal cells (a CJK character takes two): its middle replaced by ``…`` when
    longer, keeping the scope and the last segments (what tells nodes apart)."""
    if cell_len(uri) <= width:
        return uri
    tail_cells, head_cells = 2 * width // 3, width - 2 * width // 3 - 1
    tail = ""
    for ch in reversed(uri):
        if cell_len(ch + tail) > tail_cells:
            break
        tail = ch + tail
    head = ""
    for ch in uri:
        if cell_len(head + ch) > head_cells:
            break
        head += ch
    return head + "…" + tail


def uri_width(*fixed: int) -> int:
    """Characters left for a URI column in a boxed table on ``out`` whose other columns take ``fixed`` characters
    (each column costs 3 more: its padding and border)."""
    return max(16, out.width - sum(fixed) - 3 * (len(fixed) + 1) - 1)


def emit(data: Any) -> None:
    out.print_json(json.dumps(data, ensure_ascii=False, default=str))


def print_report(report: IngestReport, what: str) -> None:
    if state.json:
        emit(report.model_dump())
        return
    out.print(
        f"[green]{what}[/]: nodes={report.nodes} directories={report.directories} chunks={report.chunks} "
        f"vectors={report.vectors} unchanged={report.unchanged} skipped={report.skipped} failed={report.failed}"
        + (f" [yellow]pending={report.pending} (run `context-engine reindex`)[/]" if report.pending else ""),
        soft_wrap=True,  # one line: its URIs stay whole
    )
    for f in report.failures:
        out.print(f"  [red]failed[/] {escape(shown(f['path']))}: {f['code']} {escape(shown(f['error']))}")
    if report.skipped_paths:
        from rich.table import Table

        table = Table("skipped", "reason", title=f"skipped {report.skipped} file{'s' if report.skipped != 1 else ''}")
        for f in report.skipped_paths:
            table.add_row(stored_text(f["path"]), stored_text(f["reason"]))
        out.print(table)
        if report.skipped > len(report.skipped_paths):
            out.print(f"  … and {report.skipped - len(report.skipped_paths)} more")


@contextmanager
def progress_bar() -> Iterator[Any]:
    if state.json:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=False,
    ) as bar:
        tasks: dict[str, Any] = {}

        def tick(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield tick
