"""Alembic migrations of the metadata database (run by :mod:`context_engine.storage.metadata.migrate`).

``env.py`` runs them on the connection the runner passes in ``config.attributes["connection"]``, inside the runner's
transaction. ``versions/`` holds one script per revision; their chain is the schema's history.
"""
