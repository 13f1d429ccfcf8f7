"""add_messages over HTTP in the formats agents already hold (issue 29 item 3): OpenAI chat messages (``name``, content
parts, tool calls and tool results, the SDK's response message) and LangChain's message dicts (``type`` human/ai, the
``messages_to_dict`` form) are stored with the right role and speaker; an unknown field is still refused."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def _stored(client, headers, uri):
    r = client.get("/api/v1/memories/item", params={"uri": uri}, headers=headers)
    assert r.status_code == 200, r.text
    body = r.json()
    return body["metadata"]["role"], body["metadata"]["speaker"], body["text"]


def test_openai_messages_keep_their_names_and_join_their_text_parts(client, tenants):
    messages = [
        {"role": "user", "name": "Sam", "content": "I moved to Lisbon last week."},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted,"}, {"type": "text", "text": "Lisbon."}]},
        {"role": "developer", "content": "Answer in English."},
    ]
    body = {"conversation_id": "oa", "messages": messages}
    r = client.post("/api/v1/memories/messages", json=body, headers=tenants.alice)
    assert r.status_code == 200, r.text
    uris = [item["uri"] for item in r.json()["items"]]
    assert [_stored(client, tenants.alice, u) for u in uris] == [
        ("user", "Sam", "I moved to Lisbon last week."),
        ("assistant", "assistant", "Noted,\nLisbon."),
        ("system", "system", "Answer in English."),
    ]


def test_langchain_message_dicts_map_human_and_ai(client, tenants):
    messages = [
        {"type": "human", "content": "My sister teaches chemistry in Leeds."},
        {"type": "ai", "data": {"content": "Good to know.", "name": "helper", "additional_kwargs": {}}},
    ]
    body = {"conversation_id": "lc", "messages": messages}
    r = client.post("/api/v1/memories/messages", json=body, headers=tenants.alice)
    assert r.status_code == 200, r.text
    uris = [item["uri"] for item in r.json()["items"]]
    assert [_stored(client, tenants.alice, u) for u in uris] == [
        ("user", "user", "My sister teaches chemistry in Leeds."),
        ("assistant", "helper", "Good to know."),
    ]


def test_an_unknown_role_or_field_is_still_refused(client, tenants):
    bad_role = {"conversation_id": "x", "messages": [{"role": "narrator", "content": "Once upon a time."}]}
    r = client.post("/api/v1/memories/messages", json=bad_role, headers=tenants.alice)
    assert r.status_code == 400 and r.json()["code"] == "WRT-4002", r.text
    bad_field = {"conversation_id": "x", "messages": [{"role": "user", "content": "x", "tool_call": []}]}
    r = client.post("/api/v1/memories/messages", json=bad_field, headers=tenants.alice)
    assert r.status_code in (400, 422) and r.json()["code"] in ("WRT-4002", "RET-4001"), r.text


def test_openai_tool_calls_tool_results_and_the_sdk_dump_are_stored(client, tenants):
    call = {"id": "call_1", "type": "function", "function": {"name": "restaurant_search", "arguments": "{}"}}
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"results": []}'},
        {
            "content": "Nothing open nearby.",
            "refusal": None,
            "role": "assistant",
            "annotations": [],
            "audio": None,
            "function_call": None,
            "tool_calls": None,
        },
    ]
    r = client.post(
        "/api/v1/memories/messages", json={"conversation_id": "tc", "messages": messages}, headers=tenants.alice
    )
    assert r.status_code == 200, r.text
    uris = [item["uri"] for item in r.json()["items"]]
    assert [_stored(client, tenants.alice, u) for u in uris] == [
        ("assistant", "assistant", "restaurant_search({})"),
        ("tool", "tool", '{"results": []}'),
        ("assistant", "assistant", "Nothing open nearby."),
    ]
    metadata = client.get("/api/v1/memories/item", params={"uri": uris[1]}, headers=tenants.alice).json()["metadata"]
    assert metadata["tool_call_id"] == "call_1"


def test_the_messages_tool_call_id_is_kept_over_the_callers_metadata(client, tenants):
    message = {"role": "tool", "tool_call_id": "call_1", "content": "ok", "metadata": {"tool_call_id": "call_9"}}
    r = client.post(
        "/api/v1/memories/messages", json={"conversation_id": "tc", "messages": [message]}, headers=tenants.alice
    )
    assert r.status_code == 200, r.text
    uri = r.json()["items"][0]["uri"]
    got = client.get("/api/v1/memories/item", params={"uri": uri}, headers=tenants.alice)
    assert got.status_code == 200, got.text
    assert got.json()["metadata"]["tool_call_id"] == "call_1"


def test_a_malformed_tool_call_names_its_message_index(client, tenants):
    messages = [
        {"role": "user", "content": "Find me a table."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {}}]},
    ]
    r = client.post(
        "/api/v1/memories/messages", json={"conversation_id": "tc", "messages": messages}, headers=tenants.alice
    )
    assert r.status_code == 400 and r.json()["code"] == "WRT-4002", r.text
    assert r.json()["details"]["index"] == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "assistant", "content": "x", "tool_calls": [{"type": ["x"], "function": {"name": "f"}}]},
        {"role": "assistant", "content": "x", "tool_calls": [{"type": {"a": 1}, "function": {"name": "f"}}]},
        {"role": "assistant", "content": "x", "function_call": {"type": [1], "name": "f", "arguments": "{}"}},
        {"role": "assistant", "content": "x", "tool_calls": [{"function": {"name": 5, "arguments": "{}"}}]},
    ],
)
def test_a_tool_call_field_of_the_wrong_type_is_400_wrt_4002_and_writes_nothing(client, tenants, service, bad):
    # a list or an object as a tool call's type was 500 API-5001 (TypeError: unhashable type)
    from tests.http.conftest import ALICE

    before = service.stats(ALICE)["nodes"]
    messages = [{"role": "user", "content": "Find me a table."}, bad]
    r = client.post(
        "/api/v1/memories/messages", json={"conversation_id": "tc-type", "messages": messages}, headers=tenants.alice
    )
    assert r.status_code == 400 and r.json()["code"] == "WRT-4002", r.text
    assert r.json()["details"]["index"] == 1
    assert "tool_calls[0]" in r.json()["message"] or "function_call" in r.json()["message"]
    assert service.stats(ALICE)["nodes"] == before
