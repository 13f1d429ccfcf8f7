"""Store commands: init, add, add-memory, add-skill, ls, tree, rm, mv, reindex, migrate, stats (DESIGN §10).

``search`` and ``read`` live in ``memory_commands.py`` (search_memory / read_memory); the memory lifecycle
(``add-messages``, ``memories``, ``get-memory``, ``update-memory``, ``delete-memory``) in ``memories_commands.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.cli.common import (
    app,
    emit,
    fail,
    open_engine,
    out,
    print_report,
    progress_bar,
    short_uri,
    shown,
    state,
    stored_text,
)
from context_engine.interfaces.cli.memories_commands import (
    DedupPolicyOption,
    json_object_option,
    timestamp_option,
)

if TYPE_CHECKING:
    from context_engine.settings import Settings
    from context_engine.storage.protocols import Embedder, MetadataStore


@app.command()
def init() -> None:
    """Create the data directory and its stores (idempotent)."""
    with open_engine() as engine:
        info = engine.stats(state.ctx)
    if state.json:
        emit(info)
    else:
        out.print(
            f"initialised [bold]{info['home']}[/] (model {info['embedding_model']}, index {info['index_backend']})"
        )


@app.command()
def add(
    path: Annotated[Path, typer.Argument(help="A file or a directory of .md/.markdown/.txt files.")],
    uri: Annotated[str, typer.Argument(help="Target URI under ctx://resources/ (a directory ends with '/').")] = (
        "ctx://resources/"
    ),
    strict: Annotated[bool, typer.Option(help="Fail on the first bad file instead of skipping it.")] = False,
) -> None:
    """Add resources: parse, chunk, summarise (L0/L1), embed and index them."""
    with open_engine() as engine, progress_bar() as tick:
        report = engine.add_resource(path, uri, state.ctx, strict=strict, progress=tick)
    print_report(report, "added")
    if report.failed and not report.nodes and not report.unchanged:
        raise typer.Exit(ErrorCode.CONTENT_INVALID.exit_code)


@app.command("add-memory")
def add_memory(
    text: Annotated[str, typer.Argument(help="The memory text.")],
    uri: Annotated[str | None, typer.Option(help="Explicit URI under ctx://user/<space>/memories/.")] = None,
    category: Annotated[str | None, typer.Option(help="Category, e.g. preference, profile, event.")] = None,
    metadata: Annotated[
        str | None, typer.Option("--metadata", help='A JSON object kept with the memory, e.g. \'{"source": "chat"}\'.')
    ] = None,
    occurred_at: Annotated[
        str | None,
        typer.Option("--occurred-at", help="When it happened: ISO 8601 (2023-05-08T13:56:00Z) or Unix seconds."),
    ] = None,
    policy: Annotated[
        DedupPolicyOption | None,
        typer.Option("--policy", help="Near-duplicate of a stored memory: skip (default), keep or replace."),
    ] = None,
) -> None:
    """Store a memory in the caller's user space (the same text is the same memory; near-duplicates per --policy)."""
    md = json_object_option(metadata, "--metadata")
    with open_engine() as engine:
        report = engine.add_memory(
            text,
            state.ctx,
            uri=uri,
            category=category,
            metadata=md,
            occurred_at=timestamp_option(occurred_at),
            policy=policy.value if policy else None,
        )
    where = escape(report.uris[0]) if report.uris else ""
    if report.duplicates:
        what = f"memory not added, a near-duplicate of {where} (--policy keep or replace to store it)"
    elif report.nodes:
        what = f"memory added at {where}"
    else:
        what = f"memory unchanged at {where}" if where else "memory unchanged"
    print_report(report, what)


@app.command("add-skill")
def add_skill(
    name: Annotated[str, typer.Argument(help="Skill name (a URI segment).")],
    description: Annotated[str, typer.Option("--description", "-d", help="One-line description (the L0).")],
    content: Annotated[str | None, typer.Option("--content", help="The skill body (markdown).")] = None,
    file: Annotated[Path | None, typer.Option("--file", help="Read the body from a file.")] = None,
    category: Annotated[str | None, typer.Option(help="Tool family.")] = None,
) -> None:
    """Store a skill in the caller's agent space."""
    if (content is None) == (file is None):
        fail(
            ContextEngineError(ErrorCode.REQUEST_INVALID, "give the skill body with exactly one of --content or --file")
        )
    try:
        body = file.read_text(encoding="utf-8") if file else (content or "")
    except (OSError, UnicodeDecodeError) as err:
        fail(ContextEngineError(ErrorCode.PATH_NOT_FOUND, f"cannot read {file}: {err}"))
    with open_engine() as engine:
        report = engine.add_skill(name, description, body, state.ctx, category=category)
    print_report(report, "skill added" + (f" at {report.uris[0]}" if report.uris else " (unchanged)"))


@app.command()
def ls(
    uri: Annotated[
        str, typer.Argument(help="A directory URI; ctx://user/ or ctx://agent/ lists the spaces you see.")
    ] = "ctx://resources/",
) -> None:
    """List a directory's children with their L0 abstracts (long URIs shortened in the middle; whole in --json)."""
    with open_engine() as engine:
        nodes = engine.ls(uri, state.ctx)
    if state.json:
        emit([n.model_dump(exclude={"children"}) for n in nodes])
        return
    table = Table(show_lines=False)
    table.add_column("uri", no_wrap=True)
    table.add_column("type", no_wrap=True)
    table.add_column("abstract")
    width = min(max((len(n.uri) for n in nodes), default=3), out.width * 9 // 20)  # the abstract keeps the rest
    for n in nodes:
        table.add_row(Text(short_uri(n.uri, width)), "dir" if n.is_dir else "file", stored_text(n.abstract))
    out.print(table)


@app.command()
def tree(
    uri: Annotated[
        str, typer.Argument(help="Root of the tree (ctx://user/ or ctx://agent/: every space you see).")
    ] = "ctx://resources/",
    depth: Annotated[int, typer.Option(min=0, max=20, help="Levels to show.")] = 3,
    files: Annotated[bool, typer.Option(help="Show files, not only directories.")] = False,
) -> None:
    """Show the directory tree with each node's L0."""
    with open_engine() as engine:
        root = engine.tree(uri, state.ctx, max_depth=depth)
    if state.json:
        emit(root.model_dump() if root else None)
        return
    if root is None:
        out.print(f"{uri} is empty", markup=False, highlight=False)
        return

    def label(n: Any) -> Text:
        return Text.assemble((n.uri, "bold"), "  ", (shown(n.abstract), "dim"))  # user text: never markup

    t = Tree(label(root))

    def walk(node: Any, branch: Tree) -> None:
        for c in node.children or []:
            if c.is_dir or files:
                walk(c, branch.add(label(c)))

    walk(root, t)
    out.print(t)


@app.command()
def rm(
    uri: Annotated[str, typer.Argument(help="Node to delete.")],
    recursive: Annotated[bool, typer.Option("--recursive", "-r", help="Delete a directory and its subtree.")] = False,
) -> None:
    """Delete a node."""
    with open_engine() as engine:
        report = engine.delete(uri, state.ctx, recursive=recursive)
    print_report(report, "deleted")


@app.command()
def mv(src: Annotated[str, typer.Argument()], dst: Annotated[str, typer.Argument()]) -> None:
    """Move or rename a node and its subtree; a DST ending in / (an existing directory or a new one) receives the node
    under its own name."""
    with open_engine() as engine:
        report = engine.move(src, dst, state.ctx)
    print_report(report, "moved")


@app.command()
def reindex(
    full: Annotated[bool, typer.Option(help="Rebuild every vector, not only pending nodes.")] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Only report what interrupted writes left (the write journal).")
    ] = False,
    repair: Annotated[bool, typer.Option("--repair", help="With --check: also repair what it finds.")] = False,
    gc: Annotated[
        bool,
        typer.Option("--gc", help="Only remove content and vector-index rows that no node owns (every account)."),
    ] = False,
) -> None:
    """Finish or undo interrupted writes, then push pending (or all) vectors from the metadata store into the index.

    ``--check`` reads the write journal only (O(leftovers)) and exits 1 when it finds leftovers it did not repair.
    ``--gc`` lists the whole content store and vector index (O(store)) and removes what no node owns.
    """
    if repair and not check:
        fail(ContextEngineError(ErrorCode.REQUEST_INVALID, "--repair goes with --check (plain reindex repairs too)"))
    if gc and (check or full):
        fail(ContextEngineError(ErrorCode.REQUEST_INVALID, "--gc runs alone (--full also collects garbage)"))
    if gc:
        with open_engine() as engine:
            swept = engine.collect_garbage(state.ctx)
        if state.json:
            emit({"accounts": swept.accounts, "content_nodes": swept.content_nodes, "vector_rows": swept.vector_rows})
        else:
            out.print(
                f"garbage: removed the content of {swept.content_nodes} nodes and {swept.vector_rows} vector-index "
                f"rows that no node owns ({swept.accounts} accounts swept)"
            )
        return
    if check:
        with open_engine(recover=False) as engine:
            found = engine.check_writes(state.ctx, repair=repair)
        info = {
            "rolled_back": found.rolled_back,
            "finished": found.finished,
            "in_flight": found.in_flight,
            "orphan_records": found.orphan_records,
            "vectors_synced": found.vectors_synced,
            "repaired": found.repaired,
            "leftovers": found.leftovers,
        }
        if state.json:
            emit(info)
        else:
            verb = "repaired" if repair else "found"
            out.print(
                f"write journal: {verb} {found.leftovers} leftovers ({len(found.rolled_back)} to roll back, "
                f"{len(found.finished)} to finish, {len(found.orphan_records)} orphan undo records); "
                f"{len(found.in_flight)} writes in flight"
            )
        if found.leftovers and not repair:
            raise typer.Exit(1)
        return
    with open_engine() as engine, progress_bar() as tick:
        report = engine.reindex(state.ctx, full=full, progress=tick)
    print_report(report, "reindexed")


@app.command()
def migrate(
    check: Annotated[
        bool, typer.Option("--check", help="Only report the database's revision and the newest; change nothing.")
    ] = False,
) -> None:
    """Upgrade the metadata database (``metadata.url``, default ``<home>/metadata.db``) to this release's schema.

    Prints the current and the newest (head) revision. Engines upgrade their database when they open it, so this is
    for doing it ahead of a rollout, or checking. ``--check`` exits 1 when an upgrade is pending. A database migrated
    by a newer release is refused (``CFG-4001``: upgrade context-engine).
    """
    from context_engine.settings import load_settings
    from context_engine.storage.factory import open_metadata

    try:
        settings = load_settings(state.home) if state.home else load_settings()
        if check and not settings.metadata.url and not (settings.home_path / "metadata.db").exists():
            # nothing to open: a check must not create the home's database file
            _print_migration({"database": str(settings.home_path / "metadata.db"), "current": None}, False)
            raise typer.Exit(1)
        store = open_metadata(settings, upgrade=False)
    except ContextEngineError as e:
        fail(e)
    try:
        before = after = store.schema_status()
        if not check and not before.current:
            before, after = store.upgrade_schema()
        info = {
            "database": store.url,
            "current": after.revision,
            "head": after.head,
            "up_to_date": after.current,
            "upgraded_from": None if check or before.current else (before.revision or "none"),
        }
    except ContextEngineError as e:
        fail(e)
    finally:
        store.close()
    _print_migration(info, after.current)
    if check and not after.current:
        raise typer.Exit(1)


@app.command("migrate-home")
def migrate_home(
    source: Annotated[Path, typer.Argument(help="An embedded home to copy from (its metadata.db and content/).")],
) -> None:
    """Copy an embedded home into the stores configured for --home (metadata.url, content.url, vector.backend).

    Everything is kept (nodes, versions, vectors, audit, session ledger, API keys); the vector index of the target is
    then built from the copied vectors. The source is only read and must be at this release's schema (run `migrate`
    on it first); the target stores must be empty. Content is copied first, then the metadata in one transaction:
    after a failure, run it again (`reindex --gc` removes content objects a failed run left). docs/deployment.md.
    """
    import uuid

    from context_engine.engine_factory import build_engine
    from context_engine.providers.embedder import build_embedder
    from context_engine.schema.context import RequestContext
    from context_engine.settings import load_settings
    from context_engine.storage import transfer
    from context_engine.storage.content.local import LocalContentStore
    from context_engine.storage.factory import open_content, open_metadata
    from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore

    home = source.expanduser().resolve()
    if not (home / "metadata.db").is_file():
        fail(ContextEngineError(ErrorCode.CONFIG_INVALID, f"{home} has no metadata.db: not an embedded home"))
    src_meta = dst_meta = None
    try:
        settings = load_settings(state.home) if state.home else load_settings()
        if not settings.metadata.url and settings.home_path == home:
            raise ContextEngineError(ErrorCode.CONFIG_INVALID, "the source is the target home: set metadata.url")
        src_meta = SqlMetadataStore.sqlite(home / "metadata.db", upgrade=False)
        if not src_meta.schema_status().current:
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID, f"upgrade the source first: `context-engine --home {home} migrate`"
            )
        dst_meta = open_metadata(settings)
        transfer.check_transfer(src_meta, dst_meta)
        embedder = build_embedder(settings.embedding, home=settings.home_path)
        _check_vector_target(settings, src_meta, dst_meta, embedder)
        src_content = LocalContentStore(home / "content")
        accounts = sorted(set(src_meta.accounts()) | set(src_content.account_ids()))
        nodes = sum(src_meta.count_nodes(a)["nodes"] for a in accounts)
        with progress_bar() as tick:
            content_step, metadata_step = _copy_steps(tick, nodes)
            report = transfer.TransferReport(accounts=accounts)
            dst_content = open_content(settings)
            if dst_content.account_ids():
                raise ContextEngineError(
                    ErrorCode.CONFIG_INVALID,
                    "the target content store (content.url) is not empty; migrate-home copies into empty stores only",
                )
            report.content_nodes = transfer.copy_content(src_content, dst_content, accounts, content_step)
            report.rows = transfer.copy_metadata(src_meta, dst_meta, metadata_step)
            # the copied database's identity now owns the target content (docs/deployment.md, "Scale-out")
            dst_content.write_stamp(dst_meta.ensure_meta("store_id", uuid.uuid4().hex))
            dst_meta.close()
            dst_meta = None
            vectors = 0
            with build_engine(settings, embedder=embedder) as engine:
                for account in accounts:
                    ctx = RequestContext(account_id=account, role="admin")
                    vectors += engine.reindex(ctx, full=True, progress=tick).vectors
    except ContextEngineError as e:
        fail(e)
    finally:
        for store in (src_meta, dst_meta):
            if store is not None:
                store.close()
    info = {
        "source": str(home),
        "accounts": report.accounts,
        "content_nodes": report.content_nodes,
        "rows": report.rows,
        "vectors_indexed": vectors,
    }
    if state.json:
        emit(info)
        return
    rows = sum(report.rows.values())
    out.print(
        f"migrated {len(accounts)} accounts from {escape(str(home))}: {report.content_nodes} nodes' content, "
        f"{rows} metadata rows, {vectors} vectors indexed"
    )


def _copy_steps(tick: Any, nodes: int) -> tuple[Callable[[int], None], Callable[[int], None]]:
    """migrate-home's progress callbacks: content nodes copied (of ``nodes``), metadata rows copied."""
    done = [0, 0]

    def content_step(n: int) -> None:
        done[0] += n
        if tick:
            tick("content", done[0], nodes)

    def metadata_step(n: int) -> None:
        done[1] += n
        if tick:
            tick("metadata rows", done[1], done[1])

    return content_step, metadata_step


def _check_vector_target(
    settings: Settings, src_meta: MetadataStore, dst_meta: MetadataStore, embedder: Embedder
) -> None:
    """migrate-home's vector checks: the source was indexed with the target's model (``IDX-4091``), and the target
    vector store is not a deployment's already (``CFG-4001``)."""
    from context_engine.storage.factory import open_vector_index

    stamp = src_meta.get_meta("embedding_model")
    if stamp is not None and stamp != embedder.model_name:
        raise ContextEngineError(
            ErrorCode.INDEX_MODEL_MISMATCH,
            f"the source was indexed with {stamp} but the target is configured with {embedder.model_name}",
        )
    index = open_vector_index(settings, dst_meta, embedder.dim, model_name=embedder.model_name)
    try:  # a shared vector store (Milvus) already stamped by a deployment is not empty (a home's own reads None)
        if index.read_stamp() is not None:
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                "the target vector collection (vector.milvus.collection_prefix) belongs to a deployment already; "
                "migrate-home copies into empty stores only",
            )
    finally:
        index.close()


def _print_migration(info: dict[str, Any], current: bool) -> None:
    from context_engine.storage.metadata.migrate import HEAD

    info = {
        "database": info["database"],
        "current": info["current"],
        "head": HEAD,
        "up_to_date": current,
        "upgraded_from": info.get("upgraded_from"),
    }
    if state.json:
        emit(info)
        return
    found = info["current"] or "none (empty, or written before migrations)"
    verb = "up to date" if current else "an upgrade is pending"
    if info["upgraded_from"] is not None:
        verb = f"upgraded from {info['upgraded_from']}"
    out.print(f"metadata database {escape(info['database'])}: revision {found}, head {HEAD}: {verb}")


@app.command()
def stats() -> None:
    """Counts of nodes, files, directories, pending nodes and index records."""
    with open_engine() as engine:
        info = engine.stats(state.ctx)
    if state.json:
        emit(info)
        return
    table = Table("key", "value")
    for k, v in info.items():
        table.add_row(k, str(v))
    out.print(table)
