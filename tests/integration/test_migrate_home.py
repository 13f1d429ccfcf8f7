"""``context-engine migrate-home SOURCE`` (issue 13, docs/deployment.md): an embedded home (SQLite + local files)
copied into PostgreSQL + S3 keeps every node, level, version, audit row and API key, and the engine on the target
answers as the source did. Needs the services of ``scripts/services.sh up`` (skips otherwise)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from context_engine.interfaces.cli.app import app
from context_engine.schema.context import RequestContext
from tests.postgres import fresh_postgres_database
from tests.s3_store import drop_prefix, s3_content_settings
from tests.services import settings_env

SAMPLE = "ctx://resources/sample/"
ALICE = RequestContext(account_id="acme", role="user", user_space="alice")


@pytest.fixture
def source_home(tmp_path, embedder):
    """An embedded home with resources, a memory with two versions, a lookup in the audit trail and an API key."""
    from importlib.resources import files

    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    home = tmp_path / "source"
    with ContextEngineService(load_settings(home), embedder=embedder) as engine:
        engine.add_resource(files("context_engine") / "sample_corpus", SAMPLE)
        memory = engine.add_memory("Alice prefers dark roast coffee.", ALICE)
        engine.update_memory(memory.uris[0], "Alice prefers dark roast coffee, no sugar.", ALICE)
        engine.lookup_knowledge("node is not ready", session_id="s1")
    runner = CliRunner()
    assert runner.invoke(app, ["--home", str(home), "keys", "create", "acme:admin", "--name", "ops"]).exit_code == 0
    return home


def test_migrate_home_copies_everything_and_the_target_answers_alike(source_home, tmp_path, monkeypatch, embedder):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    content = s3_content_settings("migrate")
    with fresh_postgres_database() as url:
        target = {"metadata": {"url": url}, "content": content, "vector": {"backend": "exact"}}
        for key, value in settings_env(target).items():
            monkeypatch.setenv(key, value)
        runner = CliRunner()
        r = runner.invoke(app, ["--home", str(tmp_path / "target"), "--json", "migrate-home", str(source_home)])
        assert r.exit_code == 0, r.output
        report = json.loads(r.output)
        assert report["accounts"] == ["acme", "default"]
        assert report["rows"]["nodes"] >= 10 and report["rows"]["node_versions"] >= 1
        assert report["rows"]["tool_invocations"] == 1 and report["rows"]["api_keys"] == 1
        assert report["vectors_indexed"] == report["rows"]["vectors"]

        again = runner.invoke(app, ["--home", str(tmp_path / "target"), "--json", "migrate-home", str(source_home)])
        assert again.exit_code != 0 and "not empty" in again.output  # never merges into a store with data

        monkeypatch.delenv("CE_METADATA__URL")
        source = ContextEngineService(load_settings(source_home), embedder=embedder)
        scaled = ContextEngineService(load_settings(tmp_path / "target", **target), embedder=embedder)
        try:
            assert scaled.metadata.dialect == "postgresql" and type(scaled.content).__name__ == "S3ContentStore"
            # the audit trail as copied, compared before the searches below add search_memory rows to each store
            assert [i.invocation_id for i in scaled.list_invocations()] == [
                i.invocation_id for i in source.list_invocations()
            ]
            for query in ("how do I handle a node that is not ready?", "disk is almost full"):
                a = [(h.uri, round(h.score, 5)) for h in source.search_memory(query, top_k=5).hits]
                b = [(h.uri, round(h.score, 5)) for h in scaled.search_memory(query, top_k=5).hits]
                assert a == b and a
            uri = scaled.search_memory("disk is almost full", top_k=1).hits[0].uri
            assert scaled.read(uri, "L2") == source.read(uri, "L2")
            detail = scaled.get_memory(source.list_memories(ALICE).items[0].uri, ALICE)
            assert detail.text.endswith("no sugar.") and len(detail.history) == 1
            # new writes on the target get fresh ids after the copied ones (sequences moved past them)
            scaled.update_memory(detail.uri, "Alice prefers dark roast coffee with oat milk.", ALICE)
            assert len(scaled.get_memory(detail.uri, ALICE).history) == 2
        finally:
            source.close()
            scaled.close()
    drop_prefix(content)


def test_migrate_home_refuses_a_folder_that_is_not_a_home(tmp_path):
    r = CliRunner().invoke(app, ["--home", str(tmp_path / "t"), "--json", "migrate-home", str(tmp_path / "nothing")])
    assert r.exit_code == 2 and json.loads(r.output)["code"] == "CFG-4001"
