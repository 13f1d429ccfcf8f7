"""The metadata store on SQLAlchemy 2: SQLite (WAL) embedded, PostgreSQL by URL (DESIGN.md §3, §13; issue 13).

:class:`SqlMetadataStore` is the union of its roles, each in its own module over one engine
(:class:`~.engine.SqlDatabase`) and one set of tables (:mod:`.tables`): nodes (:mod:`.node_rows`), vector rows and
the change feed (:mod:`.vector_rows`), the write journal and writer locks (:mod:`.journal_rows`), and ``meta``
(:mod:`.engine`). What differs between the two databases is in :mod:`.dialects` (engine options, SQLite's explicit
``BEGIN`` / ``BEGIN IMMEDIATE``, snapshot isolation, ``ON CONFLICT``, advisory locks) and :mod:`.writer_locks`
(writer liveness). The schema is created and upgraded by Alembic (:mod:`.migrate`).

Ordering is done in Python (code-point order of ``str``), never by ``ORDER BY`` on text, because a PostgreSQL
database with a locale collation sorts differently from SQLite; results are therefore identical on both.
"""

from __future__ import annotations

from context_engine.storage.metadata.journal_rows import JournalRows
from context_engine.storage.metadata.migrate import SCHEMA_VERSION
from context_engine.storage.metadata.node_rows import NodeRows
from context_engine.storage.metadata.vector_rows import LOG_RETAIN, VectorRows

__all__ = ["LOG_RETAIN", "SCHEMA_VERSION", "SqlMetadataStore"]


class SqlMetadataStore(NodeRows, VectorRows, JournalRows):
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

    def __repr__(self) -> str:
        return f"SqlMetadataStore({self.url!r})"
