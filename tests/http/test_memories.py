"""The memory API over HTTP (issue 11): messages, batches, list, get with history, update, delete; bad input gives
the documented code and writes nothing; another caller's memory gets the same 403 as a missing one.

Runs against the real app (tests/http/conftest.py's ``client`` and ``tenants``) on an engine of its own, opened with
``CE_MEMORY__MAX_BATCH_ITEMS=4`` so the batch limit is reachable.
"""

from __future__ import annotations

import pytest

from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.http.conftest import ALICE
from tests.http.helpers import bearer

BATCH_LIMIT = 4
ALICE_SESSIONS = "ctx://user/alice/memories/sessions/"


@pytest.fixture(scope="module")
def service(tmp_path_factory, embedder):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CE_MEMORY__MAX_BATCH_ITEMS", str(BATCH_LIMIT))
        settings = load_settings(tmp_path_factory.mktemp("http-memories-home"))
    assert settings.memory.max_batch_items == BATCH_LIMIT
    svc = ContextEngineService(settings, embedder=embedder)
    yield svc
    svc.close()


def listed(client, headers, **params):
    r = client.get("/api/v1/memories", params={"limit": 200, **params}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def test_messages_list_get_update_history_delete(client, tenants, service):
    body = {
        "conversation_id": "trip-1",
        "messages": [
            {
                "role": "user",
                "content": "I visited Lisbon last May.",
                "speaker": "Alice",
                "timestamp": "2023-05-08T13:56:00Z",
                "metadata": {"topic": "travel"},
            },
            {"role": "assistant", "content": "How was the food there?", "timestamp": 1683554220},
        ],
    }
    r = client.post("/api/v1/memories/messages", json=body, headers=tenants.alice)
    assert r.status_code == 200, r.text
    first, second = (i["uri"] for i in r.json()["items"])
    assert [first, second] == [f"{ALICE_SESSIONS}trip-1/000001.md", f"{ALICE_SESSIONS}trip-1/000002.md"]
    assert [i["status"] for i in r.json()["items"]] == ["added", "added"] and r.json()["nodes"] == 2

    page = listed(client, tenants.alice, conversation_id="trip-1")
    assert page["total"] == 2 and page["next_offset"] is None
    by_uri = {m["uri"]: m for m in page["items"]}
    assert by_uri[first]["abstract"] == "Alice: I visited Lisbon last May."
    assert by_uri[first]["occurred_at"] == "2023-05-08T13:56:00Z"
    assert by_uri[first]["metadata"]["topic"] == "travel" and by_uri[first]["metadata"]["role"] == "user"
    assert by_uri[second]["occurred_at"] == "2023-05-08T13:57:00Z"  # Unix seconds, 60 s later
    assert by_uri[first]["conversation_id"] == "trip-1"

    # the same page from the service itself
    direct = service.list_memories(ALICE, conversation_id="trip-1", limit=200).model_dump(mode="json")
    assert page == direct

    r = client.post(
        "/api/v1/memories/update", json={"uri": first, "text": "I visited Porto last May."}, headers=tenants.alice
    )
    assert r.status_code == 200, r.text
    assert r.json()["items"] == [
        {"uri": first, "status": "updated", "duplicate_of": None, "similarity": None, "version": 2}
    ]
    got = client.get("/api/v1/memories/item", params={"uri": first}, headers=tenants.alice)
    assert got.status_code == 200, got.text
    detail = got.json()
    assert detail["text"] == "I visited Porto last May." and detail["version"] == 2
    assert [(v["version"], v["text"]) for v in detail["history"]] == [(1, "I visited Lisbon last May.")]
    assert detail["occurred_at"] == "2023-05-08T13:56:00Z"  # kept by the update

    r = client.post("/api/v1/memories/delete", json={"uri": second}, headers=tenants.alice)
    assert r.status_code == 200 and r.json()["uris"] == [second], r.text
    assert [m["uri"] for m in listed(client, tenants.alice, conversation_id="trip-1")["items"]] == [first]
    gone = client.get("/api/v1/memories/item", params={"uri": second}, headers=tenants.alice)
    assert gone.status_code == 404 and gone.json()["code"] == "RET-4041"  # her own deleted memory (issue 29)


def test_add_memory_with_metadata_time_and_policy(client, tenants):
    h = tenants.alice
    r = client.post(
        "/api/v1/memories",
        json={
            "text": "My cat is called Miso.",
            "category": "profile",
            "metadata": {"source": "chat"},
            "occurred_at": "2024-02-01",
        },
        headers=h,
    )
    assert r.status_code == 200, r.text
    uri = r.json()["uris"][0]
    assert uri.startswith("ctx://user/alice/memories/profile/") and r.json()["nodes"] == 1
    detail = client.get("/api/v1/memories/item", params={"uri": uri}, headers=h).json()
    assert detail["metadata"] == {"source": "chat"} and detail["occurred_at"] == "2024-02-01T00:00:00Z"

    same = client.post("/api/v1/memories", json={"text": "my cat is  called MISO.", "category": "profile"}, headers=h)
    assert same.json()["unchanged"] == 1 and same.json()["uris"] == [uri]
    assert (
        client.post(
            "/api/v1/memories", json={"text": "My cat is called Miso!", "category": "profile"}, headers=h
        ).json()["unchanged"]
        == 1
    )  # punctuation is not part of the normalised text
    near = {"text": "My cat is named Miso.", "category": "profile"}  # cosine 0.96 (MiniLM and the default model)
    skipped = client.post("/api/v1/memories", json=near, headers=h).json()
    assert skipped["duplicates"] == 1 and skipped["nodes"] == 0 and skipped["uris"] == [uri]
    kept = client.post("/api/v1/memories", json={**near, "policy": "keep"}, headers=h).json()
    assert kept["duplicates"] == 0 and kept["nodes"] == 1 and kept["uris"][0] != uri

    bad = client.post("/api/v1/memories", json={"text": "x y z", "policy": "merge"}, headers=h)
    assert bad.status_code == 400 and bad.json()["code"] == "WRT-4002"


def test_batch_outcomes_in_input_order(client, tenants):
    items = [
        {"text": "Alice works at a bakery in Porto.", "category": "profile"},
        {"text": "Alice's favourite season is autumn.", "metadata": {"k": 1}, "occurred_at": 1700000000},
        {"text": "alice works at a  bakery in porto.", "category": "profile"},
    ]
    r = client.post("/api/v1/memories/batch", json={"items": items}, headers=tenants.alice)
    assert r.status_code == 200, r.text
    out = r.json()["items"]
    assert [o["status"] for o in out] == ["added", "added", "unchanged"]
    assert out[2]["uri"] == out[0]["uri"] and out[1]["uri"].startswith("ctx://user/alice/memories/general/")
    assert r.json()["nodes"] == 2


BAD_MESSAGES = [
    ("no content", {"conversation_id": "bad", "messages": [{"content": "fine"}, {"role": "user"}]}, 422, "WRT-4221"),
    ("blank content", {"conversation_id": "bad", "messages": [{"content": "  "}]}, 422, "WRT-4221"),
    ("unknown role", {"conversation_id": "bad", "messages": [{"content": "hi", "role": "robot"}]}, 400, "WRT-4002"),
    (
        "bad timestamp",
        {"conversation_id": "bad", "messages": [{"content": "hi", "timestamp": "last tuesday"}]},
        400,
        "WRT-4002",
    ),
    (
        "metadata not an object",
        {"conversation_id": "bad", "messages": [{"content": "hi", "metadata": [1, 2]}]},
        400,
        "WRT-4002",
    ),
    (
        "metadata too large",
        {"conversation_id": "bad", "messages": [{"content": "hi", "metadata": {"a": "x" * 5000}}]},
        413,
        "WRT-4131",
    ),
    (
        "over the batch limit",
        {"conversation_id": "bad", "messages": [{"content": f"m{i}"} for i in range(BATCH_LIMIT + 1)]},
        413,
        "WRT-4131",
    ),
    ("session with /", {"conversation_id": "a/b", "messages": [{"content": "hi"}]}, 400, "WRT-4001"),
    ("session ..", {"conversation_id": "..", "messages": [{"content": "hi"}]}, 400, "WRT-4001"),
    ("empty batch", {"conversation_id": "bad", "messages": []}, 400, "WRT-4002"),
]


@pytest.mark.parametrize(("case", "body", "status", "code"), BAD_MESSAGES, ids=[c[0] for c in BAD_MESSAGES])
def test_bad_messages_write_nothing(client, tenants, case, body, status, code):
    before = listed(client, tenants.alice)
    r = client.post("/api/v1/memories/messages", json=body, headers=tenants.alice)
    assert r.status_code == status, r.text
    env = r.json()
    assert env["code"] == code and set(env) == {"code", "message", "details", "request_id"}
    after = listed(client, tenants.alice)
    assert after["total"] == before["total"] and after["items"] == before["items"]


BAD_BATCHES = [
    (
        "over the batch limit",
        {"items": [{"text": f"fact number {i}"} for i in range(BATCH_LIMIT + 1)]},
        413,
        "WRT-4131",
    ),
    ("metadata not an object", {"items": [{"text": "a fact"}, {"text": "b fact", "metadata": "x"}]}, 400, "WRT-4002"),
    ("metadata too large", {"items": [{"text": "a fact", "metadata": {"a": "y" * 5000}}]}, 413, "WRT-4131"),
    ("bad occurred_at", {"items": [{"text": "a fact", "occurred_at": "soon"}]}, 400, "WRT-4002"),
    ("empty text", {"items": [{"text": "a fact"}, {"text": ""}]}, 422, "WRT-4221"),
    ("bad category", {"items": [{"text": "a fact", "category": ".."}]}, 400, "WRT-4001"),
]


@pytest.mark.parametrize(("case", "body", "status", "code"), BAD_BATCHES, ids=[c[0] for c in BAD_BATCHES])
def test_bad_batches_write_nothing(client, tenants, case, body, status, code):
    before = listed(client, tenants.alice)
    r = client.post("/api/v1/memories/batch", json=body, headers=tenants.alice)
    assert r.status_code == status, r.text
    assert r.json()["code"] == code
    assert listed(client, tenants.alice) == before


def test_bad_list_parameters(client, tenants):
    for params in ({"limit": 0}, {"limit": 201}, {"offset": -1}, {"limit": "many"}):
        r = client.get("/api/v1/memories", params=params, headers=tenants.alice)
        assert r.status_code == 400 and r.json()["code"] == "WRT-4002", (params, r.text)
    r = client.get("/api/v1/memories", params={"conversation_id": "a/b"}, headers=tenants.alice)
    assert r.status_code == 400 and r.json()["code"] == "WRT-4001"


@pytest.fixture(scope="module")
def carol(service, tenants):
    """A second user of alice's account (acme)."""
    _, token = ApiKeyStore(service.metadata).create(
        RequestContext(account_id="acme", role="user", user_space="carol"), "carol"
    )
    return bearer(token)


@pytest.mark.parametrize("who", ["bob", "carol"])
def test_another_users_memory_is_the_same_403_as_a_missing_one(client, tenants, carol, who):
    """bob (another account) and carol (the same account): get, update and delete of alice's memory give
    byte-identical bodies to those of a URI that exists nowhere; alice's memory is untouched."""
    other = tenants.bob if who == "bob" else carol
    r = client.post(
        "/api/v1/memories/messages",
        json={"conversation_id": f"private-{who}", "messages": [{"content": "My PIN is not something I share."}]},
        headers=tenants.alice,
    )
    uri = r.json()["items"][0]["uri"]
    missing = uri.replace("000001", "000099")
    same_id = {"X-Request-ID": "memory-probe-1"}
    calls = [
        ("get", "/api/v1/memories/item", {"params": {"uri": "{u}"}}),
        ("post", "/api/v1/memories/update", {"json": {"uri": "{u}", "text": "overwritten"}}),
        ("post", "/api/v1/memories/delete", {"json": {"uri": "{u}"}}),
    ]
    for method, path, kw in calls:
        bodies = []
        for target in (uri, missing):
            filled = {
                k: {f: (v.format(u=target) if isinstance(v, str) else v) for f, v in d.items()} for k, d in kw.items()
            }
            resp = getattr(client, method)(path, headers={**other, **same_id}, **filled)
            assert resp.status_code == 403, (path, resp.text)
            assert resp.json()["code"] == "RET-4032"
            bodies.append(resp.content.replace(target.encode(), b"URI"))
        assert bodies[0] == bodies[1], path
        # the owner's own missing URI: 404, which says nothing about anyone else's space (issue 29)
        own = getattr(client, method)(
            path,
            headers=tenants.alice,
            **{k: {f: (v.format(u=missing) if isinstance(v, str) else v) for f, v in d.items()} for k, d in kw.items()},
        )
        assert own.status_code == 404 and own.json()["code"] == "RET-4041"
    still = client.get("/api/v1/memories/item", params={"uri": uri}, headers=tenants.alice).json()
    assert still["text"] == "My PIN is not something I share." and still["version"] == 1
    # the other user's list does not show alice's memories
    assert all(not m["uri"].startswith("ctx://user/alice/") for m in listed(client, other)["items"])


def test_openapi_documents_the_memory_routes(client):
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    expected = {
        ("post", "/api/v1/memories"): "AddMemoryResult",  # IngestReport's counts plus items (issue 29)
        ("get", "/api/v1/memories"): "MemoryListPage",
        ("post", "/api/v1/memories/batch"): "MemoryWriteResult",
        ("post", "/api/v1/memories/messages"): "MemoryWriteResult",
        ("get", "/api/v1/memories/item"): "MemoryDetail",
        ("post", "/api/v1/memories/update"): "MemoryWriteResult",
        ("post", "/api/v1/memories/delete"): "IngestReport",
    }
    for (method, path), model in expected.items():
        op = paths[path][method]
        assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(model), path
        for status in ("400", "401", "403", "413", "422"):
            ref = op["responses"][status]["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("ErrorEnvelope"), (path, status)
        assert op["tags"] == ["memories"]
    schemas = spec["components"]["schemas"]
    message_fields = {"role", "content", "speaker", "name", "type", "timestamp", "metadata"}
    message_fields |= {"tool_calls", "tool_call_id"}  # OpenAI's, listed for the schema's readers
    assert set(schemas["MessageIn"]["properties"]) == message_fields
    assert schemas["AddMemoryRequest"]["properties"]["policy"]["anyOf"][0]["enum"] == ["skip", "keep", "replace"]
    params = {p["name"] for p in paths["/api/v1/memories"]["get"]["parameters"]}
    assert params == {"category", "conversation_id", "limit", "offset", "user_space", "session_id"}


def test_search_memory_filters_over_http(client, tenants):
    for session, text, topic in (
        ("filt-a", "We booked a cabin by the lake.", "lakeside"),
        ("filt-b", "We booked a table at the sushi bar.", "food"),
    ):
        body = {
            "conversation_id": session,
            "messages": [
                {
                    "role": "user",
                    "speaker": "Alice",
                    "content": text,
                    "timestamp": "2023-07-01T10:00:00Z",
                    "metadata": {"topic": topic},
                }
            ],
        }
        assert client.post("/api/v1/memories/messages", json=body, headers=tenants.alice).status_code == 200
    r = client.post(
        "/api/v1/search_memory", json={"query": "what did we book?", "conversation_id": "filt-b"}, headers=tenants.alice
    )
    assert r.status_code == 200, r.text
    assert [h["uri"] for h in r.json()["hits"]] == [f"{ALICE_SESSIONS}filt-b/000001.md"]
    r = client.post(
        "/api/v1/search_memory",
        json={"query": "what did we book?", "metadata_filter": {"topic": "lakeside"}},
        headers=tenants.alice,
    )
    assert [h["uri"] for h in r.json()["hits"]] == [f"{ALICE_SESSIONS}filt-a/000001.md"]
    bad = client.post(
        "/api/v1/search_memory",
        headers=tenants.alice,
        json={"query": "x", "time_range": {"start": "2023-08-01T00:00:00Z", "end": "2023-07-01T00:00:00Z"}},
    )
    assert bad.status_code == 400 and bad.json()["code"] == "RET-4001"


@pytest.mark.parametrize("key", ["标签", "Getränk", "ключ", "🍵", 'say "hi"', "a\\b", "a.b", "$"])
def test_metadata_filter_on_any_key_the_write_accepts(client, tenants, key):
    """Attack pass: on SQLite a filter on a key with non-ASCII characters, a quote or a backslash matched nothing,
    though the write took it; "." and "$" (JSON path syntax) are taken literally."""
    text = f"Filter probe {'-'.join(str(ord(c)) for c in key)}: the kettle is blue."  # one memory per key
    body = {"text": text, "category": "preference", "metadata": {key: "饮品", "probe": "kettle"}}
    r = client.post("/api/v1/memories", json=body, headers=tenants.alice)
    assert r.status_code == 200, r.text
    uri = r.json()["uris"][0]
    for wanted in ("饮品", ["x", "饮品"]):
        r = client.post(
            "/api/v1/search_memory",
            json={"query": text, "metadata_filter": {key: wanted}, "top_k": 20},
            headers=tenants.alice,
        )
        assert r.status_code == 200, r.text
        assert [h["uri"] for h in r.json()["hits"]] == [uri], key
    r = client.post(
        "/api/v1/search_memory", json={"query": text, "metadata_filter": {key: "other"}}, headers=tenants.alice
    )
    assert r.status_code == 200 and r.json()["hits"] == []
