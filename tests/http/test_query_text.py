"""One validation path for read tools' text (issue 27, attack pass): the same bad query text, and the same bad
``target_uri``, get the same read code on every surface and in every answer form.

Bad text: a lone surrogate (``"\\ud800"``: the compact search used to crash with ``UnicodeEncodeError``), a NUL
(lookup_knowledge and the similar route used to accept it), a query over the one limit of 4096 characters, and a
blank one. Surfaces: the Python API (full and compact), HTTP (full and compact) and MCP (the server object, in
process: the SDK's client cannot send a lone surrogate). A malformed ``target_uri`` on a read tool is ``RET-4001``
(lookup_knowledge and the similar route said ``WRT-4001``, a write code), and the root ``ctx://`` means everything
the caller sees: it never crosses the tenant (account ``acme`` holds the corpus, ``globex`` only bob's memory).
"""

from __future__ import annotations

import json

import anyio
import pytest

from context_engine.errors import ContextEngineError
from context_engine.interfaces.mcp.server import build_mcp_server
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import LookupRequest
from context_engine.schema.query import SearchMemoryRequest
from tests.http.conftest import ACME_ADMIN, BOB

QUERY_MAX_CHARS = 4096  # the documented bound of every read tool's query (schema/text.py)
BAD_QUERIES = {
    "surrogate": "disk \ud800 pressure",
    "nul": "disk\x00pressure",
    "over_length": "disk " * (QUERY_MAX_CHARS // 5 + 1),
    "blank": " \t ",
}
BAD_TARGETS = ["not-a-uri", "ctx://nowhere/x", "ctx://resources/../etc/"]
GLOBEX_ADMIN = RequestContext(account_id="globex", role="admin")


def _python_calls(service, fields):
    ctx = ACME_ADMIN
    return {
        "search_memory": lambda: service.search_memory(SearchMemoryRequest(**fields), ctx),
        "search_memory_compact": lambda: service.search_memory_compact(SearchMemoryRequest(**fields), ctx),
        "lookup_knowledge": lambda: service.lookup_knowledge(LookupRequest(**fields), ctx),
        "lookup_knowledge_compact": lambda: service.lookup_knowledge_compact(LookupRequest(**fields), ctx),
        "similar": lambda: service.similar_search(ctx=ctx, **fields),
    }


HTTP_ROUTES = {
    "search_memory": ("/api/v1/search_memory", {}),
    "search_memory_compact": ("/api/v1/search_memory", {"response_format": "compact"}),
    "lookup_knowledge": ("/api/v1/lookup_knowledge", {}),
    "lookup_knowledge_compact": ("/api/v1/lookup_knowledge", {"response_format": "compact"}),
    "similar": ("/api/search/similar", {}),
}
MCP_TOOLS = {
    "search_memory": ("search_memory", {"response_format": "full"}),
    "search_memory_compact": ("search_memory", {"response_format": "compact"}),
    "lookup_knowledge": ("lookup_knowledge", {"response_format": "full"}),
    "lookup_knowledge_compact": ("lookup_knowledge", {"response_format": "compact"}),
}


def _post(client, path: str, body: dict, headers: dict):
    # json.dumps escapes a lone surrogate as the six characters \ud800, as a JSON client may send it
    return client.post(path, content=json.dumps(body), headers={**headers, "Content-Type": "application/json"})


def _mcp(service, tool: str, args: dict) -> dict:
    server = build_mcp_server(lambda: service, lambda _r: ACME_ADMIN)
    result = anyio.run(server.call_tool, tool, args)
    assert result.is_error, (tool, args)
    return result.structured_content


# ---- bad query text --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(BAD_QUERIES))
@pytest.mark.parametrize("surface", list(HTTP_ROUTES))
def test_bad_query_text_is_ret_4001_from_python(service, surface, kind):
    with pytest.raises(ContextEngineError) as exc:
        _python_calls(service, {"query": BAD_QUERIES[kind]})[surface]()
    assert exc.value.code.value == "RET-4001"
    assert exc.value.details.get("field") == "query" or exc.value.details.get("loc") == ["query"]


@pytest.mark.parametrize("kind", list(BAD_QUERIES))
@pytest.mark.parametrize("surface", list(HTTP_ROUTES))
def test_bad_query_text_is_ret_4001_over_http(client, tenants, surface, kind):
    path, extra = HTTP_ROUTES[surface]
    r = _post(client, path, {"query": BAD_QUERIES[kind], **extra}, tenants.admin)
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "RET-4001"


@pytest.mark.parametrize("kind", list(BAD_QUERIES))
@pytest.mark.parametrize("surface", list(MCP_TOOLS))
def test_bad_query_text_is_ret_4001_over_mcp(service, surface, kind):
    tool, extra = MCP_TOOLS[surface]
    assert _mcp(service, tool, {"query": BAD_QUERIES[kind], **extra})["code"] == "RET-4001"


def test_the_limit_is_the_same_for_every_read_tool(service):
    """A query of exactly the limit passes everywhere; one character more fails everywhere (one bound, 4096)."""
    at_limit = ("disk pressure " * QUERY_MAX_CHARS)[:QUERY_MAX_CHARS]
    for name, call in _python_calls(service, {"query": at_limit}).items():
        call()  # no error
        with pytest.raises(ContextEngineError) as exc:
            _python_calls(service, {"query": at_limit + "x"})[name]()
        assert exc.value.code.value == "RET-4001" and exc.value.details["max_chars"] == QUERY_MAX_CHARS


# ---- target_uri: read codes, and ctx:// as the caller's whole visible scope -----------------------------------------
@pytest.mark.parametrize("target", BAD_TARGETS)
@pytest.mark.parametrize("surface", list(HTTP_ROUTES))
def test_a_malformed_target_is_a_read_code(service, client, tenants, surface, target):
    with pytest.raises(ContextEngineError) as exc:
        _python_calls(service, {"query": "disk pressure", "target_uri": target})[surface]()
    assert exc.value.code.value == "RET-4001"
    path, extra = HTTP_ROUTES[surface]
    r = client.post(path, json={"query": "disk pressure", "target_uri": target, **extra}, headers=tenants.admin)
    assert (r.status_code, r.json()["code"]) == (400, "RET-4001")
    if surface in MCP_TOOLS:
        tool, extra = MCP_TOOLS[surface]
        assert _mcp(service, tool, {"query": "disk pressure", "target_uri": target, **extra})["code"] == "RET-4001"


@pytest.mark.parametrize("uri", ["not-a-uri", "ctx://resources/../etc/", "ctx://"])
def test_ls_tree_read_and_stat_answer_a_malformed_uri_with_a_read_code(service, client, tenants, uri):
    for call in (service.ls, service.tree, service.read, service.stat):
        with pytest.raises(ContextEngineError) as exc:
            call(uri, ctx=ACME_ADMIN)
        assert exc.value.code.value == "RET-4001", call.__name__
    r = client.get("/api/v1/ls", params={"uri": uri}, headers=tenants.admin)
    assert (r.status_code, r.json()["code"]) == (400, "RET-4001")


@pytest.mark.parametrize("root", ["ctx://", "ctx:///"])
def test_the_root_target_is_everything_visible_and_never_crosses_the_tenant(service, client, tenants, root):
    service.add_memory("Bob prefers disk pressure alerts by email.", BOB, category="preference")
    query = "disk pressure"
    # acme: the same answer as without a target, and only acme's nodes
    plain = service.search_memory(query, ACME_ADMIN, score_threshold=0.0)
    rooted = service.search_memory(query, ACME_ADMIN, score_threshold=0.0, target_uri=root)
    assert [h.uri for h in rooted.hits] == [h.uri for h in plain.hits] and rooted.hits
    assert not any(w.startswith(("RET-4031", "RET-4041")) for w in rooted.trace.warnings)
    assert all("bob" not in h.uri for h in rooted.hits)
    compact = service.search_memory_compact(query, ACME_ADMIN, score_threshold=0.0, target_uri=root)
    assert [h.uri for h in compact.hits] == [h.uri for h in plain.hits]
    looked = service.lookup_knowledge(query, ACME_ADMIN, target_uri=root)
    assert looked.evidence_blocks
    assert [b.doc_id for b in looked.evidence_blocks] == [
        b.doc_id for b in service.lookup_knowledge(query, ACME_ADMIN).evidence_blocks
    ]
    similar = service.similar_search(query, ACME_ADMIN, target_uri=root)
    assert similar.results
    # globex: its own memory only, never acme's corpus
    for ctx in (BOB, GLOBEX_ADMIN):
        theirs = service.search_memory(query, ctx, score_threshold=0.0, target_uri=root)
        assert theirs.hits and all(h.uri.startswith("ctx://user/bob/") for h in theirs.hits)
        assert not service.lookup_knowledge(query, ctx, target_uri=root).evidence_blocks
        similar = service.similar_search(query, ctx, target_uri=root, level=0)
        assert all(r.uri.startswith("ctx://user/bob/") for r in similar.results)
    # over HTTP, as a caller of each tenant
    r = client.post("/api/v1/search_memory", json={"query": query, "target_uri": root}, headers=tenants.bob)
    assert r.status_code == 200 and all(h["uri"].startswith("ctx://user/bob/") for h in r.json()["hits"])
    r = client.post("/api/v1/search_memory", json={"query": query, "target_uri": root}, headers=tenants.admin)
    assert r.status_code == 200 and r.json()["hits"] and all("bob" not in h["uri"] for h in r.json()["hits"])
    assert not _mcp_ok(service, {"query": query, "target_uri": root}).is_error


def _mcp_ok(service, args):
    server = build_mcp_server(lambda: service, lambda _r: ACME_ADMIN)
    return anyio.run(server.call_tool, "search_memory", args)
