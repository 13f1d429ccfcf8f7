"""``context-engine``: the CLI (DESIGN.md §10). A thin layer over :class:`ContextEngineService`.

Global options: ``--home PATH`` (``CE_HOME``), ``--json`` (machine-readable output), ``--as
account:role:user_space:agent_space`` (the RequestContext; default: account ``default``, role ``admin``).
Errors print the envelope ``{code, message, details, request_id}`` and exit with the code's exit status.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Iterator, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.tree import Tree

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.context import DEFAULT_CONTEXT, RequestContext
from context_engine.schema.nodes import IngestReport, Level

app = typer.Typer(
    name="context-engine",
    help="ContextEngine: store memories, skills and resources as L0/L1/L2 nodes under ctx:// URIs and retrieve them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err_console = Console(stderr=True)


class _State:
    home: Optional[Path] = None
    json: bool = False
    ctx: RequestContext = DEFAULT_CONTEXT


state = _State()


@app.callback()
def _main(
    home: Annotated[
        Optional[Path], typer.Option("--home", envvar="CE_HOME", help="Data directory (default ~/.context-engine).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
    as_: Annotated[
        Optional[str],
        typer.Option("--as", help="Act as account:role:user_space:agent_space (default: default:admin)."),
    ] = None,
) -> None:
    state.home = home
    state.json = json_out
    if as_:
        try:
            state.ctx = RequestContext.parse(as_)
        except ContextEngineError as e:
            _fail(e)


def _fail(e: ContextEngineError) -> None:
    if state.json:
        out.print_json(data=e.envelope())
    else:
        err_console.print(f"[bold red]error {e.code.value}[/]: {e.message}")
        if e.details:
            err_console.print(f"[dim]details: {json.dumps(e.details, ensure_ascii=False)}[/]")
    raise typer.Exit(e.code.exit_code)


@contextmanager
def _engine() -> Iterator[Any]:
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    try:
        engine = ContextEngineService(load_settings(state.home) if state.home else load_settings())
    except ContextEngineError as e:
        _fail(e)
    try:
        yield engine
    except ContextEngineError as e:
        _fail(e)
    finally:
        engine.close()


def _emit(data: Any) -> None:
    out.print_json(json.dumps(data, ensure_ascii=False, default=str))


def _report(report: IngestReport, what: str) -> None:
    if state.json:
        _emit(report.model_dump(exclude={"uris"}))
        return
    out.print(
        f"[green]{what}[/]: nodes={report.nodes} directories={report.directories} chunks={report.chunks} "
        f"vectors={report.vectors} unchanged={report.unchanged} skipped={report.skipped} failed={report.failed}"
        + (f" [yellow]pending={report.pending} (run `context-engine reindex`)[/]" if report.pending else "")
    )
    for f in report.failures:
        out.print(f"  [red]failed[/] {f['path']}: {f['code']} {f['error']}")


@app.command()
def init() -> None:
    """Create the data directory and its stores (idempotent)."""
    with _engine() as engine:
        info = engine.stats(state.ctx)
    if state.json:
        _emit(info)
    else:
        out.print(f"initialised [bold]{info['home']}[/] (model {info['embedding_model']}, index {info['index_backend']})")


@app.command()
def add(
    path: Annotated[Path, typer.Argument(help="A file or a directory of .md/.markdown/.txt files.")],
    uri: Annotated[str, typer.Argument(help="Target URI under ctx://resources/ (a directory ends with '/').")] = (
        "ctx://resources/"
    ),
    strict: Annotated[bool, typer.Option(help="Fail on the first bad file instead of skipping it.")] = False,
) -> None:
    """Add resources: parse, chunk, summarise (L0/L1), embed and index them."""
    with _engine() as engine, _progress() as tick:
        report = engine.add_resource(path, uri, state.ctx, strict=strict, progress=tick)
    _report(report, "added")
    if report.failed and not report.nodes and not report.unchanged:
        raise typer.Exit(ErrorCode.CONTENT_INVALID.exit_code)


@contextmanager
def _progress() -> Iterator[Any]:
    if state.json:
        yield None
        return
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


@app.command("add-memory")
def add_memory(
    text: Annotated[str, typer.Argument(help="The memory text.")],
    uri: Annotated[Optional[str], typer.Option(help="Explicit URI under ctx://user/<space>/memories/.")] = None,
    category: Annotated[Optional[str], typer.Option(help="Category, e.g. preference, profile, event.")] = None,
) -> None:
    """Store a memory in the caller's user space."""
    with _engine() as engine:
        report = engine.add_memory(text, state.ctx, uri=uri, category=category)
    _report(report, "memory added" + (f" at {report.uris[0]}" if report.uris else " (unchanged)"))


@app.command("add-skill")
def add_skill(
    name: Annotated[str, typer.Argument(help="Skill name (a URI segment).")],
    description: Annotated[str, typer.Option("--description", "-d", help="One-line description (the L0).")],
    content: Annotated[Optional[str], typer.Option("--content", help="The skill body (markdown).")] = None,
    file: Annotated[Optional[Path], typer.Option("--file", help="Read the body from a file.")] = None,
    category: Annotated[Optional[str], typer.Option(help="Tool family.")] = None,
) -> None:
    """Store a skill in the caller's agent space."""
    body = file.read_text(encoding="utf-8") if file else (content or "")
    with _engine() as engine:
        report = engine.add_skill(name, description, body, state.ctx, category=category)
    _report(report, "skill added" + (f" at {report.uris[0]}" if report.uris else " (unchanged)"))


@app.command()
def ls(uri: Annotated[str, typer.Argument(help="A directory URI.")] = "ctx://resources/") -> None:
    """List a directory's children with their L0 abstracts."""
    with _engine() as engine:
        nodes = engine.ls(uri, state.ctx)
    if state.json:
        _emit([n.model_dump(exclude={"children"}) for n in nodes])
        return
    table = Table("uri", "type", "abstract", show_lines=False)
    for n in nodes:
        table.add_row(n.uri, "dir" if n.is_dir else "file", n.abstract)
    out.print(table)


@app.command()
def tree(
    uri: Annotated[str, typer.Argument(help="Root of the tree.")] = "ctx://resources/",
    depth: Annotated[int, typer.Option(min=0, max=20, help="Levels to show.")] = 3,
    files: Annotated[bool, typer.Option(help="Show files, not only directories.")] = False,
) -> None:
    """Show the directory tree with each node's L0."""
    with _engine() as engine:
        root = engine.tree(uri, state.ctx, max_depth=depth)
    if state.json:
        _emit(root.model_dump() if root else None)
        return
    if root is None:
        out.print(f"{uri} is empty")
        return

    def label(n: Any) -> str:
        return f"[bold]{n.uri}[/]  [dim]{n.abstract}[/]"

    t = Tree(label(root))

    def walk(node: Any, branch: Tree) -> None:
        for c in node.children or []:
            if c.is_dir or files:
                walk(c, branch.add(label(c)))

    walk(root, t)
    out.print(t)


@app.command()
def read(
    uri: Annotated[str, typer.Argument(help="A node URI.")],
    level: Annotated[Level, typer.Option("--level", "-l", help="L0 abstract, L1 overview or L2 content.")] = Level.L1,
) -> None:
    """Read one level of a node."""
    with _engine() as engine:
        text = engine.read(uri, level, state.ctx)
    if state.json:
        _emit({"uri": uri, "level": level.value, "text": text})
    else:
        out.print(text, markup=False, highlight=False)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    top_k: Annotated[int, typer.Option("--top-k", "-k", help="Results, 1..50.")] = 10,
    context_type: Annotated[Optional[str], typer.Option(help="memory, skill or resource.")] = None,
    target_uri: Annotated[Optional[str], typer.Option(help="Restrict to this subtree.")] = None,
) -> None:
    """First-round L0 vector search."""
    with _engine() as engine:
        hits = engine.search(query, state.ctx, top_k=top_k, context_type=context_type, target_uri=target_uri)
    if state.json:
        _emit([h.model_dump() for h in hits])
        return
    table = Table("#", "uri", "score", "abstract")
    for i, h in enumerate(hits, 1):
        table.add_row(str(i), h.uri, f"{h.score:.3f}", h.abstract)
    out.print(table)


@app.command()
def rm(
    uri: Annotated[str, typer.Argument(help="Node to delete.")],
    recursive: Annotated[bool, typer.Option("--recursive", "-r", help="Delete a directory and its subtree.")] = False,
) -> None:
    """Delete a node."""
    with _engine() as engine:
        report = engine.delete(uri, state.ctx, recursive=recursive)
    _report(report, "deleted")


@app.command()
def mv(src: Annotated[str, typer.Argument()], dst: Annotated[str, typer.Argument()]) -> None:
    """Move or rename a node and its subtree."""
    with _engine() as engine:
        report = engine.move(src, dst, state.ctx)
    _report(report, "moved")


@app.command()
def reindex(full: Annotated[bool, typer.Option(help="Rebuild every vector, not only pending nodes.")] = False) -> None:
    """Push pending (or all) vectors from the metadata store into the vector index."""
    with _engine() as engine, _progress() as tick:
        report = engine.reindex(state.ctx, full=full, progress=tick)
    _report(report, "reindexed")


@app.command()
def stats() -> None:
    """Counts of nodes, files, directories, pending nodes and index records."""
    with _engine() as engine:
        info = engine.stats(state.ctx)
    if state.json:
        _emit(info)
        return
    table = Table("key", "value")
    for k, v in info.items():
        table.add_row(k, str(v))
    out.print(table)


def main() -> None:
    """Console-script entry point."""
    app()
