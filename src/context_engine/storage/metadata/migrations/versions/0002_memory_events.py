"""The memory event history (issue 29): the ``memory_events`` table, schema version 5.

One row per change of a memory (``ADD``, ``UPDATE``, ``DELETE``), written in the transaction of the write that made it
(:mod:`context_engine.ingest.memory_events`). Memories written before this revision have no row until they change.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-04
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 5  # the schema_version row this revision leaves (read by releases before Alembic: they refuse it)

_UTC = sa.DateTime(timezone=True)  # the store normalises every timestamp to UTC


def upgrade() -> None:
    create: dict[str, Any] = {"if_not_exists": True}
    op.create_table(
        "memory_events",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("owner_space", sa.String(320), nullable=False),
        sa.Column("uri", sa.String(1024), nullable=False),
        sa.Column("uri_key", sa.String(1024), nullable=False),
        sa.Column("event", sa.String(8), nullable=False),
        sa.Column("category", sa.Text(), nullable=True),
        sa.Column("version_before", sa.Integer(), nullable=True),
        sa.Column("version_after", sa.Integer(), nullable=True),
        sa.Column("abstract_before", sa.Text(), nullable=True),
        sa.Column("abstract_after", sa.Text(), nullable=True),
        sa.Column("created_at", _UTC, nullable=False),
        **create,
    )
    op.create_index("ix_memory_events_account_space", "memory_events", ["account_id", "owner_space", "seq"], **create)
    op.create_index("ix_memory_events_account_uri", "memory_events", ["account_id", "uri_key", "seq"], **create)
    op.get_bind().execute(sa.text("UPDATE schema_version SET version = :v WHERE version < :v"), {"v": SCHEMA_VERSION})


def downgrade() -> None:
    """Back to revision 0001: the event history is dropped (the memories stay)."""
    op.drop_table("memory_events", if_exists=True)
    op.get_bind().execute(sa.text("UPDATE schema_version SET version = 4"))
