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
