"""``batch FILE``: several CLI commands in one process with one engine (issue 15).

Each non-empty line of FILE (``-``: standard input) is a command line without the leading ``context-engine`` (shell
quoting, ``#`` comments), e.g. ``search --queries q.txt --top-k 3`` or ``--json lookup "disk full"``; ``echo TEXT``
prints TEXT. The lines run in order on the engine that ``batch`` opened (its ``--home``; a line's own ``--home`` is
refused), so the model loads once; the first failing line stops the batch with that line's exit status. ``serve``,
``mcp``, ``keys`` and ``batch`` itself cannot run inside a batch.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.cli.common import app, err_console, fail, open_engine, out, state

_NOT_IN_BATCH = frozenset({"batch", "serve", "mcp", "keys"})


def _lines(path: Path) -> list[tuple[int, list[str]]]:
    """``(line number, argv)`` of every command line of ``path``; a malformed or refused line is ``WRT-4002``."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ContextEngineError(
            ErrorCode.REQUEST_INVALID, f"batch {path}: not a readable UTF-8 file ({err})"
        ) from None
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            argv = shlex.split(line, comments=True)
        except ValueError as err:
            raise ContextEngineError(
                ErrorCode.REQUEST_INVALID, f"batch {path}:{number}: {err}", {"line": number}
            ) from None
        if not argv:
            continue
        command = next((a for a in argv if not a.startswith("-")), "")
        if "--home" in argv or command in _NOT_IN_BATCH:
            what = "--home" if "--home" in argv else command
            raise ContextEngineError(
                ErrorCode.REQUEST_INVALID, f"batch {path}:{number}: {what} cannot run in a batch", {"line": number}
            )
        found.append((number, argv))
    return found


@app.command()
def batch(
    file: Annotated[Path, typer.Argument(help="Commands, one per line, without 'context-engine' ('-': stdin).")],
) -> None:
    """Run several commands in this one process, on one engine (the model loads once); stops at the first failure."""
    import click

    try:
        lines = _lines(file)
    except ContextEngineError as err:
        fail(err)
    command = typer.main.get_command(app)
    home, as_json, ctx = state.home, state.json, state.ctx
    with open_engine() as engine:
        state.shared_engine = engine
        try:
            for number, argv in lines:
                if argv[0] == "echo":
                    out.print(Text(" ".join(argv[1:])))
                    continue
                prefix = ["--json"] if as_json and "--json" not in argv else []
                try:
                    code = command.main(args=prefix + argv, prog_name="context-engine", standalone_mode=False)
                except click.ClickException as err:
                    err.show()
                    code = err.exit_code
                if code:
                    err_console.print(Text(f"batch stopped at line {number}: {shlex.join(argv)}"))
                    raise typer.Exit(code)
                state.home, state.json, state.ctx = home, as_json, ctx  # each line's options are its own
        finally:
            state.shared_engine = None
