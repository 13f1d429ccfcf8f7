"""Every error code of DESIGN §8 (and the write/auth/API codes in the same form) over HTTP: the status from the error
table, the envelope ``{code, message, details, request_id}``, and no stack trace to the client."""

from __future__ import annotations

import pytest

from context_engine.errors import ContextEngineError, ErrorCode

ENVELOPE_KEYS = {"code", "message", "details", "request_id"}
ALICE_MEMORY = "ctx://user/alice/memories/"


def assert_envelope(r, code: str) -> dict:
    body = r.json()
    assert set(body) == ENVELOPE_KEYS, body
    assert body["code"] == code, body
    assert r.status_code == ErrorCode(code).http_status
    assert body["message"]
    assert body["request_id"] and r.headers["x-request-id"] == body["request_id"]
    assert "Traceback" not in r.text and 'File "' not in r.text
    return body


# ---- request errors: search_memory / read_memory (DESIGN §8) -------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"query": ""}, "RET-4001"),
        ({"query": "   "}, "RET-4001"),
        ({"querx": "typo"}, "RET-4001"),  # schema validation -> the same envelope, never FastAPI's 422 body
        ({"query": "disk", "top_k": 0}, "RET-4002"),
        ({"query": "disk", "top_k": 51}, "RET-4002"),
        ({"query": "disk", "score_threshold": 1.5}, "RET-4003"),
        ({"query": "disk", "score_threshold": -0.1}, "RET-4003"),
    ],
)
def test_search_memory_request_errors(client, tenants, body, code):
    assert_envelope(client.post("/api/v1/search_memory", json=body, headers=tenants.admin), code)


def test_invalid_json_is_an_envelope(client, tenants):
    r = client.post(
        "/api/v1/search_memory", content=b"{not json", headers={**tenants.admin, "content-type": "application/json"}
    )
    assert_envelope(r, "RET-4001")


def test_target_not_visible_is_4031(client, tenants):
    r = client.post(
        "/api/v1/search_memory",
        json={"query": "preferences", "target_uri": "ctx://user/carol/memories/"},
        headers=tenants.alice,
    )
    assert_envelope(r, "RET-4031")


def test_uri_not_readable_is_4032(client, tenants):
    r = client.post("/api/v1/read_memory", json={"uri": "ctx://user/carol/memories/x.md"}, headers=tenants.alice)
    assert_envelope(r, "RET-4032")


def test_level_not_available_is_4004(client, tenants):
    r = client.post(
        "/api/v1/read_memory", json={"uri": "ctx://resources/kubernetes/", "level": "L2"}, headers=tenants.admin
    )
    assert_envelope(r, "RET-4004")


def test_other_tenant_gets_the_same_403_for_forbidden_and_missing(client, tenants):
    """globex's key on acme's existing document and on a URI that exists nowhere: byte-identical bodies."""
    same_id = {"X-Request-ID": "tenant-probe-1"}
    existing = client.post(
        "/api/v1/read_memory",
        json={"uri": "ctx://resources/kubernetes/NodeNotReady.md"},
        headers={**tenants.bob, **same_id},
    )
    missing = client.post(
        "/api/v1/read_memory",
        json={"uri": "ctx://resources/kubernetes/NoSuchRunbook.md"},
        headers={**tenants.bob, **same_id},
    )
    assert existing.status_code == missing.status_code == 403
    assert existing.content.replace(b"NodeNotReady", b"X") == missing.content.replace(b"NoSuchRunbook", b"X")
    assert_envelope(existing, "RET-4032")
    # another user's private space in the same account: also the same 403
    private = client.post("/api/v1/read_memory", json={"uri": ALICE_MEMORY}, headers={**tenants.bob, **same_id})
    assert private.status_code == 403 and private.json()["code"] == "RET-4032"
    # and the owner (same account) reads the document
    ok = client.post(
        "/api/v1/read_memory", json={"uri": "ctx://resources/kubernetes/NodeNotReady.md"}, headers=tenants.admin
    )
    assert ok.status_code == 200


def test_other_tenant_search_and_lookup_see_nothing_of_acme(client, tenants):
    r = client.post("/api/v1/search_memory", json={"query": "node not ready kubelet"}, headers=tenants.bob)
    assert r.status_code == 200 and r.json()["hits"] == [] and r.json()["seed_hits"] == []
    r = client.post("/api/v1/lookup_knowledge", json={"query": "NodeNotReady kubelet"}, headers=tenants.bob)
    assert r.status_code == 200 and r.json()["evidence_blocks"] == []
    r = client.post("/api/search/similar", json={"query": "NodeNotReady kubelet", "top_k": 5}, headers=tenants.bob)
    assert r.status_code == 200 and r.json()["results"] == []


# ---- degradations: warnings in a 200 response (DESIGN §8) ----------------------------------------------------------
def warnings_of(r) -> list[str]:
    assert r.status_code == 200, r.text
    return r.json()["trace"]["warnings"]


def test_missing_target_is_ignored_with_4041(client, tenants):
    body = {"query": "kubernetes node doc", "target_uri": "ctx://resources/nope/"}
    r = client.post("/api/v1/search_memory", json=body, headers=tenants.admin)
    assert any(w.startswith("RET-4041") for w in warnings_of(r))


def test_unclassified_query_is_4221(client, tenants):
    r = client.post("/api/v1/search_memory", json={"query": "kubelet"}, headers=tenants.admin)
    assert any(w.startswith("RET-4221") for w in warnings_of(r))
    assert len(r.json()["typed_queries"]) == 3


def test_vector_search_failure_is_5001_retryable(client, tenants, service, monkeypatch):
    def broken(*_a, **_k):
        raise ContextEngineError(ErrorCode.VECTOR_SEARCH_FAILED, "index down", retryable=True)

    monkeypatch.setattr(service.search_pipeline.source, "scorer", broken)
    r = client.post("/api/v1/search_memory", json={"query": "node doc"}, headers=tenants.admin)
    assert any(w.startswith("RET-5001") for w in warnings_of(r))
    assert r.json()["retryable"] is True and r.json()["hits"] == []


def test_recheck_failure_is_5002(client, tenants, service, monkeypatch):
    def broken(*_a, **_k):
        raise RuntimeError("recheck rule crashed")

    monkeypatch.setattr(service.search_pipeline.rechecker, "_reason", broken)
    r = client.post("/api/v1/search_memory", json={"query": "kubernetes node documentation"}, headers=tenants.admin)
    assert any(w.startswith("RET-5002") for w in warnings_of(r))
    assert r.json()["hits"]


def test_assembly_failure_is_5003(client, tenants, service, monkeypatch):
    def broken(*_a, **_k):
        raise RuntimeError("assembler crashed")

    monkeypatch.setattr(service.search_pipeline, "_assemble", broken)
    r = client.post("/api/v1/search_memory", json={"query": "kubernetes node documentation"}, headers=tenants.admin)
    assert any(w.startswith("RET-5003") for w in warnings_of(r))
    assert r.json()["seed_hits"]


def test_lookup_vector_failure_is_not_a_500(client, tenants, service, monkeypatch):
    def broken(*_a, **_k):
        raise ContextEngineError(ErrorCode.VECTOR_SEARCH_FAILED, "index down", retryable=True)

    monkeypatch.setattr(service.knowledge.search.primary, "search", broken)
    monkeypatch.setattr(service.knowledge.search.fallback, "search", broken)
    r = client.post("/api/v1/lookup_knowledge", json={"query": "disk full", "mode": "auto"}, headers=tenants.admin)
    assert r.status_code == 200 and r.json()["evidence_status"] == "search_failed"
    r = client.post("/api/search/similar", json={"query": "disk full"}, headers=tenants.admin)
    assert r.status_code == 200 and r.json()["retryable"] is True and r.json()["results"] == []
    assert r.json()["warnings"][0].startswith("RET-5001")


# ---- write path ------------------------------------------------------------------------------------------------------
def test_invalid_uri_is_wrt_4001(client, tenants):
    r = client.post(
        "/api/v1/memories", json={"text": "x", "uri": "ctx://user/alice/memories/../x.md"}, headers=tenants.alice
    )
    assert_envelope(r, "WRT-4001")


def test_write_validation_is_wrt_4002(client, tenants):
    assert_envelope(client.post("/api/v1/memories", json={"txt": "x"}, headers=tenants.alice), "WRT-4002")
    assert_envelope(client.post("/api/v1/skills", json={"name": "x"}, headers=tenants.alice), "WRT-4002")


def test_path_outside_roots_is_wrt_4041(client, tenants, upload_root, tmp_path):
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n\ntext\n", encoding="utf-8")
    bodies = []
    for path in (str(outside), str(upload_root / "nope.md"), "../../etc/passwd", str(upload_root / ".." / "x")):
        r = client.post("/api/v1/resources", json={"path": path}, headers={**tenants.admin, "X-Request-ID": "p"})
        bodies.append(assert_envelope(r, "WRT-4041"))
    assert all(b == bodies[0] for b in bodies)  # outside and missing look the same


def test_symlink_out_of_root_given_directly_is_refused(client, tenants, upload_root, tmp_path):
    target = tmp_path / "outside.md"
    target.write_text("# Outside\n\nnot for the store\n", encoding="utf-8")
    linkdir = upload_root / "linked"
    linkdir.mkdir(exist_ok=True)
    (linkdir / "leak.md").symlink_to(target)
    r = client.post("/api/v1/resources", json={"path": str(linkdir / "leak.md")}, headers=tenants.admin)
    assert_envelope(r, "WRT-4041")  # the path itself leads outside the roots


def test_unsupported_format_is_wrt_4151(client, tenants):
    r = client.post(
        "/api/v1/resources/upload",
        files=[("files", ("notes.pdf", b"%PDF-1.4"))],
        data={"target_uri": "ctx://resources/up/"},
        headers=tenants.admin,
    )
    body = assert_envelope(r, "WRT-4151")
    assert "ce-upload-" not in r.text and "/tmp" not in body["message"]


def test_empty_file_is_wrt_4221(client, tenants):
    r = client.post(
        "/api/v1/resources/upload",
        files=[("files", ("empty.md", b""))],
        data={"target_uri": "ctx://resources/up/"},
        headers=tenants.admin,
    )
    assert_envelope(r, "WRT-4221")
    assert "ce-upload-" not in r.text


def test_non_empty_directory_delete_is_wrt_4091(client, tenants):
    r = client.post("/api/v1/delete", json={"uri": "ctx://resources/kubernetes/"}, headers=tenants.admin)
    body = assert_envelope(r, "WRT-4091")
    assert "recursive=true" in body["message"]  # the HTTP field, not only the CLI's flag


def test_user_cannot_write_shared_resources(client, tenants):
    r = client.post(
        "/api/v1/resources/text", json={"text": "# T\n\nbody\n", "uri": "ctx://resources/t.md"}, headers=tenants.alice
    )
    assert_envelope(r, "RET-4032")


def test_body_over_limit_is_413(client, tenants):
    big = {"text": "x" * (70 * 1024)}
    assert_envelope(client.post("/api/v1/memories", json=big, headers=tenants.alice), "WRT-4131")


def test_chunked_body_over_limit_is_413(client, tenants):
    def chunks():
        for _ in range(80):
            yield b"x" * 1024

    r = client.post("/api/v1/memories", content=chunks(), headers={**tenants.alice, "content-type": "application/json"})
    assert_envelope(r, "WRT-4131")


# ---- authentication and API-level codes ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer ce_0123456789abcdef_" + "A" * 43},
        {"Authorization": "Bearer nonsense"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
    ],
)
def test_no_valid_key_is_401(client, headers):
    r = client.post("/api/v1/search_memory", json={"query": "x"}, headers=headers)
    assert_envelope(r, "AUTH-4011")
    assert r.headers["www-authenticate"].startswith("Bearer")


def test_unknown_route_and_method(client, tenants):
    assert_envelope(client.get("/api/v1/nothing", headers=tenants.admin), "API-4041")
    assert_envelope(client.get("/api/v1/search_memory", headers=tenants.admin), "API-4051")


def test_unexpected_error_is_a_generic_500(client, tenants, service, monkeypatch):
    def boom(*_a, **_k):
        raise RuntimeError("secret internal detail /srv/db")

    monkeypatch.setattr(service, "ls", boom)
    r = client.get("/api/v1/ls", headers={**tenants.admin, "X-Request-ID": "boom-1"})
    body = assert_envelope(r, "API-5001")
    assert body["request_id"] == "boom-1"
    assert "secret internal detail" not in r.text and "RuntimeError" not in r.text


def test_not_ready_is_503(client, tenants):
    state = client.app.state.engine
    saved, state.authenticator = state.authenticator, None
    try:
        assert_envelope(client.post("/api/v1/search_memory", json={"query": "x"}, headers=tenants.admin), "API-5031")
        assert_envelope(client.get("/readyz"), "API-5031")
    finally:
        state.authenticator = saved
    assert client.get("/readyz").status_code == 200
