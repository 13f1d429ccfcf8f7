"""The hint index's change log (issue 26): the ``knowledge_hint_changes`` table, schema version 6.

One row per document a change of an account's hint generation replaced or dropped, with the term rows it had before,
written in the transaction of that change (``storage/metadata/audit.py``, ``replace_hint_docs``). A process whose
compiled hint index is behind applies the changes since its generation instead of reloading the account (13 s at
1,000,000 nodes). Databases upgraded to this revision start with an empty log: a process behind it reloads once.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 6  # the schema_version row this revision leaves (read by releases before Alembic: they refuse it)

_JSONB = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "knowledge_hint_changes",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("account_id", sa.String(64), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("uri", sa.String(1024), nullable=True),
        sa.Column("removed_terms", _JSONB, nullable=True),
        sa.Column("token", sa.String(32), nullable=False),
        if_not_exists=True,
    )
    op.create_index(
        "ix_knowledge_hint_changes_account_generation",
        "knowledge_hint_changes",
        ["account_id", "generation"],
        if_not_exists=True,
    )
    op.get_bind().execute(sa.text("UPDATE schema_version SET version = :v WHERE version < :v"), {"v": SCHEMA_VERSION})


def downgrade() -> None:
    """Back to revision 0003: the change log is dropped (a process behind then reloads, as before)."""
    op.drop_table("knowledge_hint_changes", if_exists=True)
    op.get_bind().execute(sa.text("UPDATE schema_version SET version = 5"))
