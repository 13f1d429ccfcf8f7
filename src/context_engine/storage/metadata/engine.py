"""The metadata database's engine (DESIGN.md §3, §13): one SQLAlchemy engine and connection pool per database and
process, its sessions and transactions, schema checks and upgrades (:mod:`.migrate`), error translation, and the
``meta`` key-value rows. :class:`SqlDatabase` is shared: the metadata store's role classes (:mod:`.node_rows`,
:mod:`.vector_rows`, :mod:`.journal_rows`) extend it, and the audit trail (:mod:`.audit`) and API keys
(:mod:`.keys`) run their statements through its :meth:`~SqlDatabase.session` and :meth:`~SqlDatabase.snapshot`.

Everything here is portable SQL on one code path; what differs between SQLite and PostgreSQL is in :mod:`.dialects`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Self

from sqlalchemy import Engine, create_engine, select
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.storage.metadata import dialects, migrate
from context_engine.storage.metadata.dialects import WRITE_OPTION
from context_engine.storage.metadata.hot_reads import HotRead
from context_engine.storage.metadata.migrate import SchemaStatus
from context_engine.storage.metadata.tables import META

_LOG = logging.getLogger(__name__)

__all__ = ["SqlDatabase", "shown_url"]


class SqlDatabase:
    """One metadata database: its engine, sessions, transactions, schema and ``meta`` rows (module docstring).

    Thread-safe: every call outside a transaction uses its own short session; :meth:`transaction` binds one session
    to the calling thread until it ends.

    Args: see :class:`~context_engine.storage.metadata.sqlalchemy_store.SqlMetadataStore`.

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
            shown = shown_url(parsed) if parsed is not None else "(unparsable)"
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                f"metadata.url: unusable metadata database URL {shown}: {type(err).__name__}",
                {"setting": "metadata.url", "error": type(err).__name__},
            ) from err
        if backend not in dialects.SUPPORTED:
            engine.dispose()
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                f"metadata.url: {shown_url(parsed)} is a {backend} database; use sqlite:///… or postgresql+psycopg://…",
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
    def sqlite(cls, path: Path, *, upgrade: bool = True) -> Self:
        """Open (or create) the embedded SQLite database at ``path``; its parent directory is created if needed.
        ``upgrade=False`` opens it as it is (see :meth:`__init__`)."""
        path = Path(path).expanduser().resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        return cls(URL.create("sqlite", database=str(path)).render_as_string(hide_password=False), upgrade=upgrade)

    @property
    def url(self) -> str:
        """The database URL with any password hidden."""
        return shown_url(self._engine.url)

    @property
    def dialect(self) -> str:
        """The database's backend name: ``sqlite`` or ``postgresql`` (:mod:`.dialects`)."""
        return self._engine.dialect.name

    # ---- sessions and transactions --------------------------------------------------------------------------------
    def _open_schema(self, upgrade: bool) -> SchemaStatus:
        """Connect (``CFG-4001`` when the database cannot be reached), refuse a newer schema, and with ``upgrade``
        bring it to the newest revision in one transaction (:mod:`.migrate`); a current schema is only read (no
        write lock: a read-only command opens the home while another process writes)."""
        try:
            conn = self._engine.connect()
        except SQLAlchemyError as err:
            raise self._unreachable(err) from err
        try:
            with conn:
                if upgrade:
                    # a schema that is current needs no write turn: a reader opening the home while another process
                    # writes must not wait for (or fail on) the write lock
                    with conn.begin():
                        found = migrate.read_status(conn)
                    found.refuse_newer(self.url)
                    if found.current:
                        return found
                conn = conn.execution_options(**{WRITE_OPTION: upgrade})
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
                conn = conn.execution_options(**{WRITE_OPTION: True})
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
        locked = (
            self.dialect == dialects.SQLITE and isinstance(err, OperationalError) and "database is locked" in reason
        )
        if locked or sqlstate == "55P03":  # PostgreSQL: lock_not_available (lock_timeout)
            # the busy wait ran out behind other writers: the store is sound and the caller may retry
            return ContextEngineError(
                ErrorCode.WRITE_BUSY,
                f"metadata store {operation}: the database stayed locked by other writers; retry",
                {"operation": operation, "waited_s": self._busy_timeout_s},
                retryable=True,
            )
        on_failure = getattr(self, "_on_failure", None)  # unset while the constructor runs
        if on_failure is not None:
            on_failure(operation)
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

    def session(self, *, write: bool, isolated: bool = False) -> AbstractContextManager[Session]:
        """A session on this database: the calling thread's :meth:`transaction` when one is open (joining it; in a
        savepoint with ``isolated``, see :meth:`_use`), else a new one that commits at the end (``write``; SQLite
        takes the write lock up front) or is discarded.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the database fails inside the block.
        """
        return self._use(write=write, isolated=isolated)

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
            session.connection(execution_options={WRITE_OPTION: True})
        except SQLAlchemyError as err:
            session.close()
            raise self._storage_error(err, "begin") from err
        local.session, local.depth, local.after, local.failed = session, 1, [], False
        try:
            yield
            if local.failed and self.dialect != dialects.SQLITE:
                # a statement failed inside and its error was caught: PostgreSQL aborted the transaction, and
                # COMMIT would roll it back without a word (SQLite goes on without the failed statement)
                raise ContextEngineError(
                    ErrorCode.STORAGE_FAILED,
                    "metadata store commit failed: a statement failed earlier in this transaction and the database "
                    "aborted it; nothing was written",
                    {"operation": "commit"},
                    retryable=True,
                )
            session.commit()
        except SQLAlchemyError as err:
            session.rollback()
            raise self._storage_error(err, "commit") from err
        except BaseException:
            session.rollback()
            raise
        finally:
            local.session = None
            after, local.after = local.after, []
            session.close()
        _run_after_commit(after)

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once this thread's :meth:`transaction` has committed, or at once outside one; never when the
        transaction rolls back. For caches of what a write commits: a cache updated before the commit could keep
        what a rollback undid (and a later write may reuse its generation number).

        ``fn`` runs on this thread after the commit, in the order registered; an exception from it is logged, not
        raised (the write is committed: the caller must not see it fail)."""
        if getattr(self._local, "session", None) is None:
            _run_after_commit([fn])
        else:
            self._local.after.append(fn)

    @contextmanager
    def _use(self, *, write: bool, isolated: bool = False) -> Iterator[Session]:
        """The thread's transaction session, or a new one committed (write) or discarded (read) at the end.

        ``isolated``: inside the thread's transaction, the block runs in a savepoint, so that its failure undoes
        only its own statements and leaves the transaction usable, for a call whose failure the caller may catch
        and go on from (the hint index's update after a write, ``audit.replace_hint_docs``). Without it, a failed
        statement on PostgreSQL aborts the whole transaction: its ``COMMIT`` would then roll everything back
        without an error (a helper's review lost a node that way), so :meth:`transaction` raises instead."""
        self._check_open()
        current: Session | None = getattr(self._local, "session", None)
        try:
            if current is not None:
                try:
                    if isolated:
                        with current.begin_nested():
                            yield current
                    else:
                        yield current
                    current.flush()
                except SQLAlchemyError:
                    if not isolated:
                        self._local.failed = True
                    raise
                current.expunge_all()  # later bulk statements must never meet stale identity-map objects
                return
            with self._sessions() as session:
                if write:
                    session.connection(execution_options={WRITE_OPTION: True})
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
                try:
                    current.flush()
                    yield current
                except SQLAlchemyError:
                    self._local.failed = True  # see _use: the transaction may be aborted
                    raise
                return
            with self._engine.connect() as conn:
                yield conn
        except SQLAlchemyError as err:
            raise self._storage_error(err, "read") from err

    def _hot_rows(
        self, read: HotRead, params: dict[str, Any], keys: Sequence[Any] | None = None
    ) -> list[tuple[Any, ...]] | None:
        """The rows of a :class:`~context_engine.storage.metadata.hot_reads.HotRead` (committed data, one
        statement per ``IN`` chunk), or ``None`` inside this thread's transaction, whose uncommitted writes only its
        session sees: the caller then reads through :meth:`_read`.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the database fails.
        """
        self._check_open()
        if getattr(self._local, "session", None) is not None:
            return None
        try:
            return read.rows(self._engine, params, keys)
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

    def _upsert(self, table: Any, keys: Sequence[str], keep: Sequence[str] = ()) -> Any:
        """``INSERT ... ON CONFLICT (keys) DO UPDATE`` of every column but ``keys`` and ``keep``, for this dialect."""
        return dialects.upsert(self.dialect, table, keys, keep)

    def _insert_ignore(self, table: Any) -> Any:
        """``INSERT ... ON CONFLICT DO NOTHING`` for this dialect (the generation row may be created concurrently)."""
        return dialects.insert_ignore(self.dialect, table)

    # ---- meta -----------------------------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """The value stored under ``key``, or ``None``."""
        with self._use(write=False) as s:
            return s.execute(select(META.c.value).where(META.c.key == key)).scalar()

    def ensure_meta(self, key: str, value: str) -> str:
        """The value under ``key``, storing ``value`` first when there is none: whoever writes first wins, also
        between processes starting together, and every caller gets that value (a read only, once it exists)."""
        found = self.get_meta(key)
        if found is not None:
            return found
        with self._use(write=True) as s:
            s.execute(self._insert_ignore(META).values(key=key, value=value))
        found = self.get_meta(key)
        return value if found is None else found

    def set_meta(self, key: str, value: str) -> None:
        """Store ``value`` under ``key`` (insert or replace, atomic also against a concurrent first write)."""
        with self._use(write=True) as s:
            s.execute(self._upsert(META, ["key"]).values(key=key, value=value))

    def close(self) -> None:
        """Release every connection and lock. Idempotent; later calls raise ``WRT-5001`` (not retryable)."""
        if not self._closed:
            self._closed = True
            if self._writers is not None:
                self._writers.close()
            self._engine.dispose()


def shown_url(url: URL) -> str:
    """``url`` for messages: the password hidden, also one given as a ``password`` query parameter."""
    if "password" in url.query:
        url = url.update_query_dict({"password": "***"})
    return url.render_as_string(hide_password=True)


def _run_after_commit(callbacks: Sequence[Callable[[], None]]) -> None:
    for fn in callbacks:
        try:
            fn()
        except Exception:  # noqa: BLE001 - the write is committed; a cache's failure must not fail it
            _LOG.exception("a callback after a committed transaction failed")
