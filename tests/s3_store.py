"""The S3 endpoint of ``scripts/services/seaweedfs.sh`` for tests (issue 13): content settings on a fresh key prefix
per test, and the removal of that prefix afterwards. Tests that call these skip when the service is not running."""

from __future__ import annotations

import uuid
from typing import Any

from tests.services import require_service


def s3_content_settings(label: str = "t") -> dict[str, Any]:
    """``content`` settings (a dict for ``Settings(content=...)``) on ``s3://<bucket>/<label>-<random>``: a prefix no
    other test uses. Skips the test when seaweedfs is not running."""
    endpoint = require_service("CE_TEST_S3_ENDPOINT", "seaweedfs")
    bucket = require_service("CE_TEST_S3_BUCKET", "seaweedfs")
    return {
        "url": f"s3://{bucket}/{label}-{uuid.uuid4().hex[:12]}",
        "s3_endpoint": endpoint,
        "s3_access_key_id": require_service("CE_TEST_S3_ACCESS_KEY_ID", "seaweedfs"),
        "s3_secret_access_key": require_service("CE_TEST_S3_SECRET_ACCESS_KEY", "seaweedfs"),
    }


def drop_prefix(content: dict[str, Any]) -> None:
    """Delete every object under the prefix of ``content`` (the settings from :func:`s3_content_settings`)."""
    from context_engine.settings import Settings
    from context_engine.storage.factory import open_content

    store = open_content(Settings(content=content))
    keys = store._list(store._base)
    store._delete(keys)


def s3_keys(store: Any, under: str = "") -> list[str]:
    """Every key of an S3 content store below its prefix (+ ``under``), relative to the prefix, sorted."""
    base = store._base
    return [k[len(base) :] for k in store._list(base + under)]
