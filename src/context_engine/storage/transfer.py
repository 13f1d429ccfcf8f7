"""Copy an embedded home into other stores: ``context-engine migrate-home SOURCE`` (issue 13, docs/deployment.md).

The source is a home of the embedded default (``SOURCE/metadata.db`` on SQLite, ``SOURCE/content/`` on the local
file system); the target is whatever the settings select (``metadata.url``, ``content.url``), normally PostgreSQL and
S3. The copy is at the store level, table by table and node by node, so it keeps everything as it was: node ids and
timestamps, versions, relations, the stored vectors, the per-account generations, the audit trail, the session
ledger and the API keys (their hashes). The vector index of the target is then rebuilt from the copied vector rows
by the caller (``reindex --full`` of each account), as after any restore.

Order: content first, then the metadata in one transaction, so metadata never points at an object that does not
exist (the write protocol's put-then-commit, docs/security.md). A failure before the metadata commit leaves the
target's database as it was; content objects copied by then are orphans that ``reindex --gc`` removes, and the
command can be run again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Integer, delete, func, insert, select, text

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import Level

if TYPE_CHECKING:
    from sqlalchemy import Table
    from sqlalchemy.engine import Connection

    from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
    from context_engine.storage.protocols import ContentStore

__all__ = ["TransferReport", "check_transfer", "copy_content", "copy_metadata"]

_SKIPPED = frozenset({"schema_version"})  # written by the target's own migration
_REPLACED = frozenset({"meta"})  # the model stamp: the target's (written when it was opened) gives way to the source's
_BATCH = 2000


@dataclass
class TransferReport:
    """What :func:`copy_content` and :func:`copy_metadata` copied.

    Attributes:
        accounts: the accounts of the source, sorted.
        content_nodes: nodes whose levels were copied into the target content store.
        rows: rows copied per metadata table.
    """

    accounts: list[str] = field(default_factory=list)
    content_nodes: int = 0
    rows: dict[str, int] = field(default_factory=dict)


def _tables() -> list[Table]:
    from context_engine.storage.metadata.migrate import target_metadata

    return [t for t in target_metadata().sorted_tables if t.name not in _SKIPPED]


def check_transfer(source: SqlMetadataStore, target: SqlMetadataStore) -> None:
    """Refuse a copy that would lose or mix data.

    Raises:
        ContextEngineError: ``CFG-4001`` when the source has unfinished writes (run ``reindex`` on it first) or no
            model stamp (never written), or when a table of the target already holds rows (copy into empty stores
            only, never merge two homes).
    """
    if source.journal_entries():
        raise ContextEngineError(
            ErrorCode.CONFIG_INVALID,
            "the source home has interrupted writes; run `context-engine --home SOURCE reindex` first",
        )
    if source.get_meta("embedding_model") is None and not source.accounts():
        raise ContextEngineError(ErrorCode.CONFIG_INVALID, "the source home is empty: nothing to migrate")
    busy = []
    with target.engine.connect() as conn:
        for table in _tables():
            if table.name not in _REPLACED and conn.execute(select(func.count()).select_from(table)).scalar():
                busy.append(table.name)
    if busy:
        raise ContextEngineError(
            ErrorCode.CONFIG_INVALID,
            f"the target stores are not empty (tables {', '.join(busy)}); migrate-home copies into empty stores only",
            {"tables": busy},
        )


def copy_content(
    source: ContentStore, target: ContentStore, accounts: list[str], progress: Callable[[int], None] | None = None
) -> int:
    """Copy every level of every node of ``accounts``; returns the number of nodes copied.

    Raises:
        ContextEngineError: ``WRT-5001`` (retryable) when a store fails; what was copied stays (orphans until the
            metadata is copied; ``reindex --gc`` removes them).
    """
    copied = 0
    for account in accounts:
        for uri in source.node_uris(account):
            levels = {level: source.read_level(account, uri, level) for level in Level}
            present: dict[Level, str | None] = {level: value for level, value in levels.items() if value is not None}
            if present:
                target.write_levels(account, uri, present)
                copied += 1
                if progress:
                    progress(1)
    return copied


def copy_metadata(
    source: SqlMetadataStore, target: SqlMetadataStore, progress: Callable[[int], None] | None = None
) -> dict[str, int]:
    """Copy every table of the metadata database (parents before children) in one transaction of the target; on
    PostgreSQL, move each integer key's sequence past the copied ids. Returns rows copied per table.

    Raises:
        ContextEngineError: ``WRT-5001`` (retryable) when a database fails; the target then holds none of the rows.
    """
    from sqlalchemy.exc import SQLAlchemyError

    counts: dict[str, int] = {}
    try:
        with target.engine.begin() as out, source.engine.connect() as inp:
            for table in _tables():
                if table.name in _REPLACED:
                    out.execute(delete(table))
                n = 0
                result = inp.execution_options(stream_results=True).execute(select(table))
                for part in result.partitions(_BATCH):
                    out.execute(insert(table), [dict(row._mapping) for row in part])
                    n += len(part)
                    if progress:
                        progress(len(part))
                counts[table.name] = n
                if out.dialect.name == "postgresql":
                    _advance_sequences(out, table)
    except SQLAlchemyError as err:
        raise ContextEngineError(
            ErrorCode.STORAGE_FAILED,
            f"copying the metadata failed, nothing of it was committed: {type(err).__name__}",
            {"error": type(err).__name__},
            retryable=True,
        ) from err
    return counts


def _advance_sequences(conn: Connection, table: Table) -> None:
    """Rows copied with explicit ids leave a PostgreSQL serial's sequence behind them: the next insert would collide."""
    for column in table.primary_key.columns:
        if isinstance(column.type, Integer) and column.autoincrement in (True, "auto"):
            conn.execute(
                text(
                    "SELECT setval(pg_get_serial_sequence(:t, :c), COALESCE(MAX(" + column.name + "), 0) + 1, false) "
                    "FROM " + table.name
                ),
                {"t": table.name, "c": column.name},
            )
