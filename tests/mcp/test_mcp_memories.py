"""The memory tools over MCP (issue 11), in process: compact descriptions, the same answers as the service, bad input
with the documented code and nothing written, and the same 403 for another user's memory as for a missing one."""

from __future__ import annotations

import json

import anyio
import pytest
from mcp import Client

from context_engine.interfaces.mcp.server import build_mcp_server
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings

ALICE = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="bot")
CAROL = RequestContext(account_id="acme", role="user", user_space="carol")
BOB = RequestContext(account_id="globex", role="user", user_space="bob")
MEMORY_TOOLS = {
    "add_memory",
    "add_memories",
    "add_messages",
    "list_memories",
    "get_memory",
    "update_memory",
    "delete_memory",
}
BATCH_LIMIT = 3


@pytest.fixture(scope="module")
def service(tmp_path_factory, embedder):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CE_MEMORY__MAX_BATCH_ITEMS", str(BATCH_LIMIT))
        settings = load_settings(tmp_path_factory.mktemp("mcp-memories-home"))
    svc = ContextEngineService(settings, embedder=embedder)
    yield svc
    svc.close()


def call(service, ctx, name, args):
    async def go():
        async with Client(build_mcp_server(lambda: service, lambda _r: ctx)) as client:
            return await client.call_tool(name, args)

    return anyio.run(go)


def list_tools(service):
    async def go():
        async with Client(build_mcp_server(lambda: service, lambda _r: ALICE)) as client:
            return (await client.list_tools()).tools

    return {t.name: t for t in anyio.run(go)}


def test_memory_tools_are_listed_with_compact_descriptions(service):
    tools = list_tools(service)
    assert MEMORY_TOOLS <= set(tools)
    for name in MEMORY_TOOLS:
        desc = tools[name].description or ""
        assert 0 < len(desc) <= 200 and desc.count(". ") <= 1, (name, desc)
    assert tools["add_messages"].input_schema["required"] == ["messages", "conversation_id"]
    assert tools["list_memories"].annotations.read_only_hint is True
    assert tools["get_memory"].annotations.read_only_hint is True
    assert tools["delete_memory"].annotations.destructive_hint is True
    assert tools["get_memory"].output_schema is None  # the tool list stays under 8 KB (issue 15)
    assert set(tools["add_memory"].input_schema["properties"]) == {
        "text",
        "category",
        "uri",
        "metadata",
        "occurred_at",
        "policy",
    }


def test_messages_list_get_update_delete_equal_the_service(service):
    res = call(
        service,
        ALICE,
        "add_messages",
        {
            "conversation_id": "s1",
            "messages": [
                {"content": "We adopted a dog named Pixel.", "speaker": "Alice", "timestamp": "2024-03-02T10:00:00Z"},
                {"role": "assistant", "content": "What breed is Pixel?"},
            ],
        },
    )
    assert not res.is_error, res.content[0].text
    uris = [i["uri"] for i in res.structured_content["items"]]
    assert uris == [
        "ctx://user/alice/memories/sessions/s1/000001.md",
        "ctx://user/alice/memories/sessions/s1/000002.md",
    ]
    assert json.loads(res.content[0].text) == res.structured_content

    page = call(service, ALICE, "list_memories", {"conversation_id": "s1"}).structured_content
    assert page == service.list_memories(ALICE, conversation_id="s1").model_dump(mode="json")
    assert page["total"] == 2 and {m["abstract"] for m in page["items"]} == {
        "Alice: We adopted a dog named Pixel.",
        "assistant: What breed is Pixel?",
    }

    upd = call(
        service,
        ALICE,
        "update_memory",
        {"uri": uris[0], "text": "We adopted a cat named Pixel.", "metadata": {"edited": True}},
    )
    assert upd.structured_content["items"][0]["status"] == "updated"
    detail = call(service, ALICE, "get_memory", {"uri": uris[0]}).structured_content
    assert detail["text"] == "We adopted a cat named Pixel." and detail["metadata"]["edited"] is True
    # a message keeps the keys the engine set (docs/memories.md): its role, speaker and conversation
    assert {k: detail["metadata"][k] for k in ("role", "speaker", "session_id")} == {
        "role": "user",
        "speaker": "Alice",
        "session_id": "s1",
    }
    assert [h["text"] for h in detail["history"]] == ["We adopted a dog named Pixel."]
    assert detail == service.get_memory(uris[0], ALICE).model_dump(mode="json")

    deleted = call(service, ALICE, "delete_memory", {"uri": uris[1]})
    assert not deleted.is_error and deleted.structured_content["uris"] == [uris[1]]
    assert [
        m["uri"] for m in call(service, ALICE, "list_memories", {"conversation_id": "s1"}).structured_content["items"]
    ] == [uris[0]]


def test_add_memory_and_batch(service):
    res = call(
        service,
        ALICE,
        "add_memory",
        {
            "text": "Alice is allergic to peanuts.",
            "category": "profile",
            "metadata": {"source": "intake"},
            "occurred_at": 1700000000,
        },
    )
    assert not res.is_error and res.structured_content["nodes"] == 1, res.content[0].text
    uri = res.structured_content["uris"][0]
    got = service.get_memory(uri, ALICE)
    assert got.metadata == {"source": "intake"} and got.occurred_at.isoformat() == "2023-11-14T22:13:20+00:00"
    batch = call(
        service,
        ALICE,
        "add_memories",
        {
            "items": [
                {"text": "Alice runs every Sunday."},
                {"text": "alice is allergic to  peanuts.", "category": "profile"},
            ]
        },
    )
    assert [o["status"] for o in batch.structured_content["items"]] == ["added", "unchanged"]
    assert batch.structured_content["items"][1]["uri"] == uri


# a tool call whose type is a list (or an object) was an MCP error without the envelope (TypeError: unhashable type)
TYPE_LIST = {"type": ["x"], "function": {"name": "f"}}
TYPE_INTS = {"type": [1], "name": "f", "arguments": "{}"}
BAD = [
    ("add_messages", {"conversation_id": "bad", "messages": [{"role": "user"}]}, "WRT-4221"),
    ("add_messages", {"conversation_id": "bad", "messages": [{"content": "hi", "role": "narrator"}]}, "WRT-4002"),
    (
        "add_messages",
        {"conversation_id": "bad", "messages": [{"content": "hi", "timestamp": "31/02/2024"}]},
        "WRT-4002",
    ),
    ("add_messages", {"conversation_id": "bad", "messages": [{"content": "hi", "metadata": "tag"}]}, "WRT-4002"),
    (
        "add_messages",
        {"conversation_id": "bad", "messages": [{"content": "hi", "metadata": {"a": "z" * 5000}}]},
        "WRT-4131",
    ),
    (
        "add_messages",
        {"conversation_id": "bad", "messages": [{"content": str(i)} for i in range(BATCH_LIMIT + 1)]},
        "WRT-4131",
    ),
    (
        "add_messages",
        {"conversation_id": "bad", "messages": [{"role": "assistant", "content": "x", "tool_calls": [TYPE_LIST]}]},
        "WRT-4002",
    ),
    (
        "add_messages",
        {"conversation_id": "bad", "messages": [{"role": "assistant", "content": "x", "function_call": TYPE_INTS}]},
        "WRT-4002",
    ),
    ("add_messages", {"conversation_id": "x/y", "messages": [{"content": "hi"}]}, "WRT-4001"),
    ("add_messages", {"conversation_id": "..", "messages": [{"content": "hi"}]}, "WRT-4001"),
    ("add_memories", {"items": [{"text": f"fact {i}"} for i in range(BATCH_LIMIT + 1)]}, "WRT-4131"),
    ("add_memories", {"items": [{"text": "ok"}], "policy": "merge"}, "WRT-4002"),
    ("add_memory", {"text": "a", "metadata": [1]}, "WRT-4002"),
    ("list_memories", {"limit": 0}, "WRT-4002"),
]


@pytest.mark.parametrize(("tool", "args", "code"), BAD, ids=[f"{t}-{c}-{i}" for i, (t, _, c) in enumerate(BAD)])
def test_bad_input_is_an_envelope_and_writes_nothing(service, tool, args, code):
    before = service.list_memories(ALICE, limit=200)
    res = call(service, ALICE, tool, args)
    assert res.is_error, res.content[0].text
    assert res.structured_content["code"] == code
    assert set(res.structured_content) == {"code", "message", "details", "request_id"}
    assert service.list_memories(ALICE, limit=200) == before


@pytest.mark.parametrize("other", [BOB, CAROL], ids=["other-account", "same-account"])
def test_another_users_memory_is_the_same_403_as_a_missing_one(service, other):
    uri = call(
        service, ALICE, "add_memory", {"text": f"Alice's locker code is private ({other.account_id})."}
    ).structured_content["uris"][0]
    missing = uri.replace(".md", "-nope.md")
    for tool, extra in (("get_memory", {}), ("update_memory", {"text": "stolen"}), ("delete_memory", {})):
        envs = []
        for target in (uri, missing):
            res = call(service, other, tool, {"uri": target, **extra})
            assert res.is_error and res.structured_content["code"] == "RET-4032", tool
            env = dict(res.structured_content, request_id=None)
            envs.append(json.dumps(env).replace(target, "URI"))
        assert envs[0] == envs[1], tool
    assert service.get_memory(uri, ALICE).version == 1


def test_search_memory_tool_takes_the_memory_filters(service):
    call(
        service,
        ALICE,
        "add_messages",
        {
            "conversation_id": "mcp-filter",
            "messages": [
                {
                    "role": "user",
                    "speaker": "Alice",
                    "content": "The plumber comes on Tuesday at nine.",
                    "timestamp": "2023-09-05T09:00:00Z",
                }
            ],
        },
    )
    result = call(
        service,
        ALICE,
        "search_memory",
        {
            "query": "when does the plumber come?",
            "conversation_id": "mcp-filter",
            "time_range": {"start": "2023-09-01T00:00:00Z"},
        },
    )
    assert not result.is_error, result
    hits = result.structured_content["hits"]
    assert [h["uri"] for h in hits] == ["ctx://user/alice/memories/sessions/mcp-filter/000001.md"]
