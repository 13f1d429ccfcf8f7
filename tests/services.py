"""Where the scale-out services of ``scripts/services.sh`` are (issue 13): ``CE_TEST_*`` variables from the
environment, else from the ``.services/*.env`` files the script writes. A test that needs one and finds nothing
skips, naming the command that starts it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[1]
_EXPORT = re.compile(r"^export\s+([A-Z0-9_]+)=(.*)$")


def service_var(name: str) -> str | None:
    """The value of ``name`` (e.g. ``CE_TEST_POSTGRES_URL``), or ``None`` when that service is not up."""
    if os.environ.get(name):
        return os.environ[name]
    for env_file in sorted((_ROOT / ".services").glob("*.env")):
        for line in env_file.read_text().splitlines():
            m = _EXPORT.match(line.strip())
            if m and m.group(1) == name:
                return m.group(2).strip().strip("'\"")
    return None


def require_service(name: str, service: str) -> str:
    """The value of ``name``, or skip the test: the service is not running."""
    value = service_var(name)
    if not value:
        pytest.skip(f"{service} is not running: start it with `bash scripts/services.sh up {service}` ({name} unset)")
    return value


def scale_out_settings(name: str) -> dict:
    """Settings overrides that put an engine on all three scale-out stores (PostgreSQL, S3, Milvus Lite), each in a
    fresh namespace called ``name`` (a database, a key prefix, a collection prefix), or skip when a service is absent.

    The database is created here; it stays on the throwaway test server (``scripts/services.sh down`` removes it).
    """
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from tests.s3_store import s3_content_settings

    pg = make_url(require_service("CE_TEST_POSTGRES_URL", "postgres"))
    content = s3_content_settings(name)
    milvus = require_service("CE_TEST_MILVUS_URI", "milvus")
    admin = create_engine(pg, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return {
        "metadata": {"url": pg.set(database=name).render_as_string(hide_password=False)},
        "content": content,
        # Milvus Lite is one Python process serving every test: give it time when the suite loads the machine
        "vector": {"backend": "milvus", "milvus": {"uri": milvus, "collection_prefix": name, "timeout_s": 60}},
    }


def settings_env(overrides: dict, prefix: str = "CE_") -> dict[str, str]:
    """The same overrides as ``CE_*`` environment variables (``__`` nesting), for a child process (serve, the CLI)."""
    env: dict[str, str] = {}
    for key, value in overrides.items():
        if isinstance(value, dict):
            env.update(settings_env(value, f"{prefix}{key.upper()}__"))
        elif value is not None:
            env[f"{prefix}{key.upper()}"] = str(value)
    return env
