"""Over HTTP, memory metadata nested deeper than 32 levels is ``400 WRT-4002`` on every memory write, and the
user's memory list and reads go on answering 200 (before: 256 levels were stored, then ``GET /api/v1/memories``
answered 500 API-5001 until the memory was deleted). The metadata is sent as raw JSON text, as a client would."""

from __future__ import annotations

import pytest

from context_engine.ingest.memory import METADATA_MAX_DEPTH


def nested_json(depth: int) -> str:
    """``{"a": {"a": ... 1}}`` with ``depth`` objects, as JSON text."""
    return '{"a":' * depth + "1" + "}" * depth


def post(client, path: str, body: str, headers: dict[str, str]):
    return client.post(path, content=body, headers={**headers, "Content-Type": "application/json"})


WRITES = {
    "add_memory": ("/api/v1/memories", '{{"text": "Alice keeps bees.", "metadata": {md}}}'),
    "add_memory at a URI": (
        "/api/v1/memories",
        '{{"text": "Alice keeps bees.", "uri": "ctx://user/alice/memories/hobby/bees.md", "metadata": {md}}}',
    ),
    "batch": ("/api/v1/memories/batch", '{{"items": [{{"text": "Alice keeps bees.", "metadata": {md}}}]}}'),
    "messages": (
        "/api/v1/memories/messages",
        '{{"conversation_id": "deep", "messages": [{{"content": "I keep bees.", "metadata": {md}}}]}}',
    ),
}


@pytest.mark.parametrize("write", WRITES, ids=list(WRITES))
def test_deep_metadata_is_a_400_and_the_list_still_answers(client, tenants, write):
    path, body = WRITES[write]
    before = client.get("/api/v1/memories", params={"limit": 200}, headers=tenants.alice)
    assert before.status_code == 200, before.text
    r = post(client, path, body.format(md=nested_json(256)), tenants.alice)
    assert r.status_code == 400, r.text
    env = r.json()
    assert env["code"] == "WRT-4002" and env["details"]["max_depth"] == METADATA_MAX_DEPTH
    after = client.get("/api/v1/memories", params={"limit": 200}, headers=tenants.alice)
    assert after.status_code == 200 and after.json() == before.json()


def test_an_update_with_deep_metadata_is_a_400_and_metadata_at_the_limit_is_stored(client, tenants):
    r = post(client, "/api/v1/memories", '{"text": "Alice keeps two hives."}', tenants.alice)
    assert r.status_code == 200, r.text
    uri = r.json()["uris"][0]
    body = '{{"uri": "{uri}", "text": "Alice keeps three hives.", "metadata": {md}}}'
    r = post(client, "/api/v1/memories/update", body.format(uri=uri, md=nested_json(256)), tenants.alice)
    assert r.status_code == 400 and r.json()["code"] == "WRT-4002", r.text
    r = post(client, "/api/v1/memories/update", body.format(uri=uri, md=nested_json(32)), tenants.alice)
    assert r.status_code == 200, r.text
    got = client.get("/api/v1/memories/item", params={"uri": uri}, headers=tenants.alice)
    assert got.status_code == 200, got.text
    assert got.json()["text"] == "Alice keeps three hives." and got.json()["version"] == 2
    listed = client.get("/api/v1/memories", params={"limit": 200}, headers=tenants.alice)
    assert listed.status_code == 200 and uri in [m["uri"] for m in listed.json()["items"]]
