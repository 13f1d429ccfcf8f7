"""The endpoints answer what the service answers (thin routes), with complete OpenAPI models."""

from __future__ import annotations

from context_engine.schema.knowledge import LookupRequest
from context_engine.schema.query import ReadMemoryRequest, SearchMemoryRequest
from tests.http.conftest import ACME_ADMIN, ALICE

VOLATILE = {"request_id", "invocation_id", "took_ms", "created_at", "duration_ms", "first_invocation_id"}


def strip(x):
    """Drop ids, timestamps and timings, which differ between two calls of the same question."""
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in VOLATILE and not k.endswith("_ms")}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def test_search_memory_matches_the_service(client, tenants, service):
    body = {"query": "documentation: node not ready", "top_k": 5}
    r = client.post("/api/v1/search_memory", json=body, headers=tenants.admin)
    assert r.status_code == 200, r.text
    direct = service.search_memory(SearchMemoryRequest(**body), ACME_ADMIN).model_dump(mode="json")
    assert strip(r.json()) == strip(direct)
    assert r.json()["hits"]


def test_compact_answers_on_request(client, tenants, service):
    body = {"query": "documentation: node not ready", "top_k": 5, "response_format": "compact"}
    r = client.post("/api/v1/search_memory", json=body, headers=tenants.admin)
    assert r.status_code == 200, r.text
    direct = service.search_memory_compact(SearchMemoryRequest(**body), ACME_ADMIN)
    got = r.json()
    assert [h["uri"] for h in got["hits"]] == [h.uri for h in direct.hits] and "seed_hits" not in got
    assert set(got["hits"][0]) == {"uri", "level", "score", "abstract", "read_recommendation"}
    debug = client.post("/api/v1/search_memory", json={**body, "include_debug": True}, headers=tenants.admin).json()
    assert debug["debug"]["typed_queries"] and "trace" in debug["debug"]
    body = {"query": "NodeNotReady: kubelet stopped reporting", "response_format": "compact"}
    lookup = client.post("/api/v1/lookup_knowledge", json=body, headers=tenants.admin)
    assert lookup.status_code == 200, lookup.text
    evidence = lookup.json()["evidence"]
    assert evidence[0]["uri"].endswith("NodeNotReady.md") and evidence[0]["excerpt"]
    bad = client.post("/api/v1/search_memory", json={**body, "response_format": "tiny"}, headers=tenants.admin)
    assert bad.status_code == 400 and bad.json()["code"] == "RET-4001"


def test_search_memory_says_how_confident_its_best_hit_is(client, tenants):
    """``match_quality`` in the full and the compact answer, and in the OpenAPI schema of both (always present)."""
    off_topic = {"query": "What is the capital of France?", "top_k": 3}
    for fmt in ("full", "compact"):
        r = client.post("/api/v1/search_memory", json={**off_topic, "response_format": fmt}, headers=tenants.alice)
        assert r.status_code == 200, r.text
        assert r.json()["match_quality"] == "none" and r.json()["hits"]  # labelled, not emptied
    found = {"query": "Which language do I prefer for answers?", "top_k": 3}
    r = client.post("/api/v1/search_memory", json=found, headers=tenants.alice)
    assert r.json()["match_quality"] in ("strong", "weak") and "concise" in r.json()["hits"][0]["abstract"]
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for name in ("SearchMemoryResponse", "SearchMemoryCompact"):
        field = schemas[name]["properties"]["match_quality"]
        assert field.get("enum") == ["strong", "weak", "none"] or field.get("$ref"), field


def test_read_memory_l1_then_l2(client, tenants, service):
    uri = "ctx://resources/kubernetes/NodeNotReady.md"
    for level in ("L1", "L2"):
        r = client.post("/api/v1/read_memory", json={"uri": uri, "level": level}, headers=tenants.admin)
        assert r.status_code == 200, r.text
        assert r.json()["block"]["level_hit"] == level
        direct = service.read_memory(ReadMemoryRequest(uri=uri, level=level), ACME_ADMIN).model_dump(mode="json")
        assert strip(r.json()) == strip(direct)
    assert "kubelet" in r.json()["block"]["content_excerpt"]


def test_lookup_knowledge_and_audit_endpoints(client, tenants, service):
    body = {"query": "NodeNotReady: kubelet stopped reporting", "session_id": "http-audit-1"}
    first = client.post("/api/v1/lookup_knowledge", json=body, headers=tenants.admin).json()
    assert first["evidence_status"] == "found"
    second = client.post("/api/v1/lookup_knowledge", json=body, headers=tenants.admin).json()
    assert second["evidence_blocks"][0]["relevance_level"] == "DEDUPED"

    listed = client.get("/api/v1/tool_invocations", params={"session_id": "http-audit-1"}, headers=tenants.admin)
    assert listed.status_code == 200
    ids = [i["invocation_id"] for i in listed.json()["invocations"]]
    assert ids == [second["invocation_id"], first["invocation_id"]]  # newest first
    summary = client.get(
        "/api/v1/tool_invocations/summary", params={"session_id": "http-audit-1"}, headers=tenants.admin
    ).json()
    assert summary["invocation_count"] == 2 and summary["dedup_count"] >= 1

    excerpt = first["evidence_blocks"][0]["text"][:60]
    ok = client.post(
        "/api/v1/verify_evidence",
        json={"invocation_id": first["invocation_id"], "excerpt": excerpt},
        headers=tenants.admin,
    ).json()
    assert ok["verified"] is True and ok["raw_path"] == "$.evidence_blocks[0]"
    bad = client.post(
        "/api/v1/verify_evidence",
        json={"invocation_id": first["invocation_id"], "excerpt": "this sentence was never retrieved"},
        headers=tenants.admin,
    ).json()
    assert bad["verified"] is False
    # another account cannot see or verify acme's invocations
    assert (
        client.get("/api/v1/tool_invocations", params={"session_id": "http-audit-1"}, headers=tenants.bob).json()[
            "invocations"
        ]
        == []
    )
    other = client.post(
        "/api/v1/verify_evidence",
        json={"invocation_id": first["invocation_id"], "excerpt": excerpt},
        headers=tenants.bob,
    ).json()
    assert other["verified"] is False and other["reason"] == "invocation_not_found"

    direct = service.lookup_knowledge(LookupRequest(query=body["query"]), ACME_ADMIN).model_dump(mode="json")
    fresh = client.post("/api/v1/lookup_knowledge", json={"query": body["query"]}, headers=tenants.admin).json()
    assert strip(fresh["evidence_blocks"]) == strip(direct["evidence_blocks"])


def test_similar_search_contract(client, tenants):
    """The live-evaluation contract: {query, top_k} -> {results: [{doc_id, score, ...}]}, one result per doc."""
    r = client.post(
        "/api/search/similar", json={"query": "certificate about to expire", "top_k": 3}, headers=tenants.admin
    )
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert 1 <= len(results) <= 3
    assert results[0]["doc_id"] == "ctx://resources/networking/CertificateExpiringSoon.md"
    assert len({x["doc_id"] for x in results}) == len(results)
    scores = [x["score"] for x in results]
    assert scores == sorted(scores, reverse=True) and all(-1 <= s <= 1 for s in scores)
    r0 = client.post(
        "/api/search/similar",
        json={"query": "certificate about to expire", "top_k": 3, "level": 0},
        headers=tenants.admin,
    )
    assert r0.status_code == 200 and r0.json()["level"] == 0 and r0.json()["results"]
    assert (
        client.post("/api/search/similar", json={"query": "x", "top_k": 1001}, headers=tenants.admin).json()["code"]
        == "RET-4002"
    )
    # an over-long query is refused at once (a 1 MB one held the embedder for ~24 s per request before)
    long = client.post("/api/search/similar", json={"query": "failover " * 600, "top_k": 1}, headers=tenants.admin)
    assert long.status_code == 400 and long.json()["code"] == "RET-4001"
    # one check for every read tool
    assert long.json()["details"] == {"field": "query", "max_chars": 4096, "chars": 5400}


def test_writes_ls_tree_move_delete(client, tenants, upload_root):
    h = tenants.admin
    r = client.post(
        "/api/v1/resources", json={"path": str(upload_root / "ops"), "target_uri": "ctx://resources/srv/"}, headers=h
    )
    assert r.status_code == 200 and r.json()["nodes"] >= 1, r.text
    r = client.post(
        "/api/v1/resources", json={"path": "ops/disk.md", "target_uri": "ctx://resources/srv/"}, headers=h
    )  # relative to the first root; unchanged content is a no-op
    assert r.status_code == 200 and r.json()["unchanged"] == 1, r.text
    r = client.post(
        "/api/v1/resources/upload",
        files=[("files", ("a.md", b"# Alpha\n\nalpha text\n")), ("files", ("b.txt", b"beta text\n"))],
        data={"target_uri": "ctx://resources/up/"},
        headers=h,
    )
    assert r.status_code == 200 and r.json()["nodes"] == 2, r.text
    r = client.post(
        "/api/v1/resources/text", json={"text": "# Gamma\n\ngamma\n", "uri": "ctx://resources/up/g.md"}, headers=h
    )
    assert r.status_code == 200 and r.json()["nodes"] == 1
    listed = client.get("/api/v1/ls", params={"uri": "ctx://resources/up/"}, headers=h).json()["nodes"]
    names = [n["uri"] for n in listed]
    assert names == ["ctx://resources/up/a.md", "ctx://resources/up/b.txt", "ctx://resources/up/g.md"]
    tree = client.get("/api/v1/tree", params={"uri": "ctx://resources/", "max_depth": 1}, headers=h).json()
    assert tree["root"]["uri"] == "ctx://resources/" and tree["root"]["children"]
    r = client.post(
        "/api/v1/move", json={"src": "ctx://resources/up/g.md", "dst": "ctx://resources/up/gamma.md"}, headers=h
    )
    assert r.status_code == 200
    r = client.post("/api/v1/delete", json={"uri": "ctx://resources/up/", "recursive": True}, headers=h)
    assert r.status_code == 200
    assert client.get("/api/v1/ls", params={"uri": "ctx://resources/up/"}, headers=h).json()["code"] == "RET-4032"


def test_skill_and_memory_writes_land_in_the_callers_spaces(client, tenants):
    r = client.post(
        "/api/v1/skills",
        json={
            "name": "restart-kubelet",
            "description": "Restart the kubelet safely",
            "content": "systemctl restart kubelet",
        },
        headers=tenants.alice,
    )
    assert r.status_code == 200 and r.json()["uris"] == ["ctx://agent/alice-bot/skills/restart-kubelet.md"]
    r = client.post("/api/v1/memories", json={"text": "bob's note"}, headers=tenants.bob)
    assert r.status_code == 200 and r.json()["uris"][0].startswith("ctx://user/bob/memories/general/")


def test_openapi_is_complete(client):
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    expected = {
        ("post", "/api/v1/search_memory"),
        ("post", "/api/v1/read_memory"),
        ("post", "/api/v1/lookup_knowledge"),
        ("post", "/api/search/similar"),
        ("post", "/api/v1/resources"),
        ("post", "/api/v1/resources/upload"),
        ("post", "/api/v1/resources/text"),
        ("post", "/api/v1/memories"),
        ("post", "/api/v1/skills"),
        ("post", "/api/v1/delete"),
        ("post", "/api/v1/move"),
        ("get", "/api/v1/ls"),
        ("get", "/api/v1/tree"),
        ("get", "/api/v1/tool_invocations"),
        ("post", "/api/v1/verify_evidence"),
        ("get", "/metrics"),
        ("get", "/healthz"),
        ("get", "/readyz"),
    }
    assert expected <= {(m, p) for p, ops in paths.items() for m in ops}
    schemas = spec["components"]["schemas"]
    for name in (
        "SearchMemoryRequest",
        "SearchMemoryResponse",
        "ReadMemoryRequest",
        "ReadMemoryResponse",
        "LookupRequest",
        "LookupResult",
        "SimilarSearchRequest",
        "SimilarSearchResult",
        "ErrorEnvelope",
        "IngestReport",
        "ToolInvocation",
        "EvidenceVerification",
    ):
        assert name in schemas, name
    op = paths["/api/v1/search_memory"]["post"]
    ok = op["responses"]["200"]["content"]["application/json"]["schema"]["anyOf"]  # response_format: full | compact
    assert [o["$ref"].rsplit("/", 1)[1] for o in ok] == ["SearchMemoryResponse", "SearchMemoryCompact"]
    for status in ("400", "401", "403", "413", "500"):
        assert op["responses"][status]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorEnvelope")
    assert "422" not in op["responses"]  # validation errors are 400 envelopes
    assert spec["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"


def test_health_and_readiness(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready" and ready["embedding_model"]


def test_request_id_is_propagated_or_generated(client, tenants):
    r = client.get("/api/v1/ls", headers={**tenants.admin, "X-Request-ID": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    r = client.get("/api/v1/ls", headers={**tenants.admin, "X-Request-ID": "bad id with spaces"})
    assert r.headers["x-request-id"] != "bad id with spaces" and len(r.headers["x-request-id"]) == 16
    assert ALICE.account_id == "acme"


def test_server_timing_reports_engine_time(client, tenants):
    r = client.post("/api/v1/lookup_knowledge", json={"query": "disk almost full"}, headers=tenants.admin)
    parts = dict(p.strip().split(";dur=") for p in r.headers["server-timing"].split(","))
    assert 0 < float(parts["engine"]) <= float(parts["app"])
    assert "server-timing" not in client.get("/healthz").headers
