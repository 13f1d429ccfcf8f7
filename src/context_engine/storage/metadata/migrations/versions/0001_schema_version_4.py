"""The schema at version 4 (issues 11, 12, 14): the first revision under Alembic.

On an empty database it creates every table. On a database written by a release before Alembic (schema versions 1
to 4, upgraded in place by those releases) it first adds what the older versions lacked, then creates the missing
tables and indexes (``IF NOT EXISTS``): version 1 lacked the memory columns of ``nodes`` and ``vectors``; version 3
the ``principal`` of ``tool_invocations`` (filled from each row's ``caller``) and of ``retrieved_docs`` (a ledger of
expiring marks: recreated empty, so at worst a document is returned once more in a session open during the upgrade).

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SCHEMA_VERSION = 4  # the schema_version row this revision leaves (read by releases before Alembic)

_UTC = sa.DateTime(timezone=True)  # the store normalises every timestamp to UTC
_JSONB = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")  # the audit tables' JSON (binary on PostgreSQL)


def _id() -> sa.Column[Any]:
    return sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True)


def upgrade() -> None:
    _upgrade_pre_alembic_tables()
    create: dict[str, Any] = {"if_not_exists": True}
    op.create_table(
        "nodes",
        _id(),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("uri", sa.String(1024), nullable=False),
        sa.Column("uri_key", sa.String(1024), nullable=False),
        sa.Column("parent_uri", sa.String(1024), nullable=True),
        sa.Column("owner_space", sa.String(320), nullable=False),
        sa.Column("context_type", sa.String(16), nullable=True),
        sa.Column("category", sa.Text(), nullable=True),
        sa.Column("is_dir", sa.Boolean(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("has_overview", sa.Boolean(), nullable=False),
        sa.Column("has_content", sa.Boolean(), nullable=False),
        sa.Column("content_hash", sa.String(128), nullable=True),
        sa.Column("index_status", sa.String(16), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("updated_at", _UTC, nullable=False),
        sa.Column("occurred_at", _UTC, nullable=True),
        sa.Column("metadata_json", sa.JSON(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.UniqueConstraint("account_id", "uri_key", name="uq_nodes_account_uri_key"),
        **create,
    )
    op.create_index("ix_nodes_account_parent", "nodes", ["account_id", "parent_uri"], **create)
    op.create_index("ix_nodes_index_status", "nodes", ["index_status"], **create)
    op.create_index("ix_nodes_account_hash", "nodes", ["account_id", "content_hash"], **create)
    op.create_table(
        "node_versions",
        _id(),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("uri_key", sa.String(1024), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("replaced_at", _UTC, nullable=False),
        sa.UniqueConstraint("account_id", "uri_key", "version", name="uq_node_versions"),
        **create,
    )
    op.create_table(
        "relations",
        _id(),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("from_uri", sa.String(1024), nullable=False),
        sa.Column("to_uri", sa.String(1024), nullable=False),
        sa.Column("relation_type", sa.String(128), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.UniqueConstraint("account_id", "from_uri", "to_uri", "relation_type", name="uq_relations_edge"),
        **create,
    )
    op.create_index("ix_relations_account_to", "relations", ["account_id", "to_uri"], **create)
    op.create_table(
        "vectors",
        sa.Column("id", sa.String(1536), primary_key=True),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("uri", sa.String(1024), nullable=False),
        sa.Column("parent_uri", sa.String(1024), nullable=True),
        sa.Column("owner_space", sa.String(320), nullable=False),
        sa.Column("context_type", sa.String(16), nullable=False),
        sa.Column("category", sa.Text(), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("doc_id", sa.Text(), nullable=False),
        sa.Column("chunk_index", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("breadcrumb", sa.Text(), nullable=False),
        sa.Column("context", sa.Text(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        **create,
    )
    op.create_index("ix_vectors_account_id", "vectors", ["account_id"], **create)
    op.create_index("ix_vectors_account_uri", "vectors", ["account_id", "uri"], **create)
    op.create_table(
        "index_generations",
        sa.Column("account_id", sa.String(64), primary_key=True),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("log_floor", sa.BigInteger(), nullable=False),
        **create,
    )
    op.create_table(
        "index_changes",
        _id(),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("vector_id", sa.String(1536), nullable=False),
        **create,
    )
    op.create_index("ix_index_changes_account_generation", "index_changes", ["account_id", "generation"], **create)
    op.create_table(
        "write_journal",
        _id(),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("op", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(64), nullable=True),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        **create,
    )
    op.create_table(
        "meta",
        sa.Column("key", sa.String(128), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
        **create,
    )
    op.create_table(
        "schema_version",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("version", sa.Integer(), nullable=False),
        **create,
    )
    op.create_table(
        "tool_invocations",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("invocation_id", sa.String(64), nullable=False),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("principal", sa.String(700), nullable=False),
        sa.Column("session_id", sa.String(256), nullable=True),
        sa.Column("tool_name", sa.String(64), nullable=False),
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("caller", _JSONB, nullable=False),
        sa.Column("input_params", _JSONB, nullable=False),
        sa.Column("retrieval_layer", sa.String(32), nullable=False),
        sa.Column("l0_match_count", sa.Integer(), nullable=False),
        sa.Column("l1_match_count", sa.Integer(), nullable=False),
        sa.Column("retrieval_details", _JSONB, nullable=False),
        sa.Column("relevance_level", sa.String(32), nullable=False),
        sa.Column("dedup_reason", sa.Text(), nullable=True),
        sa.Column("output_preview", sa.Text(), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column("error_code", sa.String(16), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.UniqueConstraint("invocation_id", name="uq_tool_invocations_id"),
        **create,
    )
    for name, columns in (
        ("ix_tool_invocations_account_session", ["account_id", "session_id", "created_at"]),
        ("ix_tool_invocations_account_time", ["account_id", "created_at"]),
        ("ix_tool_invocations_account_tool", ["account_id", "tool_name", "created_at"]),
        ("ix_tool_invocations_account_principal", ["account_id", "principal", "created_at"]),
    ):
        op.create_index(name, "tool_invocations", columns, **create)
    op.create_table(
        "retrieved_docs",
        _id(),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("principal", sa.String(700), nullable=False),
        sa.Column("session_id", sa.String(256), nullable=False),
        sa.Column("doc_key", sa.String(1024), nullable=False),
        sa.Column("invocation_id", sa.String(64), nullable=False),
        sa.Column("retrieved_at", _UTC, nullable=False),
        sa.Column("expires_at", _UTC, nullable=False),
        sa.UniqueConstraint("account_id", "principal", "session_id", "doc_key", name="uq_retrieved_docs_principal_key"),
        **create,
    )
    op.create_index("ix_retrieved_docs_expires", "retrieved_docs", ["expires_at"], **create)
    op.create_table(
        "knowledge_hint_docs",
        _id(),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("uri", sa.String(1024), nullable=False),
        sa.Column("parent_uri", sa.String(1024), nullable=True),
        sa.Column("owner_space", sa.String(320), nullable=False),
        sa.Column("context_type", sa.String(16), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("domain", sa.String(128), nullable=True),
        sa.Column("title_words", _JSONB, nullable=False),
        sa.UniqueConstraint("account_id", "uri", name="uq_knowledge_hint_docs_uri"),
        **create,
    )
    op.create_table(
        "knowledge_hint_terms",
        _id(),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("uri", sa.String(1024), nullable=False),
        sa.Column("term", sa.String(512), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        **create,
    )
    op.create_index("ix_knowledge_hint_terms_account_uri", "knowledge_hint_terms", ["account_id", "uri"], **create)
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(16), primary_key=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("user_space", sa.String(320), nullable=True),
        sa.Column("agent_space", sa.String(320), nullable=True),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("last_used_at", _UTC, nullable=True),
        sa.Column("revoked_at", _UTC, nullable=True),
        **create,
    )
    op.create_index("ix_api_keys_account", "api_keys", ["account_id"], **create)
    _stamp_schema_version()


def downgrade() -> None:
    """Back to an empty database: every table of the schema is dropped (and with it every row)."""
    for table in (
        "api_keys",
        "knowledge_hint_terms",
        "knowledge_hint_docs",
        "retrieved_docs",
        "tool_invocations",
        "schema_version",
        "meta",
        "write_journal",
        "index_changes",
        "index_generations",
        "vectors",
        "relations",
        "node_versions",
        "nodes",
    ):
        op.drop_table(table, if_exists=True)


# ---- databases written before Alembic ---------------------------------------------------------------------------
def _columns(table: str) -> set[str] | None:
    """The column names of ``table``, or ``None`` when it does not exist."""
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table(table):
        return None
    return {c["name"] for c in inspector.get_columns(table)}


def _upgrade_pre_alembic_tables() -> None:
    """Versions 1 to 3 to 4, in place: the columns added after version 1, the principals of version 4."""
    for table, column in (
        ("nodes", sa.Column("occurred_at", _UTC, nullable=True)),
        ("nodes", sa.Column("metadata_json", sa.JSON(), nullable=True)),
        ("nodes", sa.Column("version", sa.Integer(), nullable=False, server_default="1")),
        ("vectors", sa.Column("context", sa.Text(), nullable=False, server_default="")),
    ):
        present = _columns(table)
        if present is not None and column.name not in present:
            op.add_column(table, column)
    present = _columns("tool_invocations")
    if present is not None and "principal" not in present:
        op.add_column("tool_invocations", sa.Column("principal", sa.String(700), nullable=False, server_default=""))
        _fill_principals()
    present = _columns("retrieved_docs")
    if present is not None and "principal" not in present:
        op.drop_table("retrieved_docs")  # expiring marks only: created again, empty, below


def _fill_principals() -> None:
    """``principal`` of every invocation from its ``caller`` record: ``role:user_space:agent_space`` (as
    :func:`context_engine.schema.context.principal_of` wrote it at version 4)."""
    bind = op.get_bind()
    table = sa.table("tool_invocations", sa.column("seq", sa.Integer()), sa.column("caller", sa.JSON()))
    rows = []
    for seq, caller in bind.execute(sa.select(table.c.seq, table.c.caller)):
        record = caller if isinstance(caller, dict) else json.loads(caller or "{}")
        principal = f"{record.get('role', '')}:{record.get('user_space') or ''}:{record.get('agent_space') or ''}"
        rows.append({"b_seq": seq, "b_principal": principal})
    if rows:  # one executemany
        update = sa.table("tool_invocations", sa.column("seq"), sa.column("principal"))
        stmt = update.update().where(update.c.seq == sa.bindparam("b_seq"))
        bind.execute(stmt.values(principal=sa.bindparam("b_principal")), rows)


def _stamp_schema_version() -> None:
    bind = op.get_bind()
    found = bind.execute(sa.text("SELECT MAX(version) FROM schema_version")).scalar()
    if found is None:
        bind.execute(sa.text("INSERT INTO schema_version (id, version) VALUES (1, :v)"), {"v": SCHEMA_VERSION})
    elif found < SCHEMA_VERSION:
        bind.execute(sa.text("UPDATE schema_version SET version = :v"), {"v": SCHEMA_VERSION})
