"""A directory's children in URI order from one index (issue 26: a write's cost independent of the store's size).

``ix_nodes_account_parent`` (``account_id, parent_uri``) becomes ``ix_nodes_account_parent_key`` (``account_id,
parent_uri, uri_key``). The bounded window of a directory's children that every write reads for its directory
summaries and its conversation tail (``children_window``: the first and last N children by URI) was planned by SQLite
as a walk of the account's whole ``(account_id, uri_key)`` index in key order, filtered by parent: 36 ms per window
at 100,000 memories, a third of a batch of 100 messages. With the parent and the key in one index it reads the N
rows it returns. The new index starts with the old one's columns, so every query that used the old one uses it.

An index only: no table or column changes, so the ``schema_version`` row stays at 5 (releases before Alembic read
the tables, not the indexes).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_nodes_account_parent_key", "nodes", ["account_id", "parent_uri", "uri_key"], if_not_exists=True
    )
    op.drop_index("ix_nodes_account_parent", table_name="nodes", if_exists=True)


def downgrade() -> None:
    """Back to revision 0002: the parent index without the key."""
    op.create_index("ix_nodes_account_parent", "nodes", ["account_id", "parent_uri"], if_not_exists=True)
    op.drop_index("ix_nodes_account_parent_key", table_name="nodes", if_exists=True)
