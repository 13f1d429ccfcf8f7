"""A fresh PostgreSQL database per test on the server of ``scripts/services.sh`` (``CE_TEST_POSTGRES_URL``), or a skip
naming the command that starts it (tests/services.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, pool, text
from sqlalchemy.engine import make_url

from tests.services import require_service

POSTGRES_URL = "CE_TEST_POSTGRES_URL"


@contextmanager
def fresh_postgres_database() -> Iterator[str]:
    """The URL of a new, empty database on the test server, dropped (with its sessions) at the end.

    Skips the test when the server is not running. The role of ``CE_TEST_POSTGRES_URL`` needs ``CREATEDB``.
    """
    base = make_url(require_service(POSTGRES_URL, "postgres"))
    name = f"ce_test_{uuid.uuid4().hex[:16]}"
    admin = create_engine(base, poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield base.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
