"""Schema migrations of the metadata database with Alembic, on SQLite and PostgreSQL (issue 13; docs/deployment.md).

:class:`~context_engine.storage.metadata.sqlalchemy_store.SqlMetadataStore` brings its database to the newest
revision when it opens it (a new database is created on first start); ``context-engine migrate`` does the same on
demand, and ``migrate --check`` only reports. The scripts are in :mod:`context_engine.storage.metadata.migrations`.

Releases before Alembic (schema versions 1 to 4) stamped a one-row ``schema_version`` table and upgraded in place.
That table stays: those releases read it, so a database migrated past their schema is refused by them (each revision
that changes the schema raises :data:`SCHEMA_VERSION`). Revision ``0001`` is version 4; on a database written by
such a release it first adds what the older versions lacked, then takes the database under Alembic.

Whether a database is current is read with plain SQL from two small tables, so opening a current database imports
no Alembic (the CLI's cold start); Alembic is imported only to upgrade. Upgrades run in one transaction that holds
the migration lock (PostgreSQL: an advisory lock; SQLite: the write lock), so replicas starting together on an empty
database create it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.storage.metadata.dialects import xact_lock

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import MetaData

__all__ = ["HEAD", "REVISIONS", "SCHEMA_VERSION", "SchemaStatus", "alembic_config", "ensure_current", "read_status"]

HEAD = "0005"
"""The newest revision this release knows: what a database is upgraded to."""

REVISIONS = ("0001", "0002", "0003", "0004", "0005")
"""Every revision of this release, oldest first (a test checks it against ``migrations/versions``). A database at a
revision not listed here was migrated by a newer release and is refused."""

SCHEMA_VERSION = 7
"""The ``schema_version`` row written at :data:`HEAD`, read by releases before Alembic (see the module docstring).

Version 2 (issue 11) added ``nodes.occurred_at``, ``nodes.metadata_json``, ``nodes.version``, ``vectors.context``
and the ``node_versions`` table; version 3 (issue 12) the ``index_generations`` and ``index_changes`` tables;
version 4 (issue 14) the ``principal`` of ``tool_invocations`` and ``retrieved_docs`` and the ``write_journal``
table (revision ``0001``); version 5 (issue 29) the ``memory_events`` table (revision ``0002``). Revision
``0003`` (issue 26) changes an index only and leaves the row at 5; version 6 (issue 26) the
``knowledge_hint_changes`` table (revision ``0004``); version 7 the ``token`` of ``index_generations`` and
``index_changes`` and the ``log_floor_token`` of ``index_generations`` (revision ``0005``: a random token per account
generation, docs/derived_indexes.md)."""

_LEGACY_MAX = 4  # the last schema version written before Alembic: a lower row means a pre-Alembic release wrote it
_VERSION_TABLE = "alembic_version"
_SCRIPTS = "context_engine.storage.metadata:migrations"


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """Where a metadata database stands.

    Attributes:
        revision: its Alembic revision; ``None`` for an empty database or one written before Alembic.
        schema_version: its ``schema_version`` row (see the module docstring), ``None`` when absent.
        head: the revision this release upgrades to (:data:`HEAD`).
    """

    revision: str | None
    schema_version: int | None
    head: str = HEAD

    @property
    def newer(self) -> bool:
        """Written by a newer release: this one must not touch it."""
        if self.schema_version is not None and self.schema_version > SCHEMA_VERSION:
            return True
        return self.revision is not None and self.revision not in REVISIONS

    @property
    def current(self) -> bool:
        """At :data:`HEAD`: nothing to upgrade."""
        return self.revision == HEAD and self.schema_version == SCHEMA_VERSION

    def refuse_newer(self, shown_url: str) -> None:
        """Raise ``CFG-4001`` (upgrade context-engine) when the database is :attr:`newer` than this release."""
        if self.schema_version is not None and self.schema_version > SCHEMA_VERSION:
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                f"metadata database {shown_url} has schema version {self.schema_version}, newer than "
                f"{SCHEMA_VERSION} that this version of context-engine understands; upgrade context-engine",
                {"setting": "metadata.url", "found": self.schema_version, "supported": SCHEMA_VERSION},
            )
        if self.newer:
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                f"metadata database {shown_url} is at schema revision {self.revision!r}, which this version of "
                f"context-engine does not know (its newest is {HEAD!r}): it was migrated by a newer release; "
                "upgrade context-engine",
                {"setting": "metadata.url", "found_revision": self.revision, "head": HEAD},
            )


def read_status(conn: Connection) -> SchemaStatus:
    """The database's :class:`SchemaStatus`, read with plain SQL (no Alembic import)."""
    inspector = inspect(conn)
    revision = version = None
    if inspector.has_table(_VERSION_TABLE):
        revision = conn.execute(text(f"SELECT version_num FROM {_VERSION_TABLE}")).scalar()
    if inspector.has_table("schema_version"):
        version = conn.execute(text("SELECT MAX(version) FROM schema_version")).scalar()
    return SchemaStatus(revision, None if version is None else int(version))


def ensure_current(conn: Connection, shown_url: str) -> tuple[SchemaStatus, SchemaStatus]:
    """Inside a write transaction on ``conn``: upgrade the database to :data:`HEAD` unless it is there already.

    Args:
        conn: a connection inside a write transaction (SQLite: ``BEGIN IMMEDIATE``); the caller commits it.
        shown_url: the database URL with its password hidden, for messages.

    Returns:
        ``(before, after)``: the status found and the status left (equal when nothing was done).

    Raises:
        ContextEngineError: ``CFG-4001`` when the database was migrated by a newer release.
        sqlalchemy.exc.SQLAlchemyError: on a database failure (the caller translates it).
    """
    before = read_status(conn)
    before.refuse_newer(shown_url)
    if before.current:
        return before, before
    xact_lock(conn, "migrate")  # replicas starting together: one migrates, the others wait and find it done
    before = read_status(conn)
    before.refuse_newer(shown_url)
    if before.current:
        return before, before
    if before.revision is not None and (before.schema_version or 0) < _LEGACY_MAX:
        # last written by a release before Alembic (or its marker lost): 0001 runs again, adding what is missing
        conn.execute(text(f"DROP TABLE {_VERSION_TABLE}"))
    from alembic import command

    config = alembic_config()
    config.attributes["connection"] = conn
    command.upgrade(config, "head")
    return before, read_status(conn)


def alembic_config(url: str | None = None) -> Config:
    """An Alembic ``Config`` for this package's scripts (no ``alembic.ini``); ``url`` for Alembic's own commands
    run by a developer (see ``migrations/env.py``)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", _SCRIPTS)
    if url:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))  # ConfigParser interpolation
    return config


def target_metadata() -> MetaData:
    """Every table of the metadata database (the models of the store, the audit tables and the API keys): what
    autogenerate compares a database with."""
    from context_engine.storage.metadata.tables import Base  # every table of the database is declared there

    return Base.metadata
