"""The MCP tools in process (the SDK's client against the server object): input schemas, the same answers as the
service, and the HTTP error envelope on failure."""

from __future__ import annotations

import json

import anyio
import pytest
from mcp import Client

from context_engine.interfaces.mcp.server import build_mcp_server
from context_engine.schema.context import RequestContext
from context_engine.schema.query import SearchMemoryRequest
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from tests.http.helpers import SAMPLE_CORPUS

ADMIN = RequestContext(account_id="acme", role="admin")
USER = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="bot")
TOOLS = {
    "search_memory",
    "read_memory",
    "lookup_knowledge",
    "verify_evidence",
    "add_memory",
    "add_resource",
    "add_skill",
}


@pytest.fixture(scope="module")
def service(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("mcp-root")
    (root / "net.md").write_text(
        "# DNS Failure\n\n## Meaning\n\nName resolution fails in the cluster.\n", encoding="utf-8"
    )
    settings = load_settings(tmp_path_factory.mktemp("mcp-home"), http={"allowed_upload_roots": (root,)})
    svc = ContextEngineService(settings, embedder=embedder)
    svc.add_resource(SAMPLE_CORPUS, "ctx://resources/", ADMIN)
    svc.extra_root = root  # type: ignore[attr-defined]
    yield svc
    svc.close()


def call(service, ctx, name, args):
    async def go():
        async with Client(build_mcp_server(lambda: service, lambda _r: ctx)) as client:
            return await client.call_tool(name, args)

    return anyio.run(go)


def test_tools_and_input_schemas(service):
    async def go():
        async with Client(build_mcp_server(lambda: service, lambda _r: ADMIN)) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in anyio.run(go)}
    assert TOOLS <= set(tools)
    sm = tools["search_memory"]
    assert sm.input_schema["required"] == ["query"]
    assert {"query", "top_k", "score_threshold", "target_uri", "trace_level"} <= set(sm.input_schema["properties"])
    assert "ctx" not in sm.input_schema["properties"]
    # lean but exact (issue 15): bounds kept, generated titles and output schemas dropped
    assert sm.input_schema["properties"]["top_k"] == {"default": 10, "maximum": 50, "minimum": 1, "type": "integer"}
    assert sm.input_schema["properties"]["response_format"]["default"] == "compact"
    assert all(t.output_schema is None for t in tools.values())
    assert tools["read_memory"].input_schema["properties"]["level"]["enum"] == ["L1", "L2"]
    assert tools["list_memories"].input_schema["properties"]["limit"]["maximum"] == 200
    assert sm.description and "read_memory" in sm.description
    assert tools["search_memory"].annotations.read_only_hint is True


def test_search_memory_equals_the_service(service):
    args = {"query": "documentation: certificate expiry", "top_k": 3, "response_format": "full"}
    res = call(service, ADMIN, "search_memory", args)
    assert not res.is_error
    direct = service.search_memory(SearchMemoryRequest(query="documentation: certificate expiry", top_k=3), ADMIN)
    got = res.structured_content
    assert [h["uri"] for h in got["hits"]] == [h.uri for h in direct.hits]
    assert [h["score"] for h in got["hits"]] == [h.score for h in direct.hits]
    assert json.loads(res.content[0].text)["hits"] == got["hits"]


def test_search_memory_is_compact_by_default(service):
    res = call(service, ADMIN, "search_memory", {"query": "documentation: certificate expiry", "top_k": 3})
    assert not res.is_error
    got = res.structured_content
    direct = service.search_memory(SearchMemoryRequest(query="documentation: certificate expiry", top_k=3), ADMIN)
    # empty warnings, retryable false and debug null are left out of the JSON; match_quality never is
    assert {"request_id", "match_quality", "hits"} <= set(got) <= {
        "request_id",
        "match_quality",
        "hits",
        "warnings",
        "retryable",
    }
    assert got["match_quality"] == direct.match_quality
    assert [(h["uri"], h["score"]) for h in got["hits"]] == [(h.uri, round(h.score, 3)) for h in direct.hits]
    for compact, full in zip(got["hits"], direct.hits, strict=True):
        assert full.abstract.startswith(compact["abstract"].removesuffix("…"))
        assert len(compact["abstract"]) <= service.settings.retrieval.compact_abstract_max_chars
    assert set(got["hits"][0]) == {"uri", "level", "score", "abstract", "read_recommendation"}
    debug = call(service, ADMIN, "search_memory", {"query": "certificate expiry", "include_debug": True})
    assert {"typed_queries", "seed_hits", "next_actions", "trace"} <= set(debug.structured_content["debug"])


def test_compact_search_memory_says_none_for_an_off_topic_question(service):
    """The agent learns that the store most likely lacks the answer; the hits still come back."""
    res = call(service, ADMIN, "search_memory", {"query": "What is the capital of France?", "top_k": 3})
    assert not res.is_error
    got = res.structured_content
    assert got["match_quality"] == "none" and len(got["hits"]) == 3
    assert json.loads(res.content[0].text)["match_quality"] == "none"
    found = call(service, ADMIN, "search_memory", {"query": "DNS name resolution fails in the cluster", "top_k": 3})
    assert found.structured_content["match_quality"] in ("strong", "weak")


def test_lookup_knowledge_is_compact_by_default(service):
    res = call(service, ADMIN, "lookup_knowledge", {"query": "certificate expiring soon", "top_k": 2})
    assert not res.is_error
    got = res.structured_content
    assert "debug" not in got and got["evidence"] and "evidence_blocks" not in got
    first = got["evidence"][0]
    assert first["uri"].endswith("CertificateExpiringSoon.md") and first["evidence_ref"] == "$.evidence_blocks[0]"
    assert first["pack"] == "full" and first["excerpt"]
    # the excerpt is evidence: verify_evidence backs a quote of it
    quote = first["excerpt"].strip().splitlines()[-1][:80]
    check = call(service, ADMIN, "verify_evidence", {"invocation_id": got["invocation_id"], "excerpt": quote})
    assert check.structured_content["verified"] is True
    full = call(service, ADMIN, "lookup_knowledge", {"query": "certificate expiring soon", "response_format": "full"})
    assert "evidence_blocks" in full.structured_content and "context_pack" in full.structured_content


def test_errors_use_the_envelope(service):
    res = call(service, USER, "read_memory", {"uri": "ctx://user/zed/memories/x.md"})
    assert res.is_error
    env = res.structured_content
    assert set(env) == {"code", "message", "details", "request_id"} and env["code"] == "RET-4032"
    assert json.loads(res.content[0].text) == env
    res = call(service, ADMIN, "search_memory", {"query": "x", "top_k": 0})
    assert res.is_error and res.structured_content["code"] == "RET-4002"
    res = call(service, ADMIN, "search_memory", {"query": ""})
    assert res.is_error and res.structured_content["code"] == "RET-4001"


def test_invalid_arguments_use_the_envelope(service):
    res = call(service, ADMIN, "search_memory", {"query": "x", "top_k": "many"})
    assert res.is_error and res.structured_content["code"] == "RET-4001"
    res = call(service, ADMIN, "add_memory", {"text": 42})
    assert res.is_error and res.structured_content["code"] == "WRT-4002"
    res = call(service, ADMIN, "read_memory", {})
    assert res.is_error and res.structured_content["code"] == "RET-4001"


def test_write_tools(service):
    res = call(service, USER, "add_memory", {"text": "alice prefers dark mode", "category": "preference"})
    assert not res.is_error and res.structured_content["uris"][0].startswith("ctx://user/alice/memories/preference/")
    res = call(service, ADMIN, "add_resource", {"text": "# Runbook X\n\nDo x.\n", "uri": "ctx://resources/x/x.md"})
    assert not res.is_error and res.structured_content["nodes"] == 1
    path = str(service.extra_root / "net.md")
    res = call(service, ADMIN, "add_resource", {"path": path, "uri": "ctx://resources/x/"})
    assert not res.is_error and res.structured_content["uris"] == ["ctx://resources/x/net.md"]
    res = call(service, ADMIN, "add_resource", {"path": "/etc/hostname", "uri": "ctx://resources/x/"})
    assert res.is_error and res.structured_content["code"] == "WRT-4041"
    res = call(service, ADMIN, "add_resource", {"uri": "ctx://resources/x/"})
    assert res.is_error and res.structured_content["code"] == "WRT-4002"
    res = call(service, USER, "add_resource", {"text": "# T\n\nt\n", "uri": "ctx://resources/x/t.md"})
    assert res.is_error and res.structured_content["code"] == "RET-4032"
    res = call(service, USER, "add_skill", {"name": "dig", "description": "Query DNS", "content": "dig +short x"})
    assert not res.is_error and res.structured_content["uris"] == ["ctx://agent/bot/skills/dig.md"]


def test_unexpected_errors_are_generic(service, monkeypatch):
    def boom(*_a, **_k):
        raise RuntimeError("internal detail")

    monkeypatch.setattr(service, "lookup_knowledge", boom)
    res = call(service, ADMIN, "lookup_knowledge", {"query": "disk"})
    assert res.is_error and res.structured_content["code"] == "API-5001"
    assert "internal detail" not in res.content[0].text
