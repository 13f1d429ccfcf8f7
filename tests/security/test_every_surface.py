"""No stored text returns a secret, on any route, tool or level (issue 27 "A secret in a breadcrumb").

A secret the patterns know is planted into every text a caller can store, each field with values of its own (a
password assignment, a GitHub token, an AWS key id, a postgres URL and, in bodies, a PEM key), so a leak names its
field:

* resources: the H1 title and H2 heading (breadcrumbs), the body, a URI path segment, a file name (path and upload);
* memories: text, category, metadata keys and values, the updated text (history);
* conversation messages: content, speaker, metadata, and the session id (a URI segment);
* skills: name, description, content, category;
* queries the engine records or echoes: lookup_knowledge's query and session id (audit rows with
  ``knowledge.audit_query_text``), search_memory and similar-search queries, a verify_evidence excerpt.

Then every route of the HTTP app (enumerated from ``app.routes``: a route that is neither called here nor listed in
:data:`NO_STORED_TEXT` fails the test) and every MCP tool (enumerated from ``tools/list``) is called, at every level
and format: search_memory full, compact and with the detailed trace; read_memory L1 and L2; similar search at level
2 and 0; lookup_knowledge full and compact; tool invocations list, get and summary; ls and tree; memories list and
item; the memory event history; every console fragment. Every string of every answer (JSON keys and values, walked
recursively; HTML text unescaped) is searched for every planted value: none may appear.

Secrets in an explicit L2 read are redacted too: DESIGN.md §6 says L2 returns the content "with secrets redacted".
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.http import create_app
from context_engine.interfaces.http.console.routes import router as console_router
from context_engine.interfaces.http.errors import envelope_response
from context_engine.interfaces.http.responses import RedactedJSONResponse
from context_engine.interfaces.http.routes import router as api_router
from context_engine.interfaces.mcp.server import build_mcp_server
from context_engine.redaction import redact_output, redact_patterns
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.http.helpers import LOOPBACK_URL, bearer

ADMIN = RequestContext(account_id="acme", role="admin")
ALICE = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="alice-bot")

#: Routes that return no stored text, each with why. Every other route of the app must be called below.
NO_STORED_TEXT: dict[tuple[str, str], str] = {
    ("GET", "/healthz"): "a constant",
    ("GET", "/readyz"): "model and backend names, the process id",
    ("GET", "/api/v1/stats"): "counts, model and index names and states (admin keys): no stored text",
    ("GET", "/metrics"): "Prometheus counters: code and route labels, no stored text",
    ("GET", "/openapi.json"): "the schema",
    ("HEAD", "/openapi.json"): "the schema",
    ("GET", "/docs"): "the Swagger page",
    ("GET", "/docs/oauth2-redirect"): "a static page",
    ("GET", "/redoc"): "the ReDoc page",
    ("GET", "/console"): "a redirect",
    ("GET", "/console/"): "a redirect",
    ("GET", "/console/fragments/write"): "the write forms: the caller's capabilities only",
    ("GET", "/console/fragments/eval"): "the server's evaluation reports (admin), not an account's stored text",
    ("GET", "/console/fragments/eval/report"): "the server's evaluation reports (admin)",
    ("GET", "/console/fragments/eval/compare"): "the server's evaluation reports (admin)",
    ("GET", "/mcp"): "the MCP transport: every tool is called through the MCP client below",
    ("POST", "/mcp"): "the MCP transport: every tool is called through the MCP client below",
    ("DELETE", "/mcp"): "the MCP transport: every tool is called through the MCP client below",
    ("HEAD", "/mcp"): "the MCP transport: every tool is called through the MCP client below",
}
#: Console pages are layouts and forms, no data (docs/console.md); their paths come from the router.
PAGE_PREFIX = "/console/"


def secrets_for(tag: str) -> tuple[str, list[str]]:
    """A line of four secrets unique to ``tag`` (letters and digits) and the values that must never come back."""
    up = re.sub(r"[^A-Z0-9]", "", tag.upper())
    values = [
        f"Fk{tag}Pw0rd",
        "ghp_" + (tag + "X0" * 20)[:36],
        "AKIA" + (up + "0" * 16)[:16],
        f"Pg{tag}Pw0rd",
    ]
    line = f"password={values[0]} token {values[1]} key {values[2]} db postgres://app:{values[3]}@db.internal/app"
    return line, values


def pem_for(tag: str) -> tuple[str, str]:
    body = f"MIIEFAKE{tag}keyEXAMPLEonlyForTests0123456789"
    return f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n{body}\n-----END RSA PRIVATE KEY-----", body


class Planted:
    """Every planted value with the field it was planted in."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.planted: list[tuple[str, list[str]]] = []  # (the planted text, its values)

    def line(self, field: str) -> str:
        tag = re.sub(r"[^A-Za-z0-9]", "", field)[:12] + str(len(self.values))
        line, values = secrets_for(tag)
        for v in values:
            self.values[v] = field
        self.planted.append((line, values))
        return line

    def password(self, field: str) -> str:
        """One short ``password=…`` (a URI segment, a name): the value alone."""
        value = f"Fk{re.sub(r'[^A-Za-z0-9]', '', field)[:10]}{len(self.values)}Pw0rd"
        self.values[value] = field
        self.planted.append((f"password={value}", [value]))
        return f"password={value}"

    def aws(self, field: str) -> str:
        value = "AKIA" + (re.sub(r"[^A-Z0-9]", "", field.upper())[:12] + f"{len(self.values):04d}")[:16].ljust(16, "0")
        self.values[value] = field
        self.planted.append((value, [value]))
        return value

    def pem(self, field: str) -> str:
        text, body = pem_for(re.sub(r"[^A-Za-z0-9]", "", field)[:10])
        self.values[body] = field
        self.planted.append((text, [body]))
        return text

    def leaks(self, text: str) -> list[str]:
        folded = text.casefold()
        return sorted({f"{field}: {v}" for v, field in self.values.items() if v.casefold() in folded})


def strings_of(value: Any) -> Iterator[str]:
    """Every string of a JSON value: dict keys and values, list items, recursively."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from strings_of(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from strings_of(v)


def answer_text(body: str, content_type: str) -> str:
    if "json" in content_type:
        return "\n".join(strings_of(json.loads(body)))
    return html.unescape(body)


class Recorder:
    """Calls routes by their template, records which were called and what every answer said."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.called: set[tuple[str, str]] = set()
        self.answers: list[tuple[str, str]] = []

    def __call__(self, method: str, template: str, headers: dict[str, str], *, path: dict | None = None, **kw: Any):
        url = template.format(**(path or {}))
        r = self.client.request(method, url, headers=headers, **kw)
        assert r.status_code == 200, (method, url, r.status_code, r.text[:500])
        self.called.add((method, template))
        self.answers.append((f"{method} {url} {json.dumps(kw.get('json') or kw.get('params') or '')[:80]}",
                             answer_text(r.text, r.headers.get("content-type", ""))))
        return r


@pytest.fixture(scope="module")
def world(tmp_path_factory, embedder):
    home = tmp_path_factory.mktemp("every-surface-home")
    root = tmp_path_factory.mktemp("every-surface-upload")
    p = Planted()
    (root / "ops").mkdir()
    path_file = root / "ops" / f"{p.password('file name (path)')}.md"
    path_file.write_text(f"# Path runbook\n\n{p.line('file body (path)')}\n", encoding="utf-8")
    settings = load_settings(
        home, knowledge={"audit_query_text": True}, http={"allowed_upload_roots": (root,)}
    )
    service = ContextEngineService(settings, embedder=embedder)
    keys = ApiKeyStore(service.metadata)
    _, admin_key = keys.create(ADMIN, "admin")
    _, alice_key = keys.create(ALICE, "alice")
    admin, alice = bearer(admin_key), bearer(alice_key)
    app = create_app(service=service)
    with TestClient(app, base_url=LOOPBACK_URL, client=("127.0.0.1", 40000)) as client:
        call = Recorder(client)
        exercise_http(call, p, admin, alice, path_file)
        mcp_answers = exercise_mcp(service, p, path_file)
        yield app, p, call, mcp_answers
    service.close()


FAILOVER_URI = "ctx://resources/planted/failover.md"


def exercise_http(call: Recorder, p: Planted, admin: dict, alice: dict, path_file) -> None:
    # ---- writes (their answers are checked too) ----
    title, heading = p.line("H1 title"), p.line("H2 heading (breadcrumb)")
    doc = (
        f"# Database failover {title}\n\n{p.line('resource body')}\n\n## Promote the replica {heading}\n\n"
        f"Run the promotion.\n{p.line('section body')}\n\n{p.pem('resource PEM')}\n"
    )
    call("POST", "/api/v1/resources/text", admin, json={"text": doc, "uri": FAILOVER_URI})
    seg_uri = f"ctx://resources/planted/{p.password('URI segment')}-{p.aws('URI segment aws')}.md"
    call("POST", "/api/v1/resources/text", admin, json={"text": f"# Rotation\n\nRotate keys.\n{p.line('doc2 body')}\n",
                                                        "uri": seg_uri})
    call("POST", "/api/v1/resources", admin, json={"path": str(path_file), "target_uri": "ctx://resources/paths/"})
    upload_name = f"{p.password('upload file name')}.md"
    call("POST", "/api/v1/resources/upload", admin,
         files=[("files", (upload_name, f"# Upload\n\n{p.line('upload body')}\n".encode(), "text/markdown"))],
         data={"target_uri": "ctx://resources/uploads/"})
    meta = {p.password("metadata key"): p.line("metadata value"), "nested": [p.line("nested metadata value")]}
    memory = {"text": f"My vault note {p.line('memory text')}", "category": "profile", "metadata": meta}
    added = call("POST", "/api/v1/memories", alice, json=memory).json()
    memory_uri = added["uris"][0]
    call("POST", "/api/v1/memories/batch", alice, json={"items": [
        {"text": f"Batch memory {p.line('batch memory text')}", "category": p.password("memory category"),
         "metadata": {"k": p.line("batch metadata value")}},
    ]})
    session = f"s-{p.password('session id (messages)')}"
    call("POST", "/api/v1/memories/messages", alice, json={"conversation_id": session, "messages": [
        {"role": "user", "content": f"The failover {p.line('message content')}", "speaker": p.password("speaker"),
         "metadata": {"m": p.line("message metadata")}},
        {"role": "assistant", "content": f"Noted {p.line('assistant message content')}"},
    ]})
    call("POST", "/api/v1/memories/update", alice,
         json={"uri": memory_uri, "text": f"My vault note, updated {p.line('updated memory text')}",
               "metadata": {"u": p.line("updated metadata")}})
    call("POST", "/api/v1/skills", alice, json={
        "name": p.password("skill name"), "description": f"Rotate {p.line('skill description')}",
        "content": f"# Skill\n\n{p.line('skill content')}\n", "category": p.password("skill category")})

    # ---- reads, every level and format ----
    q = "database failover promote replica password token key vault note"
    for body in ({}, {"response_format": "compact"}, {"include_debug": True, "trace_level": "detailed"}):
        call("POST", "/api/v1/search_memory", admin, json={"query": q, "top_k": 50, **body})
        call("POST", "/api/v1/search_memory", alice, json={"query": q, "top_k": 50, **body})
    call("POST", "/api/v1/search_memory", alice, json={"query": f"failover {p.line('search query')}",
                                                       "conversation_id": session})
    uris = [FAILOVER_URI, memory_uri]
    tree = call("GET", "/api/v1/tree", admin, params={"uri": "ctx://resources/", "max_depth": 5}).json()
    uris += [n for n in re.findall(r'"uri":\s*"([^"]+)"', json.dumps(tree)) if not n.endswith("/")]
    for uri in dict.fromkeys(uris):
        if "[REDACTED" in uri:
            continue  # a URI whose segment held a secret no longer names its node
        for level in ("L1", "L2"):
            ctx = alice if uri.startswith("ctx://user/") else admin
            call("POST", "/api/v1/read_memory", ctx, json={"uri": uri, "level": level, "expand_relations": True})
    for level in (2, 0):
        for who in (admin, alice):
            call("POST", "/api/search/similar", who, json={"query": q, "top_k": 100, "level": level})
    call("POST", "/api/search/similar", admin, json={"query": f"failover {p.line('similar query')}"})
    call("GET", "/api/v1/ls", admin, params={"uri": "ctx://resources/planted/"})
    call("GET", "/api/v1/ls", alice, params={"uri": "ctx://user/alice/memories/"})
    call("GET", "/api/v1/tree", alice, params={"uri": "ctx://user/alice/", "max_depth": 6})
    call("GET", "/api/v1/tree", alice, params={"uri": "ctx://agent/alice-bot/", "max_depth": 6})

    lookup_session = f"look-{p.password('lookup session id')}"
    results = []
    for fmt in ("full", "compact"):
        results.append(call("POST", "/api/v1/lookup_knowledge", admin, json={
            "query": f"database failover promote the replica {p.line('lookup query ' + fmt)}",
            "session_id": lookup_session, "top_k": 20, "response_format": fmt,
            "context_token_budget": 20000}).json())
    invocation = results[0]["invocation_id"]
    call("POST", "/api/v1/verify_evidence", admin,
         json={"invocation_id": invocation, "excerpt": f"Run the promotion {p.line('verify excerpt')}"})
    call("GET", "/api/v1/tool_invocations", admin, params={"session_id": lookup_session})
    call("GET", "/api/v1/tool_invocations", admin)
    call("GET", "/api/v1/tool_invocations/summary", admin, params={"session_id": lookup_session})
    call("GET", "/api/v1/tool_invocations/{invocation_id}", admin, path={"invocation_id": invocation})

    call("GET", "/api/v1/memories", alice, params={"limit": 200})
    call("GET", "/api/v1/memories", alice, params={"conversation_id": session})
    call("GET", "/api/v1/memories/item", alice, params={"uri": memory_uri})

    # ---- console fragments ----
    for who in (admin, alice):
        call("GET", "/console/fragments/whoami", who)
        call("GET", "/console/fragments/roots", who)
    call("GET", "/console/fragments/tree", admin, params={"uri": "ctx://resources/planted/"})
    call("GET", "/console/fragments/tree", alice, params={"uri": "ctx://user/alice/memories/"})
    for uri in (FAILOVER_URI, memory_uri):
        call("GET", "/console/fragments/node", alice if uri.startswith("ctx://user/") else admin, params={"uri": uri})
    call("POST", "/console/fragments/search", admin, json={"query": q, "top_k": 50})
    call("POST", "/console/fragments/lookup", admin, json={"query": "database failover promote the replica",
                                                           "session_id": lookup_session})
    call("GET", "/console/fragments/sessions", admin)
    call("GET", "/console/fragments/sessions", admin, params={"session_id": lookup_session})
    call("GET", "/console/fragments/memories", alice)
    call("GET", "/console/fragments/memories", admin, params={"user_space": "alice"})
    call("POST", "/console/fragments/verify", admin, json={"invocation_id": invocation, "excerpt": "Run the promotion"})
    call("POST", "/console/fragments/write/text", admin, json={
        "text": f"# Console doc {p.line('console doc title')}\n\n{p.line('console doc body')}\n",
        "uri": f"ctx://resources/console/{p.password('console URI')}.md"})
    call("POST", "/console/fragments/write/memory", alice, json={"text": f"Console memory {p.line('console memory')}"})

    # ---- moves and deletes last ----
    call("POST", "/api/v1/move", admin, json={"src": seg_uri,
                                              "dst": f"ctx://resources/moved/{p.password('move target')}.md"})
    call("POST", "/api/v1/delete", admin, json={"uri": "ctx://resources/moved/", "recursive": True})
    call("POST", "/console/fragments/write/delete", admin, json={"uri": "ctx://resources/uploads/", "recursive": True})
    call("POST", "/api/v1/memories/delete", alice, json={"uri": memory_uri})

    # ---- the memory event history last: the ADDs, UPDATE and DELETE above, with their abstracts ----
    call("GET", "/api/v1/memories/events", alice, params={"limit": 200})
    call("GET", "/api/v1/memories/events", admin, params={"user_space": "alice", "limit": 200})
    call("GET", "/api/v1/memories/events", alice, params={"uri": memory_uri})
    call("GET", "/console/fragments/memories", alice)
    call("GET", "/console/fragments/memories", admin, params={"user_space": "alice", "uri": memory_uri})


def exercise_mcp(service: ContextEngineService, p: Planted, path_file) -> dict[str, list[str]]:
    """Every MCP tool, called with planted secrets where it stores text and at every format where it reads."""
    q = "database failover promote replica password token key vault note"

    async def go() -> dict[str, list[str]]:
        answers: dict[str, list[str]] = {}
        async with (
            Client(build_mcp_server(lambda: service, lambda _r: ALICE)) as alice,
            Client(build_mcp_server(lambda: service, lambda _r: ADMIN)) as admin,
        ):
            tools = {t.name for t in (await admin.list_tools()).tools}

            async def call(client: Client, name: str, args: dict[str, Any]) -> Any:
                res = await client.call_tool(name, args)
                assert not res.is_error, (name, res.content[0].text[:500])
                assert name in tools
                answers.setdefault(name, []).append(
                    "\n".join([*strings_of(res.structured_content), res.content[0].text])
                )
                return res.structured_content

            added = await call(alice, "add_memory", {"text": f"MCP note {p.line('mcp memory text')}",
                                                     "metadata": {"v": p.line("mcp metadata")}})
            uri = added["uris"][0]
            await call(alice, "add_memories", {"items": [{"text": f"MCP batch {p.line('mcp batch text')}"}]})
            await call(alice, "add_messages", {"conversation_id": f"mcp-{p.password('mcp session id')}", "messages": [
                {"content": f"MCP message {p.line('mcp message')}", "speaker": p.password("mcp speaker")}]})
            await call(alice, "update_memory", {"uri": uri, "text": f"MCP note updated {p.line('mcp updated text')}"})
            await call(alice, "add_skill", {"name": p.password("mcp skill name"),
                                            "description": f"MCP skill {p.line('mcp skill description')}",
                                            "content": p.line("mcp skill content")})
            mcp_doc = f"# MCP doc {p.line('mcp doc title')}\n\n{p.line('mcp body')}\n"
            mcp_uri = f"ctx://resources/mcp/{p.password('mcp URI')}.md"
            await call(admin, "add_resource", {"uri": mcp_uri, "text": mcp_doc})
            await call(admin, "add_resource", {"uri": "ctx://resources/mcp-paths/", "path": str(path_file)})
            for fmt in ("compact", "full"):
                for client in (admin, alice):
                    await call(client, "search_memory", {"query": q, "top_k": 50, "response_format": fmt,
                                                         "include_debug": True, "trace_level": "detailed"})
            for level in ("L1", "L2"):
                await call(admin, "read_memory", {"uri": FAILOVER_URI, "level": level})
                await call(alice, "read_memory", {"uri": uri, "level": level})
            looked = None
            for fmt in ("compact", "full"):
                looked = await call(admin, "lookup_knowledge", {
                    "query": f"database failover promote {p.line('mcp lookup query ' + fmt)}",
                    "session_id": f"mcp-look-{p.password('mcp lookup session')}", "response_format": fmt})
            await call(admin, "verify_evidence", {"invocation_id": looked["invocation_id"],
                                                  "excerpt": f"Run {p.line('mcp verify excerpt')}"})
            for level in ("L0", "L1"):
                await call(admin, "ls", {"uri": "ctx://resources/mcp/", "level": level})
                await call(admin, "ls", {"uri": FAILOVER_URI, "level": level})
                await call(alice, "ls", {"uri": "ctx://user/alice/memories/", "level": level})
            await call(admin, "tree", {"uri": "ctx://resources/", "max_depth": 4, "max_nodes": 1000})
            await call(alice, "tree", {"uri": "ctx://user/alice/", "max_depth": 4})
            await call(alice, "list_memories", {"limit": 200})
            await call(alice, "get_memory", {"uri": uri})
            await call(alice, "delete_memory", {"uri": uri})
            answers["__tools__"] = sorted(tools)
        return answers

    return anyio.run(go)


def app_routes(app) -> set[tuple[str, str]]:
    """``(method, path)`` of every route: the OpenAPI schema's, the console router's (not in the schema) and the
    app's own plain routes (the MCP endpoint, the docs pages)."""
    out = {(m.upper(), path) for path, ops in app.openapi()["paths"].items() for m in ops}
    for r in [*console_router.routes, *app.routes]:
        if getattr(r, "path", None) and getattr(r, "methods", None):
            out |= {(m, r.path) for m in r.methods}
    return out


def test_every_route_is_exercised_or_listed(world):
    app, _, call, _ = world
    routes = app_routes(app)
    pages = {(m, path) for m, path in routes if path.startswith(PAGE_PREFIX) and "/fragments/" not in path}
    missing = routes - call.called - set(NO_STORED_TEXT) - pages
    assert missing == set(), f"routes neither exercised nor listed in NO_STORED_TEXT: {sorted(missing)}"
    stale = set(NO_STORED_TEXT) - routes
    assert stale == set(), f"NO_STORED_TEXT names routes the app does not have: {sorted(stale)}"
    # a router included later (FastAPI keeps included routers as entries of app.routes) must be one of these two,
    # or its routes would be enumerated by neither the schema nor the console router
    included = {id(r.original_router) for r in app.routes if getattr(r, "original_router", None) is not None}
    assert included <= {id(api_router), id(console_router)}


def test_every_mcp_tool_is_exercised(world):
    _, _, _, answers = world
    tools = set(answers["__tools__"])
    assert tools - set(answers) == set(), f"MCP tools not exercised: {sorted(tools - set(answers))}"


def test_a_secret_in_a_breadcrumb_is_redacted_in_similar_search(world):
    """The attack pass's case: /api/search/similar at level 2 returned ``breadcrumb`` unredacted."""
    _, p, call, _ = world
    hits = [text for label, text in call.answers if label.startswith("POST /api/search/similar")]
    assert hits and any("Database failover" in t for t in hits)
    heading = [v for v, f in p.values.items() if f in ("H1 title", "H2 heading (breadcrumb)")]
    assert [v for t in hits for v in heading if v.casefold() in t.casefold()] == []
    assert any("Database failover password=[REDACTED:credential]" in t for t in hits)


def test_no_planted_secret_on_any_http_answer(world):
    _, p, call, _ = world
    assert len(p.values) > 150
    leaked = {label: p.leaks(text) for label, text in call.answers if p.leaks(text)}
    assert leaked == {}, f"{len(leaked)} of {len(call.answers)} answers leak: {json.dumps(leaked, indent=1)[:60000]}"
    # the answers did carry the planted places (redacted), not nothing
    assert sum("[REDACTED:" in text for _, text in call.answers) > len(call.answers) // 2


def test_no_planted_secret_in_any_mcp_answer(world):
    _, p, _, answers = world
    leaked = {f"{name}#{i}": p.leaks(text) for name, texts in answers.items() if name != "__tools__"
              for i, text in enumerate(texts) if p.leaks(text)}
    assert leaked == {}, json.dumps(leaked, indent=1)[:60000]


def test_every_planted_value_is_one_the_patterns_catch(world):
    """The test plants only what redaction promises to catch, so a leak is a bug of a surface, not of a pattern."""
    _, p, _, _ = world
    assert p.planted and all(v not in redact_patterns(text) for text, values in p.planted for v in values)


# ---- the last pass itself, as a property -----------------------------------------------------------------------------
_SECRETS = st.sampled_from(["FkProp0Pw0rd", "ghp_" + "Pr0p" * 9, "AKIAPROP00000000TEST", "PgProp0Pw0rd"])
_FORMS = {
    "FkProp0Pw0rd": "password={}",
    "ghp_" + "Pr0p" * 9: "token {}",
    "AKIAPROP00000000TEST": "{}",
    "PgProp0Pw0rd": "postgres://u:{}@h/db",
}
_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
_PLANTED = st.builds(lambda pre, s, post: f"{pre} {_FORMS[s].format(s)} {post}", _TEXT, _SECRETS, _TEXT)
_LEAF = st.one_of(_TEXT, _PLANTED, st.integers(), st.floats(allow_nan=False), st.none(), st.booleans())
_TREE = st.recursive(
    _LEAF,
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.one_of(_TEXT, _PLANTED), kids, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_TREE)
def test_the_last_pass_leaves_no_planted_secret_anywhere_in_a_json_value(value):
    out = redact_output(value)
    text = json.dumps(out, ensure_ascii=False)
    assert not any(s in text for s in _FORMS), text
    assert redact_output(out) == out  # a second pass changes nothing: quotes of redacted text still verify


def test_the_last_pass_follows_the_read_time_switch(tmp_path):
    """``retrieval.redaction.enabled`` governs read-time redaction (docs/security.md), the last pass included;
    error envelopes are redacted whatever it says, as log lines are."""
    on = create_app(load_settings(tmp_path / "on"))
    off = create_app(load_settings(tmp_path / "off", retrieval={"redaction": {"enabled": False}}))
    assert on.router.default_response_class is RedactedJSONResponse
    assert off.router.default_response_class is not RedactedJSONResponse
    err = ContextEngineError(ErrorCode.URI_INVALID, "invalid URI 'ctx://resources/password=FkEnvelope1Pw0rd.md'")
    assert b"FkEnvelope1Pw0rd" not in envelope_response(err, "r1").body
