"""The revisions, oldest first: ``0001`` is the version-4 schema (issue 13), the first one under Alembic."""
