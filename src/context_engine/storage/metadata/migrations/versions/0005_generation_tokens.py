"""A random token per account generation (docs/derived_indexes.md): ``token`` on ``index_generations`` and
``index_changes``, ``log_floor_token`` on ``index_generations``; schema version 7.

Every bump of an account generation (``storage/metadata/vector_rows.py``, ``_log_changes``) sets a fresh token on
the account's row and on the change-log rows it writes: a derived index (the level-0 matrix, BM25, their files)
counts as the state of a generation only with its token, so a database restored from a backup (or a PostgreSQL
failover) that later writes carry back to the same number, or past it, is told apart from the history it lost.
The columns are nullable and existing rows keep NULL: a derived file written before this revision holds no token
either, and a NULL token matches a missing one, so an upgrade reloads nothing.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 7  # the schema_version row this revision leaves (read by releases before Alembic: they refuse it)

_ADDED = (
    ("index_generations", "token"),
    ("index_generations", "log_floor_token"),
    ("index_changes", "token"),
)


def _columns(table: str) -> set[str]:
    return {c["name"] for c in sa.inspect(op.get_bind()).get_columns(table)}


def upgrade() -> None:
    # checked first: revision 0001 runs again on a database a release before Alembic wrote (migrate.py), and the
    # tables may already have the columns then
    for table, column in _ADDED:
        if column not in _columns(table):
            op.add_column(table, sa.Column(column, sa.String(32), nullable=True))
    op.get_bind().execute(sa.text("UPDATE schema_version SET version = :v WHERE version < :v"), {"v": SCHEMA_VERSION})


def downgrade() -> None:
    """Back to revision 0004: the tokens are dropped (derived indexes then compare generation numbers alone)."""
    for table in ("index_generations", "index_changes"):
        present = _columns(table)
        with op.batch_alter_table(table) as batch:
            for name, column in _ADDED:
                if name == table and column in present:
                    batch.drop_column(column)
    op.get_bind().execute(sa.text("UPDATE schema_version SET version = 6"))
