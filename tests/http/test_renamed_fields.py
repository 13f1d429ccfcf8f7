"""One word per concept (issue 29): the conversation that ``add_messages`` stores is ``conversation_id`` on every
surface, and its first name, ``session_id``, is still accepted everywhere (``lookup_knowledge``'s ``session_id``, the
diagnosis session, keeps its name). For each renamed argument, on the Python API, over HTTP and as an MCP tool: the new
name works, the old one works (a ``DeprecationWarning`` in Python), and both with different values is a validation
error that names the two. The answers carry both names (the old one deprecated). The client's tests are in
tests/client/test_argument_order.py, the CLI's in tests/integration/test_memory_interfaces.py.
"""

from __future__ import annotations

import warnings

import anyio
import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.mcp.server import build_mcp_server
from context_engine.redaction import redact_output
from context_engine.schema.memory import MemoryView
from context_engine.schema.query import SearchMemoryRequest
from tests.http.conftest import ALICE

CONVERSATIONS = "ctx://user/alice/memories/sessions/"  # the storage keeps its URI segment


def message(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "speaker": "Alice", "content": text}]


def conflict(err: ContextEngineError) -> bool:
    return "session_id is the deprecated name of conversation_id" in err.message


# ---- Python ---------------------------------------------------------------------------------------------------------
def test_python_add_messages_conversation_id_and_its_old_name(service):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = service.add_messages(message("We flew to Oslo on Friday."), "py-a", ALICE)
        by_keyword = service.add_messages(message("The hotel was by the harbour."), conversation_id="py-a", ctx=ALICE)
    assert [new.uris[0], by_keyword.uris[0]] == [f"{CONVERSATIONS}py-a/000001.md", f"{CONVERSATIONS}py-a/000002.md"]
    with pytest.warns(DeprecationWarning, match=r"add_messages\(session_id=\.\.\.\) is deprecated") as caught:
        old = service.add_messages(message("We took the train back."), ctx=ALICE, session_id="py-a")
    assert caught[0].filename == __file__  # at the caller's line
    assert old.uris == [f"{CONVERSATIONS}py-a/000003.md"]  # the same conversation
    with pytest.warns(DeprecationWarning), pytest.raises(ContextEngineError) as err:
        service.add_messages(message("Not written."), "py-a", ALICE, session_id="py-b")
    assert err.value.code is ErrorCode.REQUEST_INVALID and conflict(err.value)
    with pytest.raises(ContextEngineError) as missing:
        service.add_messages(message("Not written either."), ctx=ALICE)
    assert missing.value.code is ErrorCode.REQUEST_INVALID and "conversation_id" in missing.value.message
    assert service.list_memories(ALICE, conversation_id="py-a").total == 3


def test_python_list_memories_conversation_id_and_its_old_name(service):
    service.add_messages(message("Lunch was fish soup."), "py-list", ALICE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        page = service.list_memories(ALICE, conversation_id="py-list")
        assert page.total == 1 and page.items[0].conversation_id == "py-list"
    with pytest.warns(DeprecationWarning, match=r"list_memories\(session_id=\.\.\.\)") as caught:
        old = service.list_memories(ALICE, session_id="py-list")
    assert caught[0].filename == __file__ and old == page
    with pytest.warns(DeprecationWarning), pytest.raises(ContextEngineError) as err:
        service.list_memories(ALICE, conversation_id="py-list", session_id="other")
    assert err.value.code is ErrorCode.REQUEST_INVALID and conflict(err.value)


def test_python_search_memory_conversation_id_and_its_old_name(service):
    service.add_messages(message("We rented kayaks on the fjord."), "py-search", ALICE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = service.search_memory("kayaks", ALICE, conversation_id="py-search")
        by_model = service.search_memory(SearchMemoryRequest(query="kayaks", conversation_id="py-search"), ALICE)
    expected = [f"{CONVERSATIONS}py-search/000001.md"]
    assert [h.uri for h in new.hits] == [h.uri for h in by_model.hits] == expected
    with pytest.warns(DeprecationWarning, match=r"search_memory\(session_id=\.\.\.\)") as caught:
        old = service.search_memory("kayaks", ALICE, session_id="py-search")
    assert caught[0].filename == __file__ and [h.uri for h in old.hits] == expected
    with pytest.warns(DeprecationWarning):
        compact = service.search_memory_compact("kayaks", ALICE, session_id="py-search")
    assert [h.uri for h in compact.hits] == expected
    with pytest.warns(DeprecationWarning), pytest.raises(ContextEngineError) as err:
        service.search_memory("kayaks", ALICE, conversation_id="py-search", session_id="other")
    assert err.value.code is ErrorCode.QUERY_INVALID and conflict(err.value)
    # the request model maps the old field (no warning: the same validation serves HTTP and MCP) and refuses two
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        request = SearchMemoryRequest.model_validate({"query": "kayaks", "session_id": "py-search"})
    assert request.conversation_id == "py-search" and "session_id" not in request.model_dump()
    with pytest.warns(DeprecationWarning, match="use conversation_id"):
        assert request.session_id == "py-search"  # reading the old field still works
    with pytest.raises(ValueError, match="session_id is the deprecated name of conversation_id"):
        SearchMemoryRequest(query="kayaks", conversation_id="a", session_id="b")


def test_a_memory_answer_carries_both_names():
    view = MemoryView.model_validate(
        {"uri": "u", "category": "sessions", "abstract": "a", "created_at": None, "updated_at": None,
         "session_id": "c1"}  # an older server's answer
    )
    assert view.conversation_id == "c1" and view.model_dump()["session_id"] == "c1"
    with pytest.warns(DeprecationWarning, match="use conversation_id"):
        assert view.session_id == "c1"
    schema = MemoryView.model_json_schema()["properties"]
    assert schema["session_id"]["deprecated"] is True and "deprecated" not in schema["conversation_id"]


def test_redaction_covers_both_names_without_a_warning():
    view = MemoryView(
        uri="u", category=None, abstract="a", created_at=None, updated_at=None, conversation_id="password=hunter2x"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = redact_output(view).model_dump()
    assert out["conversation_id"] == out["session_id"] == "password=[REDACTED:credential]"


# ---- HTTP -----------------------------------------------------------------------------------------------------------
def test_http_add_messages_conversation_id_and_its_old_name(client, tenants):
    url = "/api/v1/memories/messages"
    new = client.post(url, json={"conversation_id": "h-a", "messages": message("One.")}, headers=tenants.alice)
    old = client.post(url, json={"session_id": "h-a", "messages": message("Two.")}, headers=tenants.alice)
    assert new.status_code == old.status_code == 200, (new.text, old.text)
    assert [new.json()["items"][0]["uri"], old.json()["items"][0]["uri"]] == [
        f"{CONVERSATIONS}h-a/000001.md",
        f"{CONVERSATIONS}h-a/000002.md",
    ]
    both = client.post(
        url, json={"conversation_id": "h-a", "session_id": "h-b", "messages": message("Three.")}, headers=tenants.alice
    )
    assert both.status_code == 400 and both.json()["code"] == "WRT-4002"
    assert "session_id is the deprecated name of conversation_id" in both.json()["message"]
    same = client.post(
        url, json={"conversation_id": "h-a", "session_id": "h-a", "messages": message("Four.")}, headers=tenants.alice
    )
    assert same.status_code == 200
    neither = client.post(url, json={"messages": message("Five.")}, headers=tenants.alice)
    assert neither.status_code == 400 and neither.json()["code"] == "WRT-4002"


def test_http_list_memories_conversation_id_and_its_old_name(client, tenants):
    body = {"conversation_id": "h-list", "messages": message("Hi.")}
    client.post("/api/v1/memories/messages", json=body, headers=tenants.alice)
    new = client.get("/api/v1/memories", params={"conversation_id": "h-list"}, headers=tenants.alice)
    old = client.get("/api/v1/memories", params={"session_id": "h-list"}, headers=tenants.alice)
    assert new.status_code == old.status_code == 200 and new.json() == old.json()
    item = new.json()["items"][0]
    assert new.json()["total"] == 1 and item["conversation_id"] == item["session_id"] == "h-list"  # both sent
    detail = client.get("/api/v1/memories/item", params={"uri": item["uri"]}, headers=tenants.alice).json()
    assert detail["conversation_id"] == detail["session_id"] == "h-list"
    both = client.get(
        "/api/v1/memories", params={"conversation_id": "h-list", "session_id": "x"}, headers=tenants.alice
    )
    assert both.status_code == 400 and both.json()["code"] == "WRT-4002"
    assert "session_id is the deprecated name of conversation_id" in both.json()["message"]


def test_http_search_memory_conversation_id_and_its_old_name(client, tenants):
    client.post(
        "/api/v1/memories/messages",
        json={"conversation_id": "h-search", "messages": message("We saw the northern lights.")},
        headers=tenants.alice,
    )
    url, query = "/api/v1/search_memory", "northern lights"
    new = client.post(url, json={"query": query, "conversation_id": "h-search"}, headers=tenants.alice)
    old = client.post(url, json={"query": query, "session_id": "h-search"}, headers=tenants.alice)
    assert new.status_code == old.status_code == 200
    assert [h["uri"] for h in new.json()["hits"]] == [h["uri"] for h in old.json()["hits"]] == [
        f"{CONVERSATIONS}h-search/000001.md"
    ]
    body = {"query": query, "conversation_id": "h-search", "session_id": "x"}
    both = client.post(url, json=body, headers=tenants.alice)
    assert both.status_code == 400 and both.json()["code"] == "RET-4001"
    assert "session_id is the deprecated name of conversation_id" in both.json()["message"]


def test_openapi_marks_the_old_names_deprecated(client):
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    for name in ("AddMessagesRequest", "SearchMemoryRequest", "MemoryView", "MemoryDetail"):
        props = schemas[name]["properties"]
        assert props["session_id"].get("deprecated") is True, name
        assert "conversation_id" in props and not props["conversation_id"].get("deprecated"), name
    assert "conversation_id" in schemas["AddMessagesRequest"]["required"]
    params = {p["name"]: p for p in spec["paths"]["/api/v1/memories"]["get"]["parameters"]}
    assert params["session_id"].get("deprecated") is True and not params["conversation_id"].get("deprecated")
    lookup = schemas["LookupRequest"]["properties"]  # the diagnosis session keeps its name
    assert "session_id" in lookup and "conversation_id" not in lookup and not lookup["session_id"].get("deprecated")


# ---- MCP ------------------------------------------------------------------------------------------------------------
def mcp_call(service, name, args):
    server = build_mcp_server(lambda: service, lambda _r: ALICE)
    return anyio.run(server.call_tool, name, args)


def test_mcp_add_messages_conversation_id_and_its_old_name(service):
    new = mcp_call(service, "add_messages", {"conversation_id": "m-a", "messages": message("One.")})
    old = mcp_call(service, "add_messages", {"session_id": "m-a", "messages": message("Two.")})
    assert not new.is_error and not old.is_error, (new.content, old.content)
    assert [new.structured_content["items"][0]["uri"], old.structured_content["items"][0]["uri"]] == [
        f"{CONVERSATIONS}m-a/000001.md",
        f"{CONVERSATIONS}m-a/000002.md",
    ]
    both = mcp_call(service, "add_messages", {"conversation_id": "m-a", "session_id": "m-b", "messages": message("3")})
    assert both.is_error and both.structured_content["code"] == "WRT-4002"
    assert "session_id is the deprecated name of conversation_id" in both.structured_content["message"]
    neither = mcp_call(service, "add_messages", {"messages": message("Four.")})
    assert neither.is_error and neither.structured_content["code"] == "WRT-4002"


def test_mcp_list_memories_conversation_id_and_its_old_name(service):
    mcp_call(service, "add_messages", {"conversation_id": "m-list", "messages": message("Hi.")})
    new = mcp_call(service, "list_memories", {"conversation_id": "m-list"})
    old = mcp_call(service, "list_memories", {"session_id": "m-list"})
    assert not new.is_error and new.structured_content == old.structured_content
    item = new.structured_content["items"][0]
    assert new.structured_content["total"] == 1 and item["conversation_id"] == item["session_id"] == "m-list"
    both = mcp_call(service, "list_memories", {"conversation_id": "m-list", "session_id": "x"})
    assert both.is_error and both.structured_content["code"] == "WRT-4002"


def test_mcp_search_memory_conversation_id_and_its_old_name(service):
    mcp_call(service, "add_messages", {"conversation_id": "m-search", "messages": message("We met a reindeer.")})
    new = mcp_call(service, "search_memory", {"query": "reindeer", "conversation_id": "m-search"})
    old = mcp_call(service, "search_memory", {"query": "reindeer", "session_id": "m-search"})
    hits = [[h["uri"] for h in r.structured_content["hits"]] for r in (new, old)]
    assert hits == [[f"{CONVERSATIONS}m-search/000001.md"]] * 2
    both = mcp_call(service, "search_memory", {"query": "reindeer", "conversation_id": "m-search", "session_id": "x"})
    assert both.is_error and both.structured_content["code"] == "RET-4001"


def test_mcp_tool_list_names_the_conversation_once(service):
    server = build_mcp_server(lambda: service, lambda _r: ALICE)
    tools = {t.name: t.input_schema for t in anyio.run(server.list_tools)}
    for name in ("add_messages", "list_memories", "search_memory"):
        assert "conversation_id" in tools[name]["properties"], name
        assert "session_id" not in tools[name]["properties"], name  # accepted, not advertised
    assert tools["add_messages"]["required"] == ["messages", "conversation_id"]
    assert "session_id" in tools["lookup_knowledge"]["properties"]  # the diagnosis session keeps its name
