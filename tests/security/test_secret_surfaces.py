"""Secrets never come back, on any surface (issue 14 item 4; docs/security.md "Secret redaction").

A real engine (the suite's model, real stores) behind a real HTTP server on 127.0.0.1 ingests the fake-secret
corpus of :mod:`tests.security.secret_corpus` (one document per kind, plus a runbook holding them all) and a memory
that states two passwords. Then every surface that returns or stores text is collected and searched for every
secret value:

* search_memory hits and seeds (L0), with the detailed trace; read_memory L1 and L2; ls and tree;
* lookup_knowledge evidence excerpts, context pack, traces and hints (HTTP and MCP);
* tool_invocation rows as returned (list, get, session summary) and as stored (every column of the SQLite table);
* the stored L0/L1 files (write-time redaction) and the URI of add-memory (the slug);
* every log line written meanwhile (structlog and standard-library records, query text logging switched on).

Each surface also has to show a ``[REDACTED:`` mark, so a surface that returned nothing cannot pass.
"""

from __future__ import annotations

import io
import json
import logging
import sqlite3

import anyio
import httpx
import pytest
import structlog
from mcp import Client

from context_engine.interfaces.http import create_app
from context_engine.interfaces.mcp.server import build_mcp_server
from context_engine.observability.logging import configure_logging
from context_engine.redaction import redact_log_event, redact_patterns
from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import Level
from context_engine.service import ContextEngineService
from context_engine.settings import LoggingSettings, load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.http.helpers import LiveServer, bearer
from tests.security.secret_corpus import DOCUMENT, MEMORY, MEMORY_SECRETS, SECRETS

ADMIN = RequestContext(account_id="acme", role="admin")
ALICE = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="alice-bot")
ALL_SECRETS = [(kind, secret) for kind, _, secret in SECRETS] + [("memory", s) for s in MEMORY_SECRETS]
# A lookup query that itself holds secrets (audit_query_text is on): the stored row must not keep them.
QUERY = "connection refused for postgres://app:FakePgPassw0rd@db.internal:5432/app with AKIAFAKE0EXAMPLE1234"


def doc_uri(kind: str) -> str:
    return f"ctx://resources/secrets/{kind.replace('_', '-')}.md"


def leaks(text: str) -> list[str]:
    """Kinds whose secret value appears in ``text`` (in any case: slugs are lower-cased)."""
    folded = text.casefold()
    return [kind for kind, secret in ALL_SECRETS if secret.casefold() in folded]


@pytest.fixture(scope="module")
def world(tmp_path_factory, embedder):
    home = tmp_path_factory.mktemp("secrets-home")
    settings = load_settings(home, knowledge={"audit_query_text": True}, logging={"log_query_text": True})
    service = ContextEngineService(settings, embedder=embedder)
    keys = ApiKeyStore(service.metadata)
    _, admin_key = keys.create(ADMIN, "admin")
    _, alice_key = keys.create(ALICE, "alice")
    buf = io.StringIO()
    configure_logging(LoggingSettings(level="INFO", log_query_text=True), stream=buf)
    surfaces: dict[str, str] = {}
    try:
        with LiveServer(create_app(service=service)) as server:
            admin = httpx.Client(base_url=server.url, headers=bearer(admin_key), timeout=120)
            alice = httpx.Client(base_url=server.url, headers=bearer(alice_key), timeout=120)
            surfaces.update(collect_http(admin, alice, service))
            admin.close()
            alice.close()
        surfaces["lookup via MCP"] = mcp_lookup(service)
        logging.getLogger("context_engine.tests").warning("could not reach %s", "redis://:FakeRedisPassw0rd@cache")
        surfaces["logs"] = buf.getvalue()
        surfaces.update(stored_surfaces(service, home))
        yield service, surfaces
    finally:
        root = logging.getLogger()
        for h in list(root.handlers):
            if h.get_name() == "context-engine":
                root.removeHandler(h)
        structlog.reset_defaults()
        service.close()


def ok(r: httpx.Response) -> dict:
    assert r.status_code == 200, r.text
    return r.json()


def collect_http(admin: httpx.Client, alice: httpx.Client, service: ContextEngineService) -> dict[str, str]:
    out: dict[str, str] = {}
    for kind, line, _ in SECRETS:
        ok(admin.post("/api/v1/resources/text", json={"text": f"# {kind}\n\n{line}\n", "uri": doc_uri(kind)}))
    ok(admin.post("/api/v1/resources/text", json={"text": DOCUMENT, "uri": "ctx://resources/ops/credentials.md"}))
    added = ok(alice.post("/api/v1/memories", json={"text": MEMORY, "category": "profile"}))
    out["add-memory URI"] = json.dumps(added["uris"])
    out["memory L2 (read_memory)"] = json.dumps(
        ok(alice.post("/api/v1/read_memory", json={"uri": added["uris"][0], "level": "L2"}))
    )

    search = ok(
        admin.post(
            "/api/v1/search_memory",
            json={"query": "credentials password token key", "top_k": 50, "trace_level": "detailed"},
        )
    )
    assert len(search["hits"]) >= 20
    out["search_memory (L0, trace)"] = json.dumps(search)
    reads = []
    for kind, _, _ in SECRETS:
        for level in ("L1", "L2"):
            reads.append(ok(admin.post("/api/v1/read_memory", json={"uri": doc_uri(kind), "level": level})))
    out["read_memory L1/L2"] = json.dumps(reads)
    out["similar search (L2 chunks, L0)"] = json.dumps(
        [
            ok(alice.post("/api/search/similar", json={"query": "credentials password token key", "top_k": 100, **lv}))
            for lv in ({"level": 2}, {"level": 0})
        ]
    )
    out["ls"] = json.dumps(ok(admin.get("/api/v1/ls", params={"uri": "ctx://resources/secrets/"})))
    out["tree"] = json.dumps(ok(admin.get("/api/v1/tree", params={"uri": "ctx://resources/"})))

    lookup = ok(
        admin.post(
            "/api/v1/lookup_knowledge",
            json={
                "query": "which credentials token password key does the service use",
                "target_uri": "ctx://resources/secrets/",
                "top_k": 50,
                "session_id": "s-secrets",
                "context_token_budget": 20000,
            },
        )
    )
    assert {b["doc_id"] for b in lookup["evidence_blocks"]} == {doc_uri(k) for k, _, _ in SECRETS}
    out["lookup evidence"] = json.dumps(lookup["evidence_blocks"])
    out["lookup context pack"] = json.dumps(lookup["context_pack"])
    out["lookup traces and hints"] = json.dumps({"traces": lookup["traces"], "hints": lookup["hints"]})
    asked = ok(admin.post("/api/v1/lookup_knowledge", json={"query": QUERY, "session_id": "s-secrets"}))
    out["lookup with a secret query"] = json.dumps(asked)

    # the excerpt the caller got still verifies against the stored (redacted) row
    quoted = next(b["text"] for b in lookup["evidence_blocks"] if "[REDACTED:" in b["text"])
    asked_to_verify = {"invocation_id": lookup["invocation_id"], "excerpt": quoted}
    check = ok(admin.post("/api/v1/verify_evidence", json=asked_to_verify))
    assert check["verified"] is True

    rows = ok(admin.get("/api/v1/tool_invocations", params={"session_id": "s-secrets"}))
    assert len(rows["invocations"]) == 2
    out["tool_invocations (list)"] = json.dumps(rows)
    out["tool_invocations (get)"] = json.dumps(ok(admin.get(f"/api/v1/tool_invocations/{asked['invocation_id']}")))
    out["tool_invocations (summary)"] = json.dumps(
        ok(admin.get("/api/v1/tool_invocations/summary", params={"session_id": "s-secrets"}))
    )
    return out


def mcp_lookup(service: ContextEngineService) -> str:
    async def go():
        async with Client(build_mcp_server(lambda: service, lambda _r: ADMIN)) as client:
            return await client.call_tool(
                "lookup_knowledge",
                {"query": "secret token password", "target_uri": "ctx://resources/secrets/", "top_k": 50},
            )

    res = anyio.run(go)
    assert not res.is_error
    return json.dumps(res.structured_content) + res.content[0].text


def stored_surfaces(service: ContextEngineService, home) -> dict[str, str]:
    out: dict[str, str] = {}
    stored = []
    for kind, _, _ in SECRETS:
        stored.append(service.content.read_level("acme", doc_uri(kind), Level.L0) or "")
        stored.append(service.content.read_level("acme", doc_uri(kind), Level.L1) or "")
        stored.append(service.metadata.get_node("acme", doc_uri(kind)).title)
    stored.append(service.content.read_level("acme", "ctx://resources/ops/credentials.md", Level.L0) or "")
    stored.append(service.content.read_level("acme", "ctx://resources/ops/credentials.md", Level.L1) or "")
    out["stored L0/L1/titles"] = json.dumps(stored)
    con = sqlite3.connect(home / "metadata.db")
    try:
        rows = con.execute("SELECT * FROM tool_invocations").fetchall()
    finally:
        con.close()
    assert len(rows) >= 3
    out["tool_invocations (stored rows)"] = json.dumps([[str(v) for v in r] for r in rows], ensure_ascii=False)
    return out


SURFACES = [
    "add-memory URI",
    "memory L2 (read_memory)",
    "search_memory (L0, trace)",
    "read_memory L1/L2",
    "similar search (L2 chunks, L0)",
    "ls",
    "tree",
    "lookup evidence",
    "lookup context pack",
    "lookup traces and hints",
    "lookup with a secret query",
    "tool_invocations (list)",
    "tool_invocations (get)",
    "tool_invocations (summary)",
    "lookup via MCP",
    "logs",
    "stored L0/L1/titles",
    "tool_invocations (stored rows)",
]


def test_the_corpus_has_24_kinds_or_more():
    assert len({kind for kind, _, _ in SECRETS}) == len(SECRETS) >= 24


@pytest.mark.parametrize("surface", SURFACES)
def test_no_secret_on_any_surface(world, surface):
    _, surfaces = world
    text = surfaces[surface]
    assert leaks(text) == [], f"{surface} leaks {len(leaks(text))}/{len(ALL_SECRETS)}"
    # the surface did carry the secrets' places (redacted), not nothing
    if surface not in ("add-memory URI", "tool_invocations (summary)", "lookup traces and hints"):
        assert "[REDACTED:" in text, surface


def test_the_memory_slug_keeps_the_words_but_not_the_passwords(world):
    _, surfaces = world
    (uri,) = json.loads(surfaces["add-memory URI"])
    assert uri.startswith("ctx://user/alice/memories/profile/my-vault-password-is-and-the-redis-url")
    assert "fakevaultpassw0rd" not in uri.lower() and "fakeredispassw0rd" not in uri.lower()


def test_logs_were_written_and_redacted(world):
    _, surfaces = world
    lines = [json.loads(x) for x in surfaces["logs"].splitlines() if x.strip()]
    events = {line["event"] for line in lines}
    assert {"http_request", "add_memory"} <= events
    assert any("[REDACTED:" in line["event"] for line in lines if line.get("logger") == "context_engine.tests")


@pytest.mark.parametrize(("kind", "line", "secret"), SECRETS, ids=[k for k, _, _ in SECRETS])
def test_every_kind_is_caught_by_the_patterns_alone(kind, line, secret):
    """The fast layer alone (search abstracts, audit rows, logs) already catches every kind of the corpus."""
    out = redact_patterns(f"before\n{line}\nafter")
    assert secret not in out and "[REDACTED:" in out
    assert out.startswith("before\n") and out.endswith("\nafter")


def test_log_processor_redacts_nested_fields():
    event = {"event": "connect mysql://root:FakeMyPassw0rd@db", "extra": {"args": ["token ghp_" + "a1" * 20]}, "n": 3}
    out = redact_log_event(None, "info", event)
    assert "FakeMyPassw0rd" not in json.dumps(out) and "ghp_" not in json.dumps(out)
    assert out["n"] == 3
