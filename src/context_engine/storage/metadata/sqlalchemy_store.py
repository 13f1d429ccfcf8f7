"""The metadata store on SQLAlchemy 2: SQLite (WAL) embedded, PostgreSQL by URL (DESIGN.md §3, §13; issue 13).

Everything here is portable SQL on one code path; what differs between the two databases is in :mod:`.dialects`
(engine options, SQLite's explicit ``BEGIN`` / ``BEGIN IMMEDIATE``, snapshot isolation, ``ON CONFLICT``, advisory
locks) and :mod:`.writer_locks` (writer liveness). The schema is created and upgraded by Alembic (:mod:`.migrate`).

Ordering is done in Python (code-point order of ``str``), never by ``ORDER BY`` on text, because a PostgreSQL
database with a locale collation sorts differently from SQLite; results are therefore identical on both.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

import numpy as np
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Engine,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    and_,
    text,
    bindparam,
    create_engine,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.types import DateTime, TypeDecorator

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import IndexStatus, NodeRecord, Relation, VectorRecord
from context_engine.schema.uri import ContextURI
from context_engine.storage.changes import IndexDelta, VectorMatrix
from context_engine.storage.journal import JournalEntry
from context_engine.storage.metadata import dialects, migrate
from context_engine.storage.metadata.dialects import WRITE_OPTION as _WRITE_OPTION
from context_engine.storage.metadata.migrate import SCHEMA_VERSION, SchemaStatus

__all__ = ["SCHEMA_VERSION", "SqlMetadataStore"]

LOG_RETAIN = 20_000
"""Account generations the change log keeps; a reader further behind reloads the account wholesale."""
_PRUNE_EVERY = 1_000  # prune the log of an account every this many generations

_IN_BATCH = 500  # bound on IN-list sizes: SQLite limits bound parameters per statement
_STATUSES = frozenset(get_args(IndexStatus))
_SPACE_SCOPE_ROOTS = frozenset({"ctx://user/", "ctx://agent/"})


# ---- ORM models ---------------------------------------------------------------------------------------------------
class _UTCDateTime(TypeDecorator[datetime]):
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


class _Base(DeclarativeBase):
    pass


class NodeRow(_Base):
    """``nodes``: one row per node. ``uri_key`` is :attr:`ContextURI.key` (no trailing slash except roots)."""

    __tablename__ = "nodes"
    __table_args__ = (
        UniqueConstraint("account_id", "uri_key", name="uq_nodes_account_uri_key"),
        Index("ix_nodes_account_parent", "account_id", "parent_uri"),
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
    created_at: Mapped[datetime] = mapped_column(_UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(_UTCDateTime())
    occurred_at: Mapped[datetime | None] = mapped_column(_UTCDateTime(), nullable=True)
    # `metadata` is reserved by SQLAlchemy's declarative base: the attribute and column are named meta_json/metadata_json
    meta_json: Mapped[dict[str, Any] | None] = mapped_column("metadata_json", JSON, nullable=True)
    version: Mapped[int] = mapped_column(Integer, default=1)


class NodeVersionRow(_Base):
    """``node_versions``: the earlier versions of a memory (``update_memory``), newest ``version`` highest."""

    __tablename__ = "node_versions"
    __table_args__ = (UniqueConstraint("account_id", "uri_key", "version", name="uq_node_versions"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(64))
    uri_key: Mapped[str] = mapped_column(String(1024))
    version: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(_UTCDateTime())
    replaced_at: Mapped[datetime] = mapped_column(_UTCDateTime())


class RelationRow(_Base):
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


class VectorRow(_Base):
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


class IndexGenerationRow(_Base):
    """``index_generations``: the account generation of the derived indexes (:mod:`context_engine.storage.changes`).

    ``generation`` is bumped in the transaction of every vector write or delete of the account (a row lock on
    PostgreSQL, the write lock on SQLite: writers of one account commit in generation order). Changes at generations
    ``<= log_floor`` were pruned from ``index_changes``.
    """

    __tablename__ = "index_generations"

    account_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger, default=0)
    log_floor: Mapped[int] = mapped_column(BigInteger, default=0)


class IndexChangeRow(_Base):
    """``index_changes``: the vector ids each account generation touched (written or deleted)."""

    __tablename__ = "index_changes"
    __table_args__ = (Index("ix_index_changes_account_generation", "account_id", "generation"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(64))
    generation: Mapped[int] = mapped_column(BigInteger)
    vector_id: Mapped[str] = mapped_column(String(1536))


class WriteJournalRow(_Base):
    """``write_journal``: one row per write in flight (:mod:`context_engine.storage.journal`); usually empty.

    ``payload`` is ``{"uris": [...], "sync_ids": [...]}``: the nodes the write replaces and the vector ids it touched.
    """

    __tablename__ = "write_journal"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(64))
    op: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(_UTCDateTime())
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)


class MetaRow(_Base):
    """``meta``: small key/value settings (the index stamp)."""

    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class SchemaVersionRow(_Base):
    """``schema_version``: exactly one row, ``id = 1``."""

    __tablename__ = "schema_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


_VECTORS = VectorRow.__table__
_NODES = NodeRow.__table__
_META = MetaRow.__table__
_GENERATIONS = IndexGenerationRow.__table__
_CHANGES = IndexChangeRow.__table__
_VERSIONS = NodeVersionRow.__table__
_JOURNAL = WriteJournalRow.__table__
_WRITE_LOCK_KEY = "write_lock"  # the meta row every journaled write updates first (PostgreSQL: a row lock)

# Statements of the per-request reads, built once (building and cache-keying a statement costs as much as running
# it on SQLite). Lookups by vector id go by primary key alone (see changes_since); callers check the account.
_GET_NODES = select(_NODES).where(
    _NODES.c.account_id == bindparam("account_id"), _NODES.c.uri_key.in_(bindparam("keys", expanding=True))
)
_GET_GENERATION = select(_GENERATIONS.c.generation).where(_GENERATIONS.c.account_id == bindparam("account_id"))
_GET_VECTOR_TEXTS = select(
    _VECTORS.c.id, _VECTORS.c.account_id, _VECTORS.c.text, _VECTORS.c.breadcrumb, _VECTORS.c.context
).where(_VECTORS.c.id.in_(bindparam("ids", expanding=True)))


# ---- the store ----------------------------------------------------------------------------------------------------
class SqlMetadataStore:
    """:class:`~context_engine.storage.protocols.MetadataStore` over SQLAlchemy (DESIGN.md §3).

    Thread-safe: every call outside a transaction uses its own short session; :meth:`transaction` binds one session
    to the calling thread until it ends. Every method is scoped by ``account_id`` where the protocol says so.

    Other stores that keep their tables in this database (:mod:`.audit`, :mod:`.keys`) share its connection pool
    and transactions through :meth:`session` and :meth:`snapshot`.

    Args:
        url: a SQLAlchemy database URL, e.g. ``sqlite:////abs/path/metadata.db`` or
            ``postgresql+psycopg://user:pw@host:5432/db`` (``metadata.url``).
        pool_size: connections kept open (PostgreSQL; ``metadata.pool_size``).
        max_overflow: extra connections opened under load (PostgreSQL; ``metadata.max_overflow``).
        connect_timeout_s: timeout of one connection attempt (PostgreSQL; ``metadata.connect_timeout_s``).
        statement_timeout_s: PostgreSQL's statement and idle-in-transaction timeouts (``metadata.statement_timeout_s``;
            0: none).
        upgrade: bring the schema to the newest revision (:mod:`.migrate`; a new database is created). ``False``
            opens the database as it is (``context-engine migrate --check``): a database behind this release is
            then not usable until :meth:`upgrade_schema`.
        on_failure: called with the operation name each time the database fails mid-request (metrics:
            ``ce_storage_failures_total{store="metadata"}``).
        busy_timeout_s: SQLite: how long a writer waits for the database's write lock (``ingest.write_wait_s``);
            past it a call fails with the retryable ``WRT-5032``.

    Raises:
        ContextEngineError: ``CFG-4001`` for an unusable URL, a database that cannot be reached (naming
            ``metadata.url`` and the address, never the password) or one migrated by a newer release;
            ``WRT-5001`` (retryable) when the database fails while its schema is read or upgraded.
    """

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 5,
        max_overflow: int = 10,
        connect_timeout_s: float = 5.0,
        statement_timeout_s: float = 0.0,
        upgrade: bool = True,
        on_failure: Callable[[str], None] | None = None,
        busy_timeout_s: float = dialects.SQLITE_BUSY_TIMEOUT_S,
    ) -> None:
        parsed: URL | None = None
        try:
            parsed = make_url(url)
            backend = parsed.get_backend_name()
            options = dialects.engine_options(
                parsed,
                pool_size=pool_size,
                max_overflow=max_overflow,
                connect_timeout_s=connect_timeout_s,
                statement_timeout_s=statement_timeout_s,
                busy_timeout_s=busy_timeout_s,
            )
            engine = create_engine(parsed, **options)
        except (ArgumentError, NoSuchModuleError, ImportError, ValueError) as err:
            # the driver's message may echo the URL with its password: name only the error and the masked URL
            shown = _shown_url(parsed) if parsed is not None else "(unparsable)"
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                f"metadata.url: unusable metadata database URL {shown}: {type(err).__name__}",
                {"setting": "metadata.url", "error": type(err).__name__},
            ) from err
        if backend not in dialects.SUPPORTED:
            engine.dispose()
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                f"metadata.url: {_shown_url(parsed)} is a {backend} database; use sqlite:///… or "
                "postgresql+psycopg://…",
                {"setting": "metadata.url", "dialect": backend},
            )
        if backend == dialects.SQLITE:
            dialects.install_sqlite_listeners(engine)
        self._engine: Engine = engine
        self._busy_timeout_s = busy_timeout_s
        self._secret = parsed.password if isinstance(parsed.password, str) else None
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._local = threading.local()
        self._closed = False
        self._writers: Any = None  # the writer-liveness locks (writer_locks.py), made on first use
        self._writers_guard = threading.Lock()
        try:
            self._on_failure = on_failure
            self._status = self._open_schema(upgrade)
        except BaseException:
            engine.dispose()
            raise

    @classmethod
    def sqlite(cls, path: Path, *, upgrade: bool = True) -> SqlMetadataStore:
        """Open (or create) the embedded SQLite database at ``path``; its parent directory is created if needed.
        ``upgrade=False`` opens it as it is (see :meth:`__init__`)."""
        path = Path(path).expanduser().resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        return cls(URL.create("sqlite", database=str(path)).render_as_string(hide_password=False), upgrade=upgrade)

    @property
    def url(self) -> str:
        """The database URL with any password hidden."""
        return _shown_url(self._engine.url)

    @property
    def dialect(self) -> str:
        """The database's backend name: ``sqlite`` or ``postgresql`` (:mod:`.dialects`)."""
        return self._engine.dialect.name

    def __repr__(self) -> str:
        return f"SqlMetadataStore({self.url!r})"

    # ---- sessions and transactions --------------------------------------------------------------------------------
    def _open_schema(self, upgrade: bool) -> SchemaStatus:
        """Connect (``CFG-4001`` when the database cannot be reached), refuse a newer schema, and with ``upgrade``
        bring it to the newest revision in one transaction (:mod:`.migrate`)."""
        try:
            conn = self._engine.connect()
        except SQLAlchemyError as err:
            raise self._unreachable(err) from err
        try:
            with conn:
                conn = conn.execution_options(**{_WRITE_OPTION: upgrade})
                with conn.begin():
                    if upgrade:
                        return migrate.ensure_current(conn, self.url)[1]
                    status = migrate.read_status(conn)
                    status.refuse_newer(self.url)
                    return status
        except SQLAlchemyError as err:
            raise self._storage_error(err, "open") from err

    def schema_status(self) -> SchemaStatus:
        """Where the database's schema stands now (:class:`~.migrate.SchemaStatus`; read, never changed).

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) on a database failure.
        """
        self._check_open()
        try:
            with self._engine.connect() as conn:
                return migrate.read_status(conn)
        except SQLAlchemyError as err:
            raise self._storage_error(err, "read") from err

    def upgrade_schema(self) -> tuple[SchemaStatus, SchemaStatus]:
        """Bring the schema to the newest revision (``context-engine migrate``); returns ``(before, after)``.

        Raises:
            ContextEngineError: ``CFG-4001`` when a newer release migrated it; ``WRT-5001`` (retryable) on a
                database failure (the upgrade is one transaction: nothing of it remains).
        """
        self._check_open()
        try:
            with self._engine.connect() as conn:
                conn = conn.execution_options(**{_WRITE_OPTION: True})
                with conn.begin():
                    before, after = migrate.ensure_current(conn, self.url)
        except SQLAlchemyError as err:
            raise self._storage_error(err, "upgrade") from err
        self._status = after
        return before, after

    def _unreachable(self, err: SQLAlchemyError) -> ContextEngineError:
        """``CFG-4001`` naming ``metadata.url`` and the address, for a database that cannot be reached at open."""
        url = self._engine.url
        if url.get_backend_name() == dialects.SQLITE:
            address = url.database or ":memory:"
        else:
            address = f"{url.host or 'localhost'}:{url.port or 5432}"
        reason = self._scrub(str(getattr(err, "orig", None) or err).strip().splitlines()[0][:300])
        return ContextEngineError(
            ErrorCode.CONFIG_INVALID,
            f"metadata.url: cannot connect to the metadata database at {address} ({self.url}): {reason}",
            {"setting": "metadata.url", "address": address, "error": type(err).__name__},
        )

    def _storage_error(self, err: SQLAlchemyError, operation: str) -> ContextEngineError:
        """``WRT-5001`` (retryable) naming the driver's message (password scrubbed), never the statement's
        parameters. Counted through ``on_failure`` (metrics). A lock wait past the busy timeout (SQLite "database is
        locked", PostgreSQL ``lock_not_available``) is ``WRT-5032`` instead: retryable, and not a store failure."""
        reason = self._scrub(str(getattr(err, "orig", None) or type(err).__name__)[:200])
        sqlstate = getattr(getattr(err, "orig", None), "sqlstate", None)
        locked = self.dialect == dialects.SQLITE and isinstance(err, OperationalError) and "database is locked" in reason
        if locked or sqlstate == "55P03":  # PostgreSQL: lock_not_available (lock_timeout)
            # the busy wait ran out behind other writers: the store is sound and the caller may retry
            return ContextEngineError(
                ErrorCode.WRITE_BUSY,
                f"metadata store {operation}: the database stayed locked by other writers; retry",
                {"operation": operation, "waited_s": self._busy_timeout_s},
                retryable=True,
            )
        if getattr(self, "_on_failure", None) is not None:
            self._on_failure(operation)
        return ContextEngineError(
            ErrorCode.STORAGE_FAILED,
            f"metadata store {operation} failed: {reason}",
            {"error": type(err).__name__, "operation": operation},
            retryable=True,
        )

    def _scrub(self, text: str) -> str:
        """``text`` with the URL's password replaced (a driver message could echo its connection string)."""
        return text.replace(self._secret, "***") if self._secret and len(self._secret) >= 4 else text

    # ---- sharing the database with the audit and API-key stores ---------------------------------------------------
    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine: the one connection pool of this database in this process. For stores that keep
        their own tables here; never dispose of it (:meth:`close` does)."""
        return self._engine

    def session(self, *, write: bool) -> AbstractContextManager[Session]:
        """A session on this database: the calling thread's :meth:`transaction` when one is open (joining it),
        else a new one that commits at the end (``write``; SQLite takes the write lock up front) or is discarded.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the database fails inside the block.
        """
        return self._use(write=write)

    def snapshot(self) -> AbstractContextManager[Session]:
        """A read-only session on committed data in one snapshot, even inside this thread's transaction.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the database fails inside the block.
        """
        return self._committed_read()

    def _check_open(self) -> None:
        if self._closed:
            raise ContextEngineError(ErrorCode.STORAGE_FAILED, "the metadata store is closed", retryable=False)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes: every store call on this thread inside the block commits together or not at all.

        Reads inside the block see its uncommitted writes (except :meth:`account_generation`, :meth:`changes_since`
        and :meth:`load_vector_matrix`, which read committed data only); other threads see them only after the commit.
        Nested blocks join the outermost one. An exception rolls everything back and propagates unchanged. On SQLite
        the block holds the database's write lock from start to end, so keep slow work (embedding) outside it.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when beginning or committing fails.
        """
        self._check_open()
        local = self._local
        if getattr(local, "session", None) is not None:
            local.depth += 1
            try:
                yield
            finally:
                local.depth -= 1
            return
        session = self._sessions()
        try:
            session.connection(execution_options={_WRITE_OPTION: True})
        except SQLAlchemyError as err:
            session.close()
            raise self._storage_error(err, "begin") from err
        local.session, local.depth = session, 1
        try:
            yield
            session.commit()
        except SQLAlchemyError as err:
            session.rollback()
            raise self._storage_error(err, "commit") from err
        except BaseException:
            session.rollback()
            raise
        finally:
            local.session = None
            session.close()

    @contextmanager
    def _use(self, *, write: bool) -> Iterator[Session]:
        """The thread's transaction session, or a new one committed (write) or discarded (read) at the end."""
        self._check_open()
        current: Session | None = getattr(self._local, "session", None)
        try:
            if current is not None:
                yield current
                current.flush()
                current.expunge_all()  # later bulk statements must never meet stale identity-map objects
                return
            with self._sessions() as session:
                if write:
                    session.connection(execution_options={_WRITE_OPTION: True})
                yield session
                if write:
                    session.commit()
        except SQLAlchemyError as err:
            raise self._storage_error(err, "write" if write else "read") from err

    @contextmanager
    def _read(self) -> Iterator[Session | Connection]:
        """For a Core read: the thread's transaction session (its writes visible), else a plain connection (a
        third of a Session's cost per read; what the per-request reads of a search use)."""
        self._check_open()
        current: Session | None = getattr(self._local, "session", None)
        try:
            if current is not None:
                current.flush()
                yield current
                return
            with self._engine.connect() as conn:
                yield conn
        except SQLAlchemyError as err:
            raise self._storage_error(err, "read") from err

    @contextmanager
    def _committed_read(self) -> Iterator[Session]:
        """A fresh read session that sees committed data only, even inside this thread's transaction, in one
        snapshot (SQLite: the explicit ``BEGIN`` of the connection listener; other databases: ``REPEATABLE READ``)."""
        self._check_open()
        try:
            with self._sessions() as session:
                options = dialects.snapshot_options(self.dialect)
                if options:
                    session.connection(execution_options=options)
                yield session
        except SQLAlchemyError as err:
            raise self._storage_error(err, "read") from err

    # ---- nodes ----------------------------------------------------------------------------------------------------
    def upsert_nodes(self, nodes: Sequence[NodeRecord], *, bulk: bool = False) -> None:
        """Insert or update nodes by ``(account_id, uri_key)``; the last of duplicates wins.

        The stored ``uri`` is canonical (NFC; a trailing ``/`` exactly when ``is_dir``), ``parent_uri`` the canonical
        directory form. ``created_at`` defaults to now and is kept on update; ``updated_at`` defaults to now.
        ``bulk=True`` (loading a store) writes with one ``INSERT ... ON CONFLICT DO UPDATE`` per 500 rows instead of
        through the ORM: the same result, several times faster for large batches.

        Raises:
            ContextEngineError: ``WRT-4001`` for an invalid URI; ``WRT-5001`` (retryable) on a database failure.
        """
        values = list({(v["account_id"], v["uri_key"]): v for v in map(_node_values, nodes)}.values())
        if not values:
            return
        if bulk:
            with self._use(write=True) as s:
                table = NodeRow.__table__
                rows = [{("metadata_json" if k == "meta_json" else k): v for k, v in row.items()} for row in values]
                for start in range(0, len(rows), _IN_BATCH):
                    stmt = self._upsert(table, ["account_id", "uri_key"], keep=("id", "created_at"))
                    s.execute(stmt, rows[start : start + _IN_BATCH])
            return
        with self._use(write=True) as s:
            by_account: dict[str, list[dict[str, Any]]] = {}
            for v in values:
                by_account.setdefault(v["account_id"], []).append(v)
            for account_id, items in by_account.items():
                existing: dict[str, NodeRow] = {}
                for chunk in _chunks(sorted({v["uri_key"] for v in items})):
                    stmt = select(NodeRow).where(NodeRow.account_id == account_id, NodeRow.uri_key.in_(chunk))
                    existing.update((row.uri_key, row) for row in s.scalars(stmt))
                for v in items:
                    row = existing.get(v["uri_key"])
                    if row is None:
                        existing[v["uri_key"]] = row = NodeRow(**v)
                        s.add(row)
                    else:
                        for name, value in v.items():
                            if name != "created_at":
                                setattr(row, name, value)

    def get_node(self, account_id: str, uri: str) -> NodeRecord | None:
        """The node at ``uri`` (with or without the trailing slash), or ``None``.

        Raises:
            ContextEngineError: ``WRT-4001`` for an invalid URI; ``WRT-5001`` on a database failure.
        """
        key = ContextURI.parse(uri).key
        with self._use(write=False) as s:
            row = s.scalars(select(NodeRow).where(NodeRow.account_id == account_id, NodeRow.uri_key == key)).first()
            return None if row is None else _node_record(row)

    def get_nodes(self, account_id: str, uris: Iterable[str]) -> dict[str, NodeRecord]:
        """Batch lookup keyed by the canonical stored URI; missing URIs are absent. Accepts either slash form."""
        keys = sorted({ContextURI.parse(u).key for u in uris})
        out: dict[str, NodeRecord] = {}
        with self._read() as s:
            for chunk in _chunks(keys):
                # Core rows, not ORM objects: a search hydrates ~40 nodes per request (measured: 4.8 -> 1 ms / 20)
                rows = s.execute(_GET_NODES, {"account_id": account_id, "keys": list(chunk)})
                out.update((row.uri, _node_record(row)) for row in rows)
        return out

    def list_children(self, account_id: str, parent_uri: str) -> list[NodeRecord]:
        """Direct children of the directory ``parent_uri`` (either slash form), ordered by URI (code points)."""
        parent = str(ContextURI.parse(parent_uri).as_dir())
        with self._use(write=False) as s:
            rows = s.scalars(select(NodeRow).where(NodeRow.account_id == account_id, NodeRow.parent_uri == parent))
            return sorted((_node_record(r) for r in rows), key=lambda n: n.uri)

    def list_space_roots(self, account_id: str, scope: str) -> list[NodeRecord]:
        """The space roots of ``scope`` (``user`` or ``agent``): its nodes without a parent, ordered by URI."""
        prefix = f"ctx://{scope}/"
        with self._use(write=False) as s:
            stmt = select(NodeRow).where(
                NodeRow.account_id == account_id,
                NodeRow.parent_uri.is_(None),
                NodeRow.uri_key.startswith(prefix, autoescape=True),
            )
            rows = [r for r in s.scalars(stmt) if r.uri_key.startswith(prefix)]  # LIKE ignores ASCII case
            return sorted((_node_record(r) for r in rows), key=lambda n: n.uri)

    def list_subtree(self, account_id: str, uri: str) -> list[NodeRecord]:
        """The node at ``uri`` and every descendant, ordered by URI (code points).

        Descendants match on the ``uri_key`` prefix ``key + '/'`` with ``%``/``_`` escaped; the prefix is checked
        again in Python because SQLite's ``LIKE`` ignores ASCII case.
        """
        key = ContextURI.parse(uri).key
        prefix = key if key.endswith("/") else key + "/"
        with self._use(write=False) as s:
            stmt = select(NodeRow).where(
                NodeRow.account_id == account_id,
                or_(NodeRow.uri_key == key, NodeRow.uri_key.startswith(prefix, autoescape=True)),
            )
            rows = [r for r in s.scalars(stmt) if r.uri_key == key or r.uri_key.startswith(prefix)]
            return sorted((_node_record(r) for r in rows), key=lambda n: n.uri)

    def list_all_nodes(self, account_id: str) -> list[NodeRecord]:
        """Every node of the account, ordered by URI (code points)."""
        with self._use(write=False) as s:
            rows = s.scalars(select(NodeRow).where(NodeRow.account_id == account_id))
            return sorted((_node_record(r) for r in rows), key=lambda n: n.uri)

    def delete_nodes(self, account_id: str, uris: Sequence[str]) -> None:
        """Delete exactly these nodes (not their subtrees) and every relation from or to them. Missing are ignored."""
        keys = sorted({ContextURI.parse(u).key for u in uris})
        if not keys:
            return
        forms = sorted({form for k in keys for form in _slash_forms(k)})
        with self._use(write=True) as s:
            for chunk in _chunks(forms):
                s.execute(
                    delete(RelationRow.__table__).where(
                        RelationRow.account_id == account_id,
                        or_(RelationRow.from_uri.in_(chunk), RelationRow.to_uri.in_(chunk)),
                    )
                )
            for chunk in _chunks(keys):
                s.execute(delete(NodeRow.__table__).where(NodeRow.account_id == account_id, NodeRow.uri_key.in_(chunk)))
                s.execute(delete(_VERSIONS).where(_VERSIONS.c.account_id == account_id, _VERSIONS.c.uri_key.in_(chunk)))

    # ---- memories (issue 11) --------------------------------------------------------------------------------------
    def last_child_uri(self, account_id: str, parent_uri: str) -> str | None:
        """The greatest child URI of a directory in code-point order (zero-padded names make it the newest), or
        ``None``; one indexed query, so appending to a long session costs the same as to a short one."""
        parent = str(ContextURI.parse(parent_uri).as_dir())
        with self._use(write=False) as s:
            stmt = select(func.max(NodeRow.uri)).where(NodeRow.account_id == account_id, NodeRow.parent_uri == parent)
            return s.execute(stmt).scalar()

    def children_window(self, account_id: str, parent_uri: str, each: int) -> tuple[list[NodeRecord], int]:
        """A bounded sample of a directory's children, for summaries that must not cost O(children): all of them
        when there are at most ``2 * each``, else the first and the last ``each`` by URI. Returns ``(sample ordered
        by URI, total number of children)``. The window is chosen by the database's ``ORDER BY`` on the URI key in
        code-point order (on PostgreSQL whatever the database's collation)."""
        parent = str(ContextURI.parse(parent_uri).as_dir())
        where = (NodeRow.account_id == account_id, NodeRow.parent_uri == parent)
        with self._use(write=False) as s:
            total = int(s.execute(select(func.count()).where(*where)).scalar() or 0)
            if total <= 2 * each:
                rows = list(s.scalars(select(NodeRow).where(*where)))
            else:
                key = dialects.code_point_order(self.dialect, NodeRow.uri_key)
                head = s.scalars(select(NodeRow).where(*where).order_by(key).limit(each))
                tail = s.scalars(select(NodeRow).where(*where).order_by(key.desc()).limit(each))
                rows = list({r.uri: r for r in [*head, *tail]}.values())
        return sorted((_node_record(r) for r in rows), key=lambda n: n.uri), total

    def reserve_sequence(self, account_id: str, parent_uri: str, count: int, floor: int) -> int:
        """Reserve ``count`` consecutive sequence numbers for new children of ``parent_uri`` (a conversation session)
        and return the first. Atomic across threads and processes (one write transaction on a ``meta`` counter row),
        so concurrent writers never number two messages alike; ``floor`` is the highest number already used (a
        session written before the counter existed). A batch that fails after reserving leaves a gap."""
        key = _sequence_key(account_id, parent_uri)
        with self.transaction(), self._use(write=True) as s:
            # the row first, then its lock (PostgreSQL: FOR UPDATE; SQLite holds the write lock): a concurrent
            # reservation waits and reads the value this one leaves
            s.execute(self._insert_ignore(_META).values(key=key, value="0"))
            value = s.execute(select(_META.c.value).where(_META.c.key == key).with_for_update()).scalar()
            current = max(int(value or 0), floor)
            s.execute(update(_META).where(_META.c.key == key).values(value=str(current + count)))
        return current + 1

    def release_sequence(self, account_id: str, parent_uri: str, start: int, count: int) -> None:
        """Give back numbers reserved by :meth:`reserve_sequence` for a batch that failed, when no later reservation
        followed (else the gap stays: numbers only ever grow)."""
        key = _sequence_key(account_id, parent_uri)
        with self.transaction(), self._use(write=True) as s:
            stmt = update(_META).where(_META.c.key == key, _META.c.value == str(start + count - 1))
            s.execute(stmt.values(value=str(start - 1)))

    def count_children(self, account_id: str, parent_uri: str) -> int:
        """How many direct children a directory has (one indexed count)."""
        parent = str(ContextURI.parse(parent_uri).as_dir())
        with self._use(write=False) as s:
            stmt = select(func.count()).where(NodeRow.account_id == account_id, NodeRow.parent_uri == parent)
            return int(s.execute(stmt).scalar() or 0)

    def find_by_hash(
        self, account_id: str, content_hashes: Sequence[str], *, uri_prefix: str, context_type: str = "memory"
    ) -> dict[str, NodeRecord]:
        """Files of ``context_type`` under ``uri_prefix`` whose ``content_hash`` is one of ``content_hashes``, keyed
        by hash (the first URI in code-point order when several share one)."""
        out: dict[str, NodeRecord] = {}
        prefix = str(ContextURI.parse(uri_prefix).as_dir()).rstrip("/") + "/"
        with self._use(write=False) as s:
            for chunk in _chunks(sorted(set(content_hashes))):
                stmt = select(NodeRow).where(
                    NodeRow.account_id == account_id,
                    NodeRow.content_hash.in_(chunk),
                    NodeRow.context_type == context_type,
                    NodeRow.is_dir.is_(False),
                )
                for row in sorted(s.scalars(stmt), key=lambda r: r.uri):
                    if row.uri.startswith(prefix) and row.content_hash not in out:
                        out[row.content_hash] = _node_record(row)
        return out

    def query_files(
        self,
        account_id: str,
        *,
        uri_prefixes: Sequence[str],
        context_type: str | None = None,
        occurred_start: datetime | None = None,
        occurred_end: datetime | None = None,
        metadata_equals: dict[str, Any] | None = None,
        newest_first: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> tuple[list[NodeRecord], int]:
        """Files under any of ``uri_prefixes`` (directory URIs), narrowed by type, time and metadata; and their total.

        Time: ``occurred_start <= coalesce(occurred_at, created_at) < occurred_end`` (either bound optional).
        ``metadata_equals`` maps a key to a scalar (equality) or a list of scalars (membership) on the top-level
        key of the metadata object; every key must match. Order: ``(updated_at, URI)`` descending when
        ``newest_first`` (newest first, the later message of one batch first), else URI (code points). ``limit``/``offset`` page the ordered list.

        Returns:
            ``(page, total)``: the requested page and the number of matching files.
        """
        keys = _prefix_keys(uri_prefixes)
        if not keys:
            return [], 0
        conditions = _file_conditions(
            account_id, keys, None, context_type, occurred_start, occurred_end, metadata_equals
        )
        with self._use(write=False) as s:
            rows = [r for r in s.scalars(select(NodeRow).where(and_(*conditions))) if r.uri_key.startswith(tuple(keys))]
        if newest_first:  # ties (one batch shares updated_at): the later URI, i.e. the later message, first
            rows.sort(key=lambda r: (r.updated_at, r.uri), reverse=True)
        else:
            rows.sort(key=lambda r: r.uri)
        total = len(rows)
        page = rows[offset : None if limit is None else offset + limit]
        return [_node_record(r) for r in page], total

    def select_file_uris(
        self,
        account_id: str,
        *,
        uri_prefixes: Sequence[str] = (),
        parent_uri: str | None = None,
        context_type: str | None = None,
        occurred_start: datetime | None = None,
        occurred_end: datetime | None = None,
        metadata_equals: dict[str, Any] | None = None,
    ) -> list[tuple[str, str]]:
        """``(uri, owner_space)`` of the files :meth:`query_files` would select, reading two columns only (the
        per-request memory filter of search_memory). ``parent_uri`` narrows to one directory's direct children
        through the ``(account_id, parent_uri)`` index, the cheap path for a conversation session."""
        keys = _prefix_keys(uri_prefixes)
        conditions = _file_conditions(
            account_id, keys, parent_uri, context_type, occurred_start, occurred_end, metadata_equals
        )
        stmt = select(NodeRow.uri, NodeRow.uri_key, NodeRow.owner_space).where(and_(*conditions))
        with self._use(write=False) as s:
            rows = s.execute(stmt).all()
        prefixes = tuple(keys)
        return sorted((uri, space) for uri, key, space in rows if not prefixes or key.startswith(prefixes))

    def add_version(
        self,
        account_id: str,
        uri: str,
        version: int,
        text: str,
        created_at: datetime,
        replaced_at: datetime | None = None,
    ) -> None:
        """Keep ``text`` as version ``version`` of the memory at ``uri``, written at ``created_at`` and replaced at
        ``replaced_at`` (default now: the new version's write time)."""
        key = ContextURI.parse(uri).key
        with self._use(write=True) as s:
            s.execute(
                insert(_VERSIONS).values(
                    account_id=account_id,
                    uri_key=key,
                    version=version,
                    text=text,
                    created_at=created_at,
                    replaced_at=replaced_at or datetime.now(UTC),
                )
            )

    def get_versions(self, account_id: str, uri: str) -> list[dict[str, Any]]:
        """Earlier versions of a memory, oldest first: ``{version, text, created_at, replaced_at}`` each."""
        key = ContextURI.parse(uri).key
        with self._use(write=False) as s:
            stmt = select(_VERSIONS).where(_VERSIONS.c.account_id == account_id, _VERSIONS.c.uri_key == key)
            rows = [dict(r._mapping) for r in s.execute(stmt)]
        return [
            {k: r[k] for k in ("version", "text", "created_at", "replaced_at")}
            for r in sorted(rows, key=lambda r: r["version"])
        ]

    def set_index_status(self, account_id: str, uris: Sequence[str], status: str) -> None:
        """Set ``index_status`` (``indexed`` or ``pending``) of these nodes; missing nodes are ignored.

        Raises:
            ContextEngineError: ``WRT-4002`` for an unknown status.
        """
        if status not in _STATUSES:
            raise ContextEngineError(
                ErrorCode.REQUEST_INVALID, f"index_status must be one of {sorted(_STATUSES)}, got {status!r}"
            )
        keys = sorted({ContextURI.parse(u).key for u in uris})
        with self._use(write=True) as s:
            for chunk in _chunks(keys):
                s.execute(
                    update(NodeRow.__table__)
                    .where(NodeRow.account_id == account_id, NodeRow.uri_key.in_(chunk))
                    .values(index_status=status)
                )

    def pending_nodes(self, account_id: str | None = None) -> list[NodeRecord]:
        """Nodes with ``index_status='pending'`` (of one account, or all), ordered by ``(account_id, uri)``."""
        stmt = select(NodeRow).where(NodeRow.index_status == "pending")
        if account_id is not None:
            stmt = stmt.where(NodeRow.account_id == account_id)
        with self._use(write=False) as s:
            return sorted((_node_record(r) for r in s.scalars(stmt)), key=lambda n: (n.account_id, n.uri))

    def count_nodes(self, account_id: str | None = None) -> dict[str, int]:
        """Counts of one account (or all): ``{"nodes", "files", "directories", "pending"}``."""
        stmt = select(NodeRow.is_dir, NodeRow.index_status, func.count()).group_by(NodeRow.is_dir, NodeRow.index_status)
        if account_id is not None:
            stmt = stmt.where(NodeRow.account_id == account_id)
        out = {"nodes": 0, "files": 0, "directories": 0, "pending": 0}
        with self._use(write=False) as s:
            for is_dir, status, n in s.execute(stmt):
                out["nodes"] += n
                out["directories" if is_dir else "files"] += n
                if status == "pending":
                    out["pending"] += n
        return out

    def accounts(self) -> list[str]:
        """Accounts holding at least one node or vector row, sorted."""
        with self._use(write=False) as s:
            found = set(s.scalars(select(NodeRow.account_id).distinct()))
            found.update(s.scalars(select(VectorRow.account_id).distinct()))
        return sorted(found)

    # ---- relations ------------------------------------------------------------------------------------------------
    def add_relations(self, account_id: str, relations: Sequence[Relation]) -> None:
        """Insert edges, or update the weight of an existing ``(from_uri, to_uri, relation_type)`` edge.

        URIs are validated and NFC-normalised; their slash form is kept as written.
        """
        edges: dict[tuple[str, str, str], float] = {}
        for rel in relations:
            edge = (str(ContextURI.parse(rel.from_uri)), str(ContextURI.parse(rel.to_uri)), rel.relation_type)
            edges[edge] = rel.weight
        if not edges:
            return
        with self._use(write=True) as s:
            existing: dict[tuple[str, str, str], RelationRow] = {}
            for chunk in _chunks(sorted({e[0] for e in edges})):
                stmt = select(RelationRow).where(RelationRow.account_id == account_id, RelationRow.from_uri.in_(chunk))
                existing.update(((r.from_uri, r.to_uri, r.relation_type), r) for r in s.scalars(stmt))
            for (from_uri, to_uri, relation_type), weight in edges.items():
                row = existing.get((from_uri, to_uri, relation_type))
                if row is None:
                    s.add(
                        RelationRow(
                            account_id=account_id,
                            from_uri=from_uri,
                            to_uri=to_uri,
                            relation_type=relation_type,
                            weight=weight,
                        )
                    )
                else:
                    row.weight = weight

    def get_relations(self, account_id: str, from_uri: str, limit: int | None = None) -> list[Relation]:
        """Edges leaving ``from_uri`` (either slash form), by weight descending, then ``to_uri``, then type.

        ``limit=None`` returns all; ``limit <= 0`` returns none.
        """
        forms = _slash_forms(ContextURI.parse(from_uri).key)
        if limit is not None and limit <= 0:
            return []
        with self._use(write=False) as s:
            stmt = select(RelationRow).where(RelationRow.account_id == account_id, RelationRow.from_uri.in_(forms))
            rels = [
                Relation(from_uri=r.from_uri, to_uri=r.to_uri, relation_type=r.relation_type, weight=r.weight)
                for r in s.scalars(stmt)
            ]
        rels.sort(key=lambda r: (-r.weight, r.to_uri, r.relation_type, r.from_uri))
        return rels if limit is None else rels[:limit]

    # ---- vectors --------------------------------------------------------------------------------------------------
    def put_vectors(self, records: Sequence[VectorRecord], *, bulk: bool = False) -> None:
        """Insert or replace vector rows by ``id`` (the last of duplicate ids wins).

        Bumps the generation of each account written and logs the ids (one change-log row per id), in the same
        transaction (the caller's, or its own). ``bulk=True`` (loading a store) logs no ids and moves the log floor
        to the new generation instead: every reader behind it reloads the account wholesale, which is cheaper than
        applying a bulk load row by row.

        Raises:
            ContextEngineError: ``WRT-4002`` for a vector that is not a finite, non-empty 1-D array;
                ``WRT-5001`` (retryable) on a database failure.
        """
        rows = {r.id: _vector_values(r) for r in records}
        if not rows:
            return
        with self._use(write=True) as s:
            values = list(rows.values())
            # INSERT ... ON CONFLICT DO UPDATE: on PostgreSQL a concurrent writer of the same id waits for this one
            # and then replaces the row (a delete and an insert would fail on the primary key instead)
            for start in range(0, len(values), _IN_BATCH):
                s.execute(self._upsert(_VECTORS, ["id"]), values[start : start + _IN_BATCH])
            by_account: dict[str, list[str]] = {}
            for rid, value in rows.items():
                by_account.setdefault(value["account_id"], []).append(rid)
            for account_id, ids in sorted(by_account.items()):
                self._log_changes(s, account_id, [] if bulk else ids, reload=bulk)

    def delete_vectors(self, ids: Sequence[str]) -> None:
        """Delete vector rows by ``id``; unknown ids are ignored. Logs the deleted ids (see :meth:`put_vectors`)."""
        unique = sorted(set(ids))
        if not unique:
            return
        with self._use(write=True) as s:
            by_account: dict[str, list[str]] = {}
            for chunk in _chunks(unique):
                for rid, account_id in s.execute(
                    select(_VECTORS.c.id, _VECTORS.c.account_id).where(_VECTORS.c.id.in_(chunk))
                ):
                    by_account.setdefault(account_id, []).append(rid)
                s.execute(delete(_VECTORS).where(_VECTORS.c.id.in_(chunk)))
            for account_id, found in sorted(by_account.items()):
                self._log_changes(s, account_id, found)

    def _log_changes(self, s: Session, account_id: str, ids: Sequence[str], *, reload: bool = False) -> int:
        """Bump the account generation and log ``ids`` at the new value; prune the log now and then. ``reload``:
        move the log floor to the new generation (readers behind it reload)."""
        bumped = s.execute(
            update(_GENERATIONS)
            .where(_GENERATIONS.c.account_id == account_id)
            .values(generation=_GENERATIONS.c.generation + 1)
        ).rowcount
        if not bumped:
            s.execute(self._insert_ignore(_GENERATIONS).values(account_id=account_id, generation=0, log_floor=0))
            s.execute(
                update(_GENERATIONS)
                .where(_GENERATIONS.c.account_id == account_id)
                .values(generation=_GENERATIONS.c.generation + 1)
            )
        generation, floor = s.execute(
            select(_GENERATIONS.c.generation, _GENERATIONS.c.log_floor).where(_GENERATIONS.c.account_id == account_id)
        ).one()
        rows = [{"account_id": account_id, "generation": generation, "vector_id": rid} for rid in ids]
        for start in range(0, len(rows), _IN_BATCH):
            s.execute(insert(_CHANGES), rows[start : start + _IN_BATCH])
        if reload:
            s.execute(delete(_CHANGES).where(_CHANGES.c.account_id == account_id))
            s.execute(update(_GENERATIONS).where(_GENERATIONS.c.account_id == account_id).values(log_floor=generation))
        elif generation % _PRUNE_EVERY == 0 and generation - LOG_RETAIN > floor:
            new_floor = generation - LOG_RETAIN
            s.execute(delete(_CHANGES).where(_CHANGES.c.account_id == account_id, _CHANGES.c.generation <= new_floor))
            s.execute(update(_GENERATIONS).where(_GENERATIONS.c.account_id == account_id).values(log_floor=new_floor))
        return int(generation)

    def _upsert(self, table: Any, keys: Sequence[str], keep: Sequence[str] = ()) -> Any:
        """``INSERT ... ON CONFLICT (keys) DO UPDATE`` of every column but ``keys`` and ``keep``, for this dialect."""
        return dialects.upsert(self.dialect, table, keys, keep)

    def _insert_ignore(self, table: Any) -> Any:
        """``INSERT ... ON CONFLICT DO NOTHING`` for this dialect (the generation row may be created concurrently)."""
        return dialects.insert_ignore(self.dialect, table)

    def vector_ids_for(self, account_id: str, uris: Sequence[str]) -> list[str]:
        """Ids (sorted) of the account's vector rows whose ``uri`` is one of ``uris`` (either slash form)."""
        forms = sorted({form for u in uris for form in _slash_forms(ContextURI.parse(u).key)})
        out: list[str] = []
        with self._use(write=False) as s:
            for chunk in _chunks(forms):
                stmt = select(_VECTORS.c.id).where(_VECTORS.c.account_id == account_id, _VECTORS.c.uri.in_(chunk))
                out.extend(s.scalars(stmt))
        return sorted(out)

    def get_vectors(self, account_id: str, uris: Sequence[str]) -> list[VectorRecord]:
        """The account's vector rows whose ``uri`` is one of ``uris`` (either slash form).

        Ordered by ``(uri, level, chunk_index, id)``; ``vector`` is float32 of shape ``(dim,)``.
        """
        forms = sorted({form for u in uris for form in _slash_forms(ContextURI.parse(u).key)})
        out: list[VectorRecord] = []
        with self._use(write=False) as s:
            for chunk in _chunks(forms):
                stmt = select(_VECTORS).where(_VECTORS.c.account_id == account_id, _VECTORS.c.uri.in_(chunk))
                out.extend(_vector_record(r._mapping) for r in s.execute(stmt))
        return sorted(out, key=lambda r: (r.uri, r.level, r.chunk_index, r.id))

    def iter_vectors(self, account_id: str | None = None, batch_size: int = 2048) -> Iterator[list[VectorRecord]]:
        """Every vector row (of one account, or all) in batches of at most ``batch_size``, keyset-paged by ``id``.

        Each batch is read in its own short session (or in this thread's open transaction), so rows written while
        iterating may or may not appear. ``VectorRecord.vector`` is a float32 array of shape ``(dim,)``.

        Raises:
            ValueError: when ``batch_size < 1``.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        last: str | None = None
        while True:
            stmt = select(_VECTORS).order_by(_VECTORS.c.id).limit(batch_size)
            if account_id is not None:
                stmt = stmt.where(_VECTORS.c.account_id == account_id)
            if last is not None:
                stmt = stmt.where(_VECTORS.c.id > last)
            with self._use(write=False) as s:
                rows = s.execute(stmt).all()
            if not rows:
                return
            yield [_vector_record(r._mapping) for r in rows]
            if len(rows) < batch_size:
                return
            last = rows[-1].id

    def count_vectors(self, account_id: str | None = None) -> int:
        """Number of vector rows (of one account, or all); an extension used by ``ExactVectorIndex.count``."""
        stmt = select(func.count()).select_from(_VECTORS)
        if account_id is not None:
            stmt = stmt.where(_VECTORS.c.account_id == account_id)
        with self._use(write=False) as s:
            return int(s.execute(stmt).scalar_one())

    def account_generation(self, account_id: str) -> int:
        """The committed account generation (0 before the account's first vector write); one primary-key read.

        It increases with every committed :meth:`put_vectors` and effective :meth:`delete_vectors` of the account,
        also those of other processes, and never reflects uncommitted writes, so a value is never reused after a
        rollback (docs/derived_indexes.md).
        """
        self._check_open()
        try:
            with self._engine.connect() as conn:  # a Core connection: a third of a Session's cost per read
                found = conn.execute(_GET_GENERATION, {"account_id": account_id}).scalar()
        except SQLAlchemyError as err:
            raise self._storage_error(err, "read") from err
        return int(found or 0)

    def changes_since(
        self,
        account_id: str,
        generation: int,
        *,
        levels: Sequence[int] | None = None,
        max_changes: int = 50_000,
    ) -> IndexDelta:
        """What changed in the account after ``generation``: the current rows of the changed ids (at ``levels``,
        every level when ``None``) and the ids deleted, read in one snapshot with the generation they bring to.

        Cost: one indexed range read of the change log and one primary-key read per changed id, so O(changes).
        ``reload`` is set (and nothing else) when the log was pruned past ``generation``, when ``generation`` is
        ahead of the database (it was replaced) or when more than ``max_changes`` ids changed.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) on a database failure.
        """
        with self._committed_read() as s:
            found = s.execute(
                select(_GENERATIONS.c.generation, _GENERATIONS.c.log_floor).where(
                    _GENERATIONS.c.account_id == account_id
                )
            ).first()
            current, floor = (int(found[0]), int(found[1])) if found is not None else (0, 0)
            if generation == current:
                return IndexDelta(current)
            if generation > current or generation < floor:
                return IndexDelta(current, reload=True)
            cap = max_changes * 4  # log rows read at most (an id may be logged by several generations)
            logged = list(
                s.scalars(
                    select(_CHANGES.c.vector_id)
                    .where(
                        _CHANGES.c.account_id == account_id,
                        _CHANGES.c.generation > generation,
                        _CHANGES.c.generation <= current,
                    )
                    .limit(cap + 1)
                )
            )
            changed = sorted(set(logged))
            if len(logged) > cap or len(changed) > max_changes:
                return IndexDelta(current, reload=True)
            upserted: list[VectorRecord] = []
            present: set[str] = set()
            for chunk in _chunks(changed):
                # by primary key alone: with the account in the WHERE clause SQLite picks the account index and
                # scans the account's rows (measured: 0.8 ms per row at 20k rows); the account is checked below
                for row in s.execute(select(_VECTORS).where(_VECTORS.c.id.in_(chunk))):
                    if row.account_id != account_id:
                        continue
                    present.add(row.id)
                    if levels is None or row.level in levels:
                        upserted.append(_vector_record(row._mapping))
        upserted.sort(key=lambda r: r.id)
        return IndexDelta(current, upserted, [i for i in changed if i not in present])

    def get_vector_rows(self, account_id: str, ids: Sequence[str]) -> dict[str, VectorRecord]:
        """The account's vector rows with these ids (missing ids are absent); one primary-key read per 500 ids."""
        out: dict[str, VectorRecord] = {}
        with self._read() as s:
            for chunk in _chunks(sorted(set(ids))):  # by primary key alone (see changes_since)
                stmt = select(_VECTORS).where(_VECTORS.c.id.in_(chunk))
                out.update((r.id, _vector_record(r._mapping)) for r in s.execute(stmt) if r.account_id == account_id)
        return out

    def get_vector_texts(self, account_id: str, ids: Sequence[str]) -> dict[str, tuple[str, str, str]]:
        """``(text, breadcrumb, context)`` of the account's rows with these ids (missing ids are absent): what a
        keyword hit shows, without reading vectors (one primary-key read per 500 ids)."""
        out: dict[str, tuple[str, str, str]] = {}
        with self._read() as s:
            for chunk in _chunks(sorted(set(ids))):  # by primary key alone (see changes_since)
                for rid, acc, text, breadcrumb, context in s.execute(_GET_VECTOR_TEXTS, {"ids": list(chunk)}):
                    if acc == account_id:
                        out[rid] = (text, breadcrumb, context or "")
        return out

    def load_vector_matrix(
        self, account_id: str, *, levels: Sequence[int] | None = None, with_vectors: bool = True
    ) -> VectorMatrix:
        """The committed vector rows of one account (at ``levels``, every level when ``None``) as column arrays,
        sorted by ``id`` (code points), with the account generation they are exactly at (one snapshot).

        ``with_vectors=False`` skips the vector column (``vectors`` has shape ``(n, 0)``): what BM25 reads.

        Raises:
            ContextEngineError: ``IDX-4091`` when the account's rows have different dimensions;
                ``WRT-5001`` (retryable) on a database failure.
        """
        columns = [c for c in _VECTORS.c if c.name != "account_id" and (with_vectors or c.name != "vector")]
        with self._committed_read() as s:
            generation = s.execute(
                select(_GENERATIONS.c.generation).where(_GENERATIONS.c.account_id == account_id)
            ).scalar()
            stmt = select(*columns).where(_VECTORS.c.account_id == account_id)
            if levels is not None:
                stmt = stmt.where(_VECTORS.c.level.in_(sorted(set(levels))))
            rows = s.execute(stmt.order_by(dialects.code_point_order(self.dialect, _VECTORS.c.id))).all()
        generation = int(generation or 0)
        if not rows:
            return VectorMatrix.empty(generation)
        cols = dict(zip([c.name for c in columns], zip(*rows, strict=True), strict=True))
        ids = list(cols.pop("id"))
        if not with_vectors:
            matrix = np.zeros((len(ids), 0), dtype=np.float32)
            return VectorMatrix.from_columns(
                generation, ids=ids, matrix=matrix, **{k: list(v) for k, v in cols.items()}
            )
        blobs: tuple[bytes, ...] = cols.pop("vector")
        sizes = {len(b) for b in blobs}
        if len(sizes) != 1 or 0 in sizes or next(iter(sizes)) % 4:
            raise ContextEngineError(
                ErrorCode.INDEX_MODEL_MISMATCH,
                "stored vectors of this account have different dimensions; run `context-engine reindex`",
                {"byte_sizes": sorted(sizes)[:8]},
            )
        matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(rows), -1)
        return VectorMatrix.from_columns(generation, ids=ids, matrix=matrix, **{k: list(v) for k, v in cols.items()})

    # ---- the intent journal (storage/journal.py) --------------------------------------------------------------------
    def lock_writes(self) -> None:
        """Inside a write transaction: serialise it with every other journaled write until it ends.

        SQLite already holds the database's write lock for the whole transaction (``BEGIN IMMEDIATE``); other
        databases take the row lock of one ``meta`` row, so two writers never change the content store at once.
        PostgreSQL queues the waiters of that lock in arrival order; a wait longer than the busy timeout
        (``ingest.write_wait_s``, the transaction's ``lock_timeout``) fails with the retryable ``WRT-5032``.
        """
        if self.dialect == dialects.SQLITE:
            return
        with self._use(write=True) as s:
            s.execute(text(f"SET LOCAL lock_timeout = {max(1, round(self._busy_timeout_s * 1000))}"))
            s.execute(self._insert_ignore(_META).values(key=_WRITE_LOCK_KEY, value="0"))
            s.execute(update(_META).where(_META.c.key == _WRITE_LOCK_KEY).values(value=_META.c.value))

    @contextmanager
    def write_turn(self, timeout_s: float) -> Iterator[None]:
        """Outside any transaction: wait (first come, first served, at most ``timeout_s``) for this home's write
        turn and hold it for the block; every thread and process writing through the journal queues here.

        SQLite: a ticket queue of ``flock`` files beside the journal locks (:class:`.writer_locks.FileWriterLocks`),
        so the server's threads and CLI processes take turns in arrival order instead of racing SQLite's busy wait.
        PostgreSQL: nothing here (:meth:`lock_writes`' row lock queues writers in the server's lock manager).

        Raises:
            ContextEngineError: ``WRT-5032`` (retryable) when the turn did not come within ``timeout_s``;
                ``WRT-5001`` (retryable) when the queue cannot be used.
        """
        if self.dialect != dialects.SQLITE:
            yield
            return
        try:
            turn = self._writer_locks().turn(timeout_s)
            got = turn.__enter__()
        except OSError as err:
            raise self._lock_error(err) from err
        try:
            if not got:
                raise ContextEngineError(
                    ErrorCode.WRITE_BUSY,
                    f"no write turn within {timeout_s:g} s (ingest.write_wait_s): other writers are ahead; retry",
                    {"waited_s": timeout_s},
                    retryable=True,
                )
            yield
        finally:
            turn.__exit__(None, None, None)

    def journal_open(self, account_id: str, op: str, owner: str | None, uris: Sequence[str] = ()) -> int:
        """Write a ``prepared`` intent row and return its id. Call it outside a transaction (it must be committed
        before the write touches anything).

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) on a database failure.
        """
        with self._use(write=True) as s:
            row = WriteJournalRow(
                account_id=account_id,
                op=op,
                state="prepared",
                owner=owner,
                created_at=datetime.now(UTC),
                payload={"uris": list(uris), "sync_ids": []},
            )
            s.add(row)
            s.flush()
            return int(row.id)

    def journal_commit(self, journal_id: int, uris: Sequence[str], sync_ids: Sequence[str]) -> None:
        """Inside the write's transaction: mark the row ``committed`` with the nodes written and the vector ids
        touched (it commits or rolls back with the write)."""
        payload = {"uris": sorted(set(uris)), "sync_ids": sorted(set(sync_ids))}
        with self._use(write=True) as s:
            s.execute(update(_JOURNAL).where(_JOURNAL.c.id == journal_id).values(state="committed", payload=payload))

    def journal_release(self, journal_id: int) -> None:
        """Clear the row's owner: any process may now finish it (its writer could not)."""
        with self._use(write=True) as s:
            s.execute(update(_JOURNAL).where(_JOURNAL.c.id == journal_id).values(owner=None))

    def journal_delete(self, journal_id: int) -> None:
        """Drop the row (the write is finished, or undone). A missing row is ignored."""
        with self._use(write=True) as s:
            s.execute(delete(_JOURNAL).where(_JOURNAL.c.id == journal_id))

    def journal_entries(self) -> list[JournalEntry]:
        """Every row, oldest first: the writes in flight or left by a crash (few; a full read of a small table)."""
        with self._use(write=False) as s:
            rows = s.execute(select(_JOURNAL).order_by(_JOURNAL.c.id)).all()
        return [
            JournalEntry(
                id=int(r.id),
                account_id=r.account_id,
                op=r.op,
                state="committed" if r.state == "committed" else "prepared",
                owner=r.owner,
                created_at=r.created_at,
                uris=list((r.payload or {}).get("uris", [])),
                sync_ids=list((r.payload or {}).get("sync_ids", [])),
            )
            for r in rows
        ]

    # ---- meta -----------------------------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """The value stored under ``key``, or ``None``."""
        with self._use(write=False) as s:
            return s.execute(select(_META.c.value).where(_META.c.key == key)).scalar()

    def ensure_meta(self, key: str, value: str) -> str:
        """The value under ``key``, storing ``value`` first when there is none: whoever writes first wins, also
        between processes starting together, and every caller gets that value (a read only, once it exists)."""
        found = self.get_meta(key)
        if found is not None:
            return found
        with self._use(write=True) as s:
            s.execute(self._insert_ignore(_META).values(key=key, value=value))
        found = self.get_meta(key)
        return value if found is None else found

    def set_meta(self, key: str, value: str) -> None:
        """Store ``value`` under ``key`` (insert or replace, atomic also against a concurrent first write)."""
        with self._use(write=True) as s:
            s.execute(self._upsert(_META, ["key"]).values(key=key, value=value))

    # ---- writer liveness and the index sync lock (ingest/journal.py; writer_locks.py) -------------------------------
    def hold_writer_lock(self, token: str) -> None:
        """Hold, for this process's life (or until :meth:`release_writer_lock`), the lock that shows the writer
        ``token`` is alive to every process of this database. Idempotent; checks a held lock is still held.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the lock cannot be taken.
        """
        try:
            self._writer_locks().hold(token)
        except (SQLAlchemyError, OSError, RuntimeError) as err:
            raise self._lock_error(err) from err

    def writer_alive(self, token: str) -> bool:
        """Whether the writer ``token`` holds its lock, in this process or any other (on PostgreSQL: on any machine).

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) on a database failure.
        """
        try:
            return bool(self._writer_locks().alive(token))
        except (SQLAlchemyError, OSError) as err:
            raise self._lock_error(err) from err

    def release_writer_lock(self, token: str) -> None:
        """Drop the writer lock of ``token``: the rows it owns become recoverable by others. Idempotent."""
        if self._writers is not None:
            self._writers.release(token)

    @contextmanager
    def index_sync_lock(self, account_id: str) -> Iterator[None]:
        """Serialise, across every process, the syncs of the vector index with this database (SQLite: one lock for
        all accounts; PostgreSQL: one per account).

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the lock cannot be taken or is lost.
        """
        in_block = False
        try:
            with self._writer_locks().sync(account_id):
                in_block = True
                yield
                in_block = False
        except (SQLAlchemyError, OSError) as err:
            if in_block:
                raise  # the block's own failure, unchanged
            raise self._lock_error(err) from err

    def _writer_locks(self) -> Any:
        self._check_open()
        with self._writers_guard:
            if self._writers is None:
                from context_engine.storage.metadata import writer_locks

                if self.dialect == dialects.SQLITE:
                    database = self._engine.url.database
                    if database and database != ":memory:":
                        directory = Path(database).parent / "journal"
                    else:
                        import tempfile

                        directory = Path(tempfile.mkdtemp(prefix="ce-journal-"))
                    self._writers = writer_locks.FileWriterLocks(directory)
                else:
                    self._writers = writer_locks.AdvisoryWriterLocks(self._engine)
            return self._writers

    def _lock_error(self, err: BaseException) -> ContextEngineError:
        if isinstance(err, SQLAlchemyError):
            return self._storage_error(err, "writer lock")
        return ContextEngineError(
            ErrorCode.STORAGE_FAILED,
            f"metadata store writer lock failed: {type(err).__name__}: {self._scrub(str(err))[:200]}",
            {"error": type(err).__name__, "operation": "writer lock"},
            retryable=True,
        )

    def close(self) -> None:
        """Release every connection and lock. Idempotent; later calls raise ``WRT-5001`` (not retryable)."""
        if not self._closed:
            self._closed = True
            if self._writers is not None:
                self._writers.close()
            self._engine.dispose()


# ---- helpers ------------------------------------------------------------------------------------------------------
def _shown_url(url: URL) -> str:
    """``url`` for messages: the password hidden, also one given as a ``password`` query parameter."""
    if "password" in url.query:
        url = url.update_query_dict({"password": "***"})
    return url.render_as_string(hide_password=True)


def _chunks(items: Sequence[str], size: int = _IN_BATCH) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _slash_forms(key: str) -> list[str]:
    """Both spellings of a node's URI: ``key`` and ``key/`` (roots already end with '/')."""
    return [key] if key.endswith("/") else [key, key + "/"]


def _node_values(node: NodeRecord) -> dict[str, Any]:
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


def _node_record(row: Any) -> NodeRecord:
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


def _vector_values(record: VectorRecord) -> dict[str, Any]:
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


def _vector_record(row: Any) -> VectorRecord:
    values = dict(row)
    values["vector"] = np.frombuffer(values["vector"], dtype="<f4").astype(np.float32)
    return VectorRecord(**values)


def _prefix_keys(uri_prefixes: Sequence[str]) -> list[str]:
    """Directory URI keys ending in '/'; a scope root without a space ("ctx://user/": every user's memories, for an
    admin) is taken as a plain prefix."""
    keys = []
    for p in uri_prefixes:
        key = p if p in _SPACE_SCOPE_ROOTS else ContextURI.parse(p).key
        keys.append(key if key.endswith("/") else key + "/")
    return keys


def _file_conditions(
    account_id: str,
    keys: Sequence[str],
    parent_uri: str | None,
    context_type: str | None,
    occurred_start: datetime | None,
    occurred_end: datetime | None,
    metadata_equals: dict[str, Any] | None,
) -> list[Any]:
    """The WHERE clauses of ``query_files`` / ``select_file_uris`` (prefixes are re-checked in Python: SQLite's
    LIKE ignores ASCII case)."""
    conditions: list[Any] = [NodeRow.account_id == account_id, NodeRow.is_dir.is_(False)]
    if context_type is not None:
        conditions.append(NodeRow.context_type == context_type)
    if keys:
        conditions.append(or_(*(NodeRow.uri_key.startswith(k, autoescape=True) for k in keys)))
    if parent_uri is not None:
        conditions.append(NodeRow.parent_uri == str(ContextURI.parse(parent_uri).as_dir()))
    when = func.coalesce(NodeRow.occurred_at, NodeRow.created_at)
    if occurred_start is not None:
        conditions.append(when >= occurred_start)
    if occurred_end is not None:
        conditions.append(when < occurred_end)
    for key, wanted in (metadata_equals or {}).items():
        values = wanted if isinstance(wanted, list) else [wanted]
        conditions.append(or_(*(_json_equals(NodeRow.meta_json[key], v) for v in values)))
    return conditions


def _sequence_key(account_id: str, parent_uri: str) -> str:
    """The ``meta`` key of a directory's child-number counter (hashed: keys are at most 128 characters)."""
    return "seq:" + hashlib.sha1(f"{account_id}\x1f{ContextURI.parse(parent_uri).as_dir()}".encode()).hexdigest()


def _json_equals(element: Any, value: Any) -> Any:
    """A portable comparison of one JSON value (SQLite JSON_EXTRACT, PostgreSQL ->>) with a scalar."""
    if isinstance(value, bool):
        return element.as_boolean() == value
    if isinstance(value, int):
        return element.as_integer() == value
    if isinstance(value, float):
        return element.as_float() == value
    return element.as_string() == str(value)
