"""A secret in a memory's metadata (an attack pass, 2026-12-07): the metadata is stored as the caller gave it, and
came back verbatim from the Python API and the CLI (only the HTTP and MCP last pass hid it). list_memories and
get_memory now redact every string of it by the patterns, as they redact the memory's text."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from context_engine.interfaces.cli.app import app
from context_engine.schema.context import RequestContext
from context_engine.settings import load_settings

pytestmark = pytest.mark.slow

CAROL = RequestContext(account_id="acme", role="user", user_space="carol", agent_space="cb")
DSN = "postgres://admin:S3cretPass99@db.internal:5432/prod"
KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd"


def test_metadata_secrets_are_redacted_on_the_python_api_and_the_cli(tmp_path, default_embedder):
    from context_engine.service import ContextEngineService

    home = tmp_path / "home"
    engine = ContextEngineService(
        load_settings(home, embedding={"backend": "use-multilingual"}), embedder=default_embedder
    )
    metadata = {"db": DSN, "nested": {"api_key": KEY, "count": 3}, "tags": ["ok", KEY]}
    uri = engine.add_memory("carol deploy note", CAROL, metadata=metadata).uris[0]
    listed = engine.list_memories(CAROL).items[0].metadata
    detail = engine.get_memory(uri, CAROL).metadata
    engine.close()
    for md in (listed, detail):
        text = json.dumps(md)
        assert "S3cretPass99" not in text and KEY not in text
        assert md["nested"]["count"] == 3 and md["tags"][0] == "ok"  # what is no secret stays as written
    args = ["--home", str(home), "--as", "acme:user:carol:cb", "--json", "memories"]
    out = CliRunner().invoke(app, args, env={"CE_EMBEDDING__BACKEND": "use-multilingual"})
    assert out.exit_code == 0, out.output
    assert "carol deploy note" in out.output and "S3cretPass99" not in out.output and KEY not in out.output
