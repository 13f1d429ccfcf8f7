"""A memory hit says when the memory happened (``occurred_at``, issue 25: an agent resolves "last Monday" in a hit
against it) on every surface: the full answer over HTTP, the compact one over HTTP and as the MCP tool's answer,
``read_memory``'s block; a node without a time leaves the field out of the JSON."""

from __future__ import annotations

import anyio

from context_engine.interfaces.mcp.server import build_mcp_server
from tests.http.conftest import ALICE

WHEN = "2024-10-14T16:00:00Z"  # the message's timestamp, 18:00 at UTC+2, in UTC


def _add(client, tenants, conversation: str) -> list[str]:
    messages = [
        {"role": "user", "content": "I started at Northwind last Monday.", "timestamp": "2024-10-14T18:00:00+02:00"},
        {"role": "assistant", "content": "Congratulations on the new job!"},  # no timestamp: no time
    ]
    r = client.post(
        "/api/v1/memories/messages",
        json={"conversation_id": conversation, "messages": messages},
        headers=tenants.alice,
    )
    assert r.status_code == 200, r.text
    return [item["uri"] for item in r.json()["items"]]


def test_http_hits_full_and_compact_and_the_read_block_carry_occurred_at(client, tenants):
    started, congrats = _add(client, tenants, "t-http")
    body = {"query": "When did Alice start at Northwind?", "conversation_id": "t-http", "top_k": 5}
    for response_format in ("full", "compact"):
        r = client.post(
            "/api/v1/search_memory", json=body | {"response_format": response_format}, headers=tenants.alice
        )
        assert r.status_code == 200, r.text
        hits = {h["uri"]: h for h in r.json()["hits"]}
        assert hits[started]["occurred_at"] == WHEN, response_format
        assert "occurred_at" not in hits[congrats], response_format
    read = client.post("/api/v1/read_memory", json={"uri": started, "level": "L2"}, headers=tenants.alice)
    assert read.status_code == 200 and read.json()["block"]["occurred_at"] == WHEN


def test_mcp_compact_hits_carry_occurred_at(client, tenants, service):
    started, congrats = _add(client, tenants, "t-mcp")
    server = build_mcp_server(lambda: service, lambda _r: ALICE)
    args = {"query": "When did Alice start at Northwind?", "conversation_id": "t-mcp", "top_k": 5}
    result = anyio.run(server.call_tool, "search_memory", args)
    assert not result.is_error, result.content
    hits = {h["uri"]: h for h in result.structured_content["hits"]}
    assert hits[started]["occurred_at"] == WHEN and "occurred_at" not in hits[congrats]
