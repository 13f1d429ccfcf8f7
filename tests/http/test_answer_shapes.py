"""One answer shape for the memory writes, one word for lists (issue 29): ``add_memory`` answers its counts as before
and ``items`` (the memory's outcome) as ``add_memories`` and ``add_messages`` do, on the Python API, HTTP and MCP;
the audit list answers ``items`` (and, deprecated, the same rows as ``invocations``)."""

from __future__ import annotations

import anyio

from context_engine.interfaces.mcp.server import build_mcp_server
from tests.http.conftest import ALICE


def test_add_memory_answers_items_like_the_batch_calls(service, client, tenants):
    py = service.add_memory("Alice's bike is a green Brompton.", ALICE)
    assert py.nodes == 1 and [(o.uri, o.status) for o in py.items] == [(py.uris[0], "added")]
    again = service.add_memory("alice's bike is a green brompton!", ALICE)
    assert again.unchanged == 1 and again.items[0].status == "unchanged" and again.items[0].uri == py.uris[0]
    r = client.post("/api/v1/memories", json={"text": "Alice has a peanut allergy."}, headers=tenants.alice)
    body = r.json()
    assert r.status_code == 200 and body["nodes"] == 1 and body["items"][0]["status"] == "added"
    batch = client.post(
        "/api/v1/memories/batch", json={"items": [{"text": "Alice swims on Tuesdays."}]}, headers=tenants.alice
    ).json()
    assert set(body["items"][0]) == set(batch["items"][0])  # the same outcome model
    server = build_mcp_server(lambda: service, lambda _r: ALICE)
    result = anyio.run(server.call_tool, "add_memory", {"text": "Alice plays chess on Sundays."})
    assert not result.is_error and result.structured_content["items"][0]["status"] == "added"
    with_uri = service.add_memory("Alice's locker is 12.", ALICE, uri="ctx://user/alice/memories/misc/locker.md")
    assert [(o.uri, o.status) for o in with_uri.items] == [("ctx://user/alice/memories/misc/locker.md", "added")]


def test_the_audit_list_names_its_rows_items(service, client, tenants):
    client.post(
        "/api/v1/lookup_knowledge", json={"query": "node not ready", "session_id": "shape-1"}, headers=tenants.alice
    )
    body = client.get("/api/v1/tool_invocations", params={"session_id": "shape-1"}, headers=tenants.alice).json()
    assert len(body["items"]) == 1 and body["items"][0]["tool_name"] == "lookup_knowledge"
    assert body["invocations"] == body["items"]  # the deprecated name, still sent
    spec = client.get("/openapi.json").json()["components"]["schemas"]["ToolInvocationList"]["properties"]
    assert spec["invocations"].get("deprecated") is True
