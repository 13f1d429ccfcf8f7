"""Alembic's environment for the metadata database (:mod:`context_engine.storage.metadata.migrate`).

The runner passes an open connection, already inside a transaction that holds the migration lock, in
``config.attributes["connection"]``; every revision runs in that one transaction. A developer writing a new revision
can also point Alembic at a database by URL (``sqlalchemy.url``), e.g. to autogenerate a draft from the models::

    from alembic import command
    from context_engine.storage.metadata.migrate import alembic_config
    command.revision(alembic_config("sqlite:////tmp/draft.db"), "what changed", autogenerate=True)
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool
from sqlalchemy.engine import Connection

from context_engine.storage.metadata.migrate import target_metadata

config = context.config


def _run(connection: Connection, *, with_models: bool) -> None:
    context.configure(
        connection=connection,
        # the models only for a developer's autogenerate: upgrades run the scripts alone (and start faster)
        target_metadata=target_metadata() if with_models else None,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters a table by copying it
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


given = config.attributes.get("connection")
if given is not None:
    _run(given, with_models=False)
else:
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "", poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn, with_models=True)
    engine.dispose()
