"""Property: inside one account, tool invocations, lookup sessions and evidence verification belong to the principal
(role, user space, agent space) that made them; the account admin sees every principal's; nothing crosses accounts
(issue 14 item 3; docs/security.md "Tenancy model"). Extends tests/retrieval/test_tenancy_property.py (accounts,
spaces, search and read) to users within an account, over the real HTTP server and the MCP endpoint behind the same
API keys.

A module-level engine on the suite's model holds a few runbooks in two accounts whose user and agent names coincide.
Hypothesis draws a caller (one API key each), an interface (HTTP or MCP) and an action: a lookup in a session id that
every principal also uses, listing invocations (optionally of one session), getting one invocation by id, a session
summary, or verifying an excerpt of some principal's invocation. A model of who made which invocation and which
documents each (principal, session) already received is updated as calls are made, and every answer is checked
against it: exactly the caller's rows (the admin: its account's), dedup only of what the caller's own session saw,
and another user's invocation answered exactly like a missing one (same status and body but for the id).
Examples: ``CE_PROPERTY_EXAMPLES`` (default 150), seeded (``derandomize``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import anyio
import httpx
import httpx2
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from context_engine.interfaces.http import create_app
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.http.helpers import LiveServer, bearer

EXAMPLES = int(os.environ.get("CE_PROPERTY_EXAMPLES", "150"))
CALLERS = {
    "acme-admin": RequestContext(account_id="acme", role="admin"),
    "acme-alice": RequestContext(account_id="acme", role="user", user_space="alice", agent_space="bot"),
    "acme-alice-other-agent": RequestContext(account_id="acme", role="user", user_space="alice", agent_space="other"),
    "acme-carol": RequestContext(account_id="acme", role="user", user_space="carol"),
    "acme-agent": RequestContext(account_id="acme", role="agent", agent_space="bot"),
    "globex-admin": RequestContext(account_id="globex", role="admin"),
    "globex-alice": RequestContext(account_id="globex", role="user", user_space="alice", agent_space="bot"),
}
SESSIONS = ["s1", "s2", "incident-7"]
QUERIES = ["disk pressure on the node", "certificate expires soon", "pod restarts in a loop", "dns resolution fails"]
DOCS = {
    "ctx://resources/ops/disk.md": "# Disk pressure\n\nThe node runs out of disk space. Delete old images.\n",
    "ctx://resources/ops/cert.md": "# Certificate expiry\n\nA certificate expires soon. Renew it with cert-manager.\n",
    "ctx://resources/ops/crash.md": "# Pod crash loop\n\nA pod restarts in a loop. Read its previous logs.\n",
    "ctx://resources/ops/dns.md": "# DNS failure\n\nName resolution fails in the cluster. Check CoreDNS.\n",
}


@dataclass
class Made:
    """One invocation as the model knows it."""

    invocation_id: str
    caller: str
    session_id: str | None
    excerpt: str | None  # a quotable evidence excerpt it returned


@dataclass
class Model:
    invocations: list[Made] = field(default_factory=list)
    seen: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (caller, session) -> documents received

    def visible(self, caller: str) -> list[Made]:
        ctx = CALLERS[caller]
        return [
            m
            for m in self.invocations
            if CALLERS[m.caller].account_id == ctx.account_id and (ctx.is_admin or m.caller == caller)
        ]


@dataclass
class World:
    server: LiveServer
    keys: dict[str, str]
    model: Model


@pytest.fixture(scope="module")
def world(tmp_path_factory, embedder):
    service = ContextEngineService(load_settings(tmp_path_factory.mktemp("user-scope")), embedder=embedder)
    store = ApiKeyStore(service.metadata)
    keys = {name: store.create(ctx, name)[1] for name, ctx in CALLERS.items()}
    for account in ("acme", "globex"):
        for uri, text in DOCS.items():
            service.add_text(text, uri, RequestContext(account_id=account, role="admin"))
    with LiveServer(create_app(service=service)) as server:
        yield World(server, keys, Model())
    service.close()


# ---- the two interfaces -------------------------------------------------------------------------------------------
def http(world: World, caller: str, method: str, path: str, **kw) -> httpx.Response:
    with httpx.Client(base_url=world.server.url, headers=bearer(world.keys[caller]), timeout=60) as c:
        return c.request(method, path, **kw)


def mcp(world: World, caller: str, tool: str, args: dict) -> dict:
    async def go():
        client = httpx2.AsyncClient(headers=bearer(world.keys[caller]), timeout=60)
        async with Client(streamable_http_client(f"{world.server.url}/mcp", http_client=client)) as session:
            return await session.call_tool(tool, args)

    res = anyio.run(go)
    assert not res.is_error, res.content[0].text
    return res.structured_content


def lookup(world: World, caller: str, via: str, args: dict) -> dict:
    if via == "mcp":  # the full answer (MCP answers compact by default): the test reads its evidence blocks
        return mcp(world, caller, "lookup_knowledge", {**args, "response_format": "full"})
    r = http(world, caller, "POST", "/api/v1/lookup_knowledge", json=args)
    assert r.status_code == 200, r.text
    return r.json()


def verify(world: World, caller: str, via: str, invocation_id: str, excerpt: str) -> dict:
    args = {"invocation_id": invocation_id, "excerpt": excerpt}
    if via == "mcp":
        return mcp(world, caller, "verify_evidence", args)
    r = http(world, caller, "POST", "/api/v1/verify_evidence", json=args)
    assert r.status_code == 200, r.text
    return r.json()


# ---- the actions --------------------------------------------------------------------------------------------------
def do_lookup(world: World, caller: str, via: str, session: str | None, query: str) -> None:
    args = {"query": query, "top_k": 2}
    if session is not None:
        args["session_id"] = session
    got = lookup(world, caller, via, args)
    seen = world.model.seen.setdefault((caller, session), set()) if session else set()
    for block in got["evidence_blocks"]:
        # dedup tells the caller only about what its own session received, never another principal's
        assert (block["relevance_level"] == "DEDUPED") == (block["doc_id"] in seen), (caller, session, block)
    fresh = [b for b in got["evidence_blocks"] if b["relevance_level"] != "DEDUPED"]
    seen.update(b["doc_id"] for b in fresh)
    event(f"lookup with {len(got['evidence_blocks']) - len(fresh)} deduped")
    excerpt = next((b["text"][:30] for b in fresh if len(b["text"]) >= 30), None)
    world.model.invocations.append(Made(got["invocation_id"], caller, session, excerpt))


def do_list(world: World, caller: str, session: str | None) -> None:
    params = {"limit": 1000, **({"session_id": session} if session else {})}
    r = http(world, caller, "GET", "/api/v1/tool_invocations", params=params)
    assert r.status_code == 200, r.text
    got = {row["invocation_id"] for row in r.json()["invocations"]}
    expected = {m.invocation_id for m in world.model.visible(caller) if session is None or m.session_id == session}
    assert got == expected, caller


def do_summary(world: World, caller: str, session: str) -> None:
    r = http(world, caller, "GET", "/api/v1/tool_invocations/summary", params={"session_id": session})
    assert r.status_code == 200, r.text
    lines = {line["invocation_id"] for line in r.json()["invocations"]}
    assert lines == {m.invocation_id for m in world.model.visible(caller) if m.session_id == session}, caller


def do_get(world: World, caller: str, target: Made) -> None:
    allowed = target in world.model.visible(caller)
    event(f"get {'own/admin' if allowed else 'foreign'}")
    r = http(world, caller, "GET", f"/api/v1/tool_invocations/{target.invocation_id}")
    if allowed:
        assert r.status_code == 200 and r.json()["invocation_id"] == target.invocation_id
        return
    missing = http(world, caller, "GET", f"/api/v1/tool_invocations/{'0' * 32}")
    assert r.status_code == missing.status_code == 404
    assert normalised(r.json(), target.invocation_id) == normalised(missing.json(), "0" * 32)


def do_verify(world: World, caller: str, via: str, target: Made) -> None:
    excerpt = target.excerpt or "an excerpt that no runbook here holds"
    got = verify(world, caller, via, target.invocation_id, excerpt)
    missing = verify(world, caller, via, "0" * 32, excerpt)
    event(f"verify {'own/admin' if target in world.model.visible(caller) else 'foreign'}")
    if target in world.model.visible(caller):
        assert got["verified"] is (target.excerpt is not None), (caller, target, got)
    else:
        assert normalised(got, target.invocation_id) == normalised(missing, "0" * 32)
        assert got["reason"] == "invocation_not_found" and not got["verified"]


def normalised(body: dict, invocation_id: str) -> str:
    """A body with the asked id and the request id blanked: what must not differ between foreign and missing."""
    text = json.dumps({k: v for k, v in body.items() if k != "request_id"}, sort_keys=True)
    return text.replace(invocation_id, "<id>")


# ---- the property -------------------------------------------------------------------------------------------------
actions = st.sampled_from(["lookup", "lookup", "list", "summary", "get", "verify"])


@given(
    caller=st.sampled_from(sorted(CALLERS)),
    via=st.sampled_from(["http", "mcp"]),
    action=actions,
    session=st.sampled_from([None, *SESSIONS]),
    query=st.sampled_from(QUERIES),
    pick=st.integers(min_value=0, max_value=10_000),
)
@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_invocations_and_sessions_belong_to_their_principal(world, caller, via, action, session, query, pick):
    made = world.model.invocations
    if action == "lookup" or not made:
        do_lookup(world, caller, via, session, query)
    elif action == "list":
        do_list(world, caller, session)
    elif action == "summary":
        do_summary(world, caller, session or SESSIONS[0])
    elif action == "get":
        do_get(world, caller, made[pick % len(made)])
    else:
        do_verify(world, caller, via, made[pick % len(made)])


def test_same_session_id_is_two_sessions_for_two_users(world):
    """The example of the issue: alice's lookups in session "shared" never make carol's results DEDUPED."""
    q = {"query": "disk pressure on the node", "top_k": 2, "session_id": "shared-by-name"}
    first = lookup(world, "acme-alice", "http", q)
    again = lookup(world, "acme-alice", "http", q)
    carol = lookup(world, "acme-carol", "mcp", q)
    assert first["evidence_blocks"] and all(b["relevance_level"] != "DEDUPED" for b in first["evidence_blocks"])
    assert all(b["relevance_level"] == "DEDUPED" for b in again["evidence_blocks"])
    assert all(b["relevance_level"] != "DEDUPED" for b in carol["evidence_blocks"])
    assert [b["doc_id"] for b in carol["evidence_blocks"]] == [b["doc_id"] for b in first["evidence_blocks"]]
    for caller, got in (("acme-alice", first), ("acme-alice", again), ("acme-carol", carol)):
        world.model.invocations.append(Made(got["invocation_id"], caller, "shared-by-name", None))
