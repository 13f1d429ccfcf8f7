"""The metadata database's tables, in one SQLAlchemy ``MetaData`` (DESIGN.md §3): the ORM rows of the metadata
store (nodes, versions, relations, vector rows, the change feed, the write journal, meta, the schema version), of the
audit trail and hint index (:mod:`.audit`), of the memory event history (:mod:`.memory_events`) and of the API keys
(:mod:`.keys`), and the conversions between rows and records. Every module of this package that touches a table
imports it from here; nothing imports a private name of another module, and the schema (:mod:`.migrate`) is the one
``Base.metadata``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import DateTime, TypeDecorator

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import NodeRecord, VectorRecord
from context_engine.schema.uri import ContextURI

__all__ = [
    "API_KEYS",
    "CHANGES",
    "GENERATIONS",
    "HINT_CHANGES",
    "HINT_DOCS",
    "HINT_TERMS",
    "IN_BATCH",
    "JSON_VARIANT",
    "JOURNAL",
    "MEMORY_EVENTS",
    "META",
    "NODES",
    "RELATIONS",
    "RETRIEVED_DOCS",
    "TOOL_INVOCATIONS",
    "VECTORS",
    "VERSIONS",
    "ApiKeyRow",
    "Base",
    "HintChangeRow",
    "HintDocRow",
    "HintTermRow",
    "IndexChangeRow",
    "IndexGenerationRow",
    "MemoryEventRow",
    "MetaRow",
    "NodeRow",
    "NodeVersionRow",
    "RelationRow",
    "RetrievedDocRow",
    "SchemaVersionRow",
    "ToolInvocationRow",
    "UTCDateTime",
    "VectorRow",
    "WriteJournalRow",
    "chunks",
    "node_record",
    "node_values",
    "slash_forms",
    "stored_node_record",
    "table_of",
    "vector_record",
    "vector_values",
]

IN_BATCH = 500  # bound on IN-list sizes: SQLite limits bound parameters per statement
JSON_VARIANT = JSON().with_variant(JSONB(), "postgresql")  # JSONB on PostgreSQL


# ---- the metadata store's rows ----------------------------------------------------------------------------------
class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores no offset: values are normalised to UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    pass


class NodeRow(Base):
    """``nodes``: one row per node. ``uri_key`` is :attr:`ContextURI.key` (no trailing slash except roots)."""

    __tablename__ = "nodes"
    __table_args__ = (
        UniqueConstraint("account_id", "uri_key", name="uq_nodes_account_uri_key"),
        # a directory's children in URI order from the index alone (children_window; migration 0003)
        Index("ix_nodes_account_parent_key", "account_id", "parent_uri", "uri_key"),
        Index("ix_nodes_index_status", "index_status"),
        Index("ix_nodes_account_hash", "account_id", "content_hash"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(64))
    uri: Mapped[str] = mapped_column(String(1024))
    uri_key: Mapped[str] = mapped_column(String(1024))
    parent_uri: Mapped[str | None] = mapped_column(String(1024))
    owner_space: Mapped[str] = mapped_column(String(320))
    context_type: Mapped[str | None] = mapped_column(String(16))
    category: Mapped[str | None] = mapped_column(Text)
    is_dir: Mapped[bool] = mapped_column(Boolean)
    title: Mapped[str] = mapped_column(Text)
    has_overview: Mapped[bool] = mapped_column(Boolean)
    has_content: Mapped[bool] = mapped_column(Boolean)
    content_hash: Mapped[str | None] = mapped_column(String(128))
    index_status: Mapped[str] = mapped_column(String(16))
    source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    occurred_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # `metadata` is reserved by SQLAlchemy's declarative base: the attribute is meta_json, the column metadata_json
    meta_json: Mapped[dict[str, Any] | None] = mapped_column("metadata_json", JSON, nullable=True)
    version: Mapped[int] = mapped_column(Integer, default=1)


class NodeVersionRow(Base):
    """``node_versions``: the earlier versions of a memory (``update_memory``), newest ``version`` highest."""

    __tablename__ = "node_versions"
    __table_args__ = (UniqueConstraint("account_id", "uri_key", "version", name="uq_node_versions"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(64))
    uri_key: Mapped[str] = mapped_column(String(1024))
    version: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    replaced_at: Mapped[datetime] = mapped_column(UTCDateTime())


class RelationRow(Base):
    """``relations``: directed, typed, weighted edges; URIs stored as written (NFC), matched with or without '/'."""

    __tablename__ = "relations"
    __table_args__ = (
        UniqueConstraint("account_id", "from_uri", "to_uri", "relation_type", name="uq_relations_edge"),
        Index("ix_relations_account_to", "account_id", "to_uri"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(64))
    from_uri: Mapped[str] = mapped_column(String(1024))
    to_uri: Mapped[str] = mapped_column(String(1024))
    relation_type: Mapped[str] = mapped_column(String(128))
    weight: Mapped[float] = mapped_column(Float)


class VectorRow(Base):
    """``vectors``: the rows of the vector index kept for exact search and rebuilds; ``vector`` is little-endian f32."""

    __tablename__ = "vectors"
    __table_args__ = (Index("ix_vectors_account_uri", "account_id", "uri"),)

    id: Mapped[str] = mapped_column(String(1536), primary_key=True)
    account_id: Mapped[str] = mapped_column(String(64), index=True)
    uri: Mapped[str] = mapped_column(String(1024))
    parent_uri: Mapped[str | None] = mapped_column(String(1024))
    owner_space: Mapped[str] = mapped_column(String(320))
    context_type: Mapped[str] = mapped_column(String(16))
    category: Mapped[str] = mapped_column(Text)
    level: Mapped[int] = mapped_column(Integer)
    doc_id: Mapped[str] = mapped_column(Text)
    chunk_index: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    breadcrumb: Mapped[str] = mapped_column(Text)
    context: Mapped[str] = mapped_column(Text, default="")
    vector: Mapped[bytes] = mapped_column(LargeBinary)


class IndexGenerationRow(Base):
    """``index_generations``: the account generation of the derived indexes (:mod:`context_engine.storage.changes`).

    ``generation`` is bumped in the transaction of every vector write or delete of the account (a row lock on
    PostgreSQL, the write lock on SQLite: writers of one account commit in generation order). Changes at generations
    ``<= log_floor`` were pruned from ``index_changes``. ``token``: random, set by every bump (the one its change-log
    rows carry): a generation number names a state of the account only with its token, since a restored or
    failed-over database may reach the same number by another history (revision ``0005``; NULL for generations
    written before it). ``log_floor_token``: the token of the generation ``log_floor`` (whose log rows are gone).
    """

    __tablename__ = "index_generations"

    account_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger, default=0)
    log_floor: Mapped[int] = mapped_column(BigInteger, default=0)
    token: Mapped[str | None] = mapped_column(String(32))
    log_floor_token: Mapped[str | None] = mapped_column(String(32))


class IndexChangeRow(Base):
    """``index_changes``: the vector ids each account generation touched (written or deleted), each with the
    generation's ``token`` (``index_generations.token``; NULL for rows written before revision ``0005``)."""

    __tablename__ = "index_changes"
    __table_args__ = (Index("ix_index_changes_account_generation", "account_id", "generation"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(64))
    generation: Mapped[int] = mapped_column(BigInteger)
    vector_id: Mapped[str] = mapped_column(String(1536))
    token: Mapped[str | None] = mapped_column(String(32))


class WriteJournalRow(Base):
    """``write_journal``: one row per write in flight (:mod:`context_engine.storage.journal`); usually empty.

    ``payload`` is ``{"uris": [...], "sync_ids": [...]}``: the nodes the write replaces and the vector ids it touched.
    """

    __tablename__ = "write_journal"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(64))
    op: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)


class MetaRow(Base):
    """``meta``: small key/value settings (the index stamp)."""

    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class SchemaVersionRow(Base):
    """``schema_version``: exactly one row, ``id = 1``."""

    __tablename__ = "schema_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


def table_of(row: type[Base]) -> Table:
    """The Core table of a mapped class (SQLAlchemy types ``__table__`` as the wider ``FromClause``)."""
    table = row.__table__
    assert isinstance(table, Table)
    return table


VECTORS = table_of(VectorRow)
NODES = table_of(NodeRow)
RELATIONS = table_of(RelationRow)
META = table_of(MetaRow)
GENERATIONS = table_of(IndexGenerationRow)
CHANGES = table_of(IndexChangeRow)
VERSIONS = table_of(NodeVersionRow)
JOURNAL = table_of(WriteJournalRow)


# ---- the audit trail and the hint index (audit.py) --------------------------------------------------------
class ToolInvocationRow(Base):
    """``tool_invocations``: one row per tool call (seed 001 §7). ``seq`` orders rows with equal timestamps."""

    __tablename__ = "tool_invocations"
    __table_args__ = (
        UniqueConstraint("invocation_id", name="uq_tool_invocations_id"),
        Index("ix_tool_invocations_account_session", "account_id", "session_id", "created_at"),
        Index("ix_tool_invocations_account_time", "account_id", "created_at"),
        Index("ix_tool_invocations_account_tool", "account_id", "tool_name", "created_at"),
        Index("ix_tool_invocations_account_principal", "account_id", "principal", "created_at"),
    )

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    invocation_id: Mapped[str] = mapped_column(String(64))
    account_id: Mapped[str] = mapped_column(String(64))
    principal: Mapped[str] = mapped_column(String(700), default="")
    session_id: Mapped[str | None] = mapped_column(String(256))
    tool_name: Mapped[str] = mapped_column(String(64))
    request_id: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    caller: Mapped[dict[str, Any]] = mapped_column(JSON_VARIANT)
    input_params: Mapped[dict[str, Any]] = mapped_column(JSON_VARIANT)
    retrieval_layer: Mapped[str] = mapped_column(String(32))
    l0_match_count: Mapped[int] = mapped_column(Integer)
    l1_match_count: Mapped[int] = mapped_column(Integer)
    retrieval_details: Mapped[dict[str, Any]] = mapped_column(JSON_VARIANT)
    relevance_level: Mapped[str] = mapped_column(String(32))
    dedup_reason: Mapped[str | None] = mapped_column(Text)
    output_preview: Mapped[str] = mapped_column(Text)
    duration_ms: Mapped[float] = mapped_column(Float)
    success: Mapped[bool] = mapped_column(Boolean)
    error_code: Mapped[str | None] = mapped_column(String(16))
    error_message: Mapped[str | None] = mapped_column(Text)


class RetrievedDocRow(Base):
    """``retrieved_docs``: documents already returned in a principal's session; a row past ``expires_at`` counts as
    absent. Two principals using the same session id have two separate sessions."""

    __tablename__ = "retrieved_docs"
    __table_args__ = (
        UniqueConstraint("account_id", "principal", "session_id", "doc_key", name="uq_retrieved_docs_principal_key"),
        Index("ix_retrieved_docs_expires", "expires_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(64))
    principal: Mapped[str] = mapped_column(String(700))
    session_id: Mapped[str] = mapped_column(String(256))
    doc_key: Mapped[str] = mapped_column(String(1024))
    invocation_id: Mapped[str] = mapped_column(String(64))
    retrieved_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())


class HintDocRow(Base):
    """``knowledge_hint_docs``: one row per indexed document (title, domain, title words for weak matching)."""

    __tablename__ = "knowledge_hint_docs"
    __table_args__ = (UniqueConstraint("account_id", "uri", name="uq_knowledge_hint_docs_uri"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(64))
    uri: Mapped[str] = mapped_column(String(1024))
    parent_uri: Mapped[str | None] = mapped_column(String(1024))
    owner_space: Mapped[str] = mapped_column(String(320))
    context_type: Mapped[str] = mapped_column(String(16))
    title: Mapped[str] = mapped_column(Text)
    domain: Mapped[str | None] = mapped_column(String(128))
    title_words: Mapped[list[str]] = mapped_column(JSON_VARIANT)


class HintTermRow(Base):
    """``knowledge_hint_terms``: ``(document, normalised term, kind)``; kinds are listed in ``knowledge.hint_index``."""

    __tablename__ = "knowledge_hint_terms"
    __table_args__ = (Index("ix_knowledge_hint_terms_account_uri", "account_id", "uri"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(64))
    uri: Mapped[str] = mapped_column(String(1024))
    term: Mapped[str] = mapped_column(String(512))
    kind: Mapped[str] = mapped_column(String(32))


class HintChangeRow(Base):
    """``knowledge_hint_changes``: the hint index's change log (issue 26). One row per document a change of the
    account's hint generation replaced or dropped, at the generation it committed, with the term rows the document
    had before it (``removed_terms``: ``[[term, kind], ...]``): a process whose compiled index is at an older
    generation applies the changes since instead of reloading the account. ``uri`` NULL: the whole account was
    replaced (a rebuild); a process behind it reloads. ``token``: random, one per change: a generation number names
    a state of the account only with its token, since a restored or failed-over database may reach the same number
    by another history. Old rows are pruned (``audit.HINT_LOG_RETAIN``)."""

    __tablename__ = "knowledge_hint_changes"
    __table_args__ = (Index("ix_knowledge_hint_changes_account_generation", "account_id", "generation"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(64))
    generation: Mapped[int] = mapped_column(BigInteger)
    uri: Mapped[str | None] = mapped_column(String(1024))
    removed_terms: Mapped[list[list[str]] | None] = mapped_column(JSON_VARIANT)
    token: Mapped[str] = mapped_column(String(32))


# ---- the memory event history (memory_events.py) -------------------------------------------------------------
class MemoryEventRow(Base):
    """``memory_events``: one row per change of a memory (issue 29): ``ADD``, ``UPDATE`` or ``DELETE``, written in
    the transaction of the write that made it (a failed write leaves none). ``seq`` orders them (commit order: the
    writes of a home hold one write lock). The abstracts are the memory's L0 as stored (redacted at write time);
    ``*_before`` are empty for an ``ADD``, ``*_after`` for a ``DELETE``."""

    __tablename__ = "memory_events"
    __table_args__ = (
        Index("ix_memory_events_account_space", "account_id", "owner_space", "seq"),
        Index("ix_memory_events_account_uri", "account_id", "uri_key", "seq"),
    )

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(64))
    owner_space: Mapped[str] = mapped_column(String(320))
    uri: Mapped[str] = mapped_column(String(1024))
    uri_key: Mapped[str] = mapped_column(String(1024))
    event: Mapped[str] = mapped_column(String(8))
    category: Mapped[str | None] = mapped_column(Text, nullable=True)
    version_before: Mapped[int | None] = mapped_column(Integer, nullable=True)
    version_after: Mapped[int | None] = mapped_column(Integer, nullable=True)
    abstract_before: Mapped[str | None] = mapped_column(Text, nullable=True)
    abstract_after: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


# ---- API keys (keys.py) ---------------------------------------------------------------------------------------
class ApiKeyRow(Base):
    """``api_keys``: one row per key; ``secret_hash`` is the hex SHA-256 of the whole token."""

    __tablename__ = "api_keys"
    __table_args__ = (Index("ix_api_keys_account", "account_id"),)

    key_id: Mapped[str] = mapped_column(String(16), primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    account_id: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(16))
    user_space: Mapped[str | None] = mapped_column(String(320))
    agent_space: Mapped[str | None] = mapped_column(String(320))
    secret_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


TOOL_INVOCATIONS = table_of(ToolInvocationRow)
RETRIEVED_DOCS = table_of(RetrievedDocRow)
HINT_DOCS = table_of(HintDocRow)
HINT_TERMS = table_of(HintTermRow)
HINT_CHANGES = table_of(HintChangeRow)
API_KEYS = table_of(ApiKeyRow)
MEMORY_EVENTS = table_of(MemoryEventRow)


# ---- rows and records ---------------------------------------------------------------------------------------------
def chunks(items: Sequence[str], size: int = IN_BATCH) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def node_values(node: NodeRecord) -> dict[str, Any]:
    parsed = ContextURI.parse(node.uri)
    canonical = parsed.as_dir() if node.is_dir else parsed.as_file()
    now = datetime.now(UTC)
    return {
        "account_id": node.account_id,
        "uri": str(canonical),
        "uri_key": canonical.key,
        "parent_uri": None if node.parent_uri is None else str(ContextURI.parse(node.parent_uri).as_dir()),
        "owner_space": node.owner_space,
        "context_type": node.context_type,
        "category": node.category,
        "is_dir": node.is_dir,
        "title": node.title,
        "has_overview": node.has_overview,
        "has_content": node.has_content,
        "content_hash": node.content_hash,
        "index_status": node.index_status,
        "source": node.source,
        "created_at": node.created_at or now,
        "updated_at": node.updated_at or now,
        "occurred_at": node.occurred_at,
        "meta_json": node.metadata or None,
        "version": node.version,
    }


def node_record(row: Any) -> NodeRecord:
    """A :class:`NodeRecord` from a ``NodeRow`` or a Core row of ``nodes`` (whose JSON column is ``metadata_json``)."""
    return NodeRecord(
        account_id=row.account_id,
        uri=row.uri,
        parent_uri=row.parent_uri,
        owner_space=row.owner_space,
        context_type=row.context_type,  # type: ignore[arg-type]  # validated by NodeRecord
        category=row.category,
        is_dir=row.is_dir,
        title=row.title,
        has_overview=row.has_overview,
        has_content=row.has_content,
        content_hash=row.content_hash,
        index_status=row.index_status,  # type: ignore[arg-type]
        source=row.source,
        created_at=row.created_at,
        updated_at=row.updated_at,
        occurred_at=row.occurred_at,
        metadata=(row.meta_json if isinstance(row, NodeRow) else row.metadata_json) or None,
        version=row.version or 1,
    )


def stored_node_record(row: Any) -> NodeRecord:
    """:func:`node_record` of a Core row of ``nodes`` without pydantic validation: the row was validated when it
    was written and its column types give exactly the field types (``UTCDateTime``, ``Boolean``, ``JSON``), so the
    record is equal to the validated one. For the per-request hydration of search hits (``get_nodes``), where
    validation cost ~13 us a node."""
    return NodeRecord.model_construct(
        account_id=row.account_id,
        uri=row.uri,
        parent_uri=row.parent_uri,
        owner_space=row.owner_space,
        context_type=row.context_type,
        category=row.category,
        is_dir=row.is_dir,
        title=row.title,
        has_overview=row.has_overview,
        has_content=row.has_content,
        content_hash=row.content_hash,
        index_status=row.index_status,
        source=row.source,
        created_at=row.created_at,
        updated_at=row.updated_at,
        occurred_at=row.occurred_at,
        metadata=row.metadata_json or None,
        version=row.version or 1,
    )


def vector_values(record: VectorRecord) -> dict[str, Any]:
    vec = np.ascontiguousarray(record.vector, dtype="<f4")
    if vec.ndim != 1 or vec.size == 0 or not np.isfinite(vec).all():
        raise ContextEngineError(
            ErrorCode.REQUEST_INVALID,
            f"vector of record {record.id!r} must be a finite, non-empty 1-D array",
            {"id": record.id, "shape": list(vec.shape)},
        )
    values = record.model_dump(exclude={"vector"})
    values["vector"] = vec.tobytes()
    return values


def vector_record(row: Any) -> VectorRecord:
    values = dict(row)
    values["vector"] = np.frombuffer(values["vector"], dtype="<f4").astype(np.float32)
    return VectorRecord(**values)


def slash_forms(key: str) -> list[str]:
    """Both spellings of a node's URI: ``key`` and ``key/`` (roots already end with '/')."""
    return [key] if key.endswith("/") else [key, key + "/"]
