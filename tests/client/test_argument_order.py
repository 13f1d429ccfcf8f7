"""One argument order, one word per concept (issue 29): the client's ``add_messages`` takes
``(messages, conversation_id)`` as the Python API does; the earlier order ``(conversation_id, messages)`` and the
earlier name ``session_id`` still work with a ``DeprecationWarning`` (the order recognised by types), and both names
with different values are refused before anything is sent; ``list_memories`` and ``search_memory`` take
``conversation_id`` the same way; ``ToolInvocationList`` names its rows ``items`` and still carries ``invocations``
(deprecated). The server is an ``httpx.MockTransport`` that records the bodies."""

from __future__ import annotations

import asyncio
import json
import warnings

import httpx
import pytest

from context_engine.api.models import ToolInvocationList
from context_engine.client import ApiError, AsyncClient, Client
from context_engine.errors import ErrorCode

RESULT = {"items": [{"uri": "ctx://user/alice/memories/sessions/s1/000001.md", "status": "added"}], "nodes": 1}
MESSAGES = [{"role": "user", "content": "I moved to Lisbon."}]
VIEW = {"uri": "ctx://user/alice/memories/sessions/s1/000001.md", "category": "sessions", "abstract": "user: hi"}
PAGE = {"items": [{**VIEW, "created_at": None, "updated_at": None, "session_id": "s1"}], "total": 1, "offset": 0,
        "limit": 20}  # an older server's answer: the conversation under its first name only
SEARCH = {"request_id": "r", "typed_queries": [], "seed_hits": [], "hits": [], "trace": {},
          "next_actions": {"recommended_read_l1_uris": [], "recommended_read_l2_uris": []}}
COMPACT = {"request_id": "r", "match_quality": "none", "hits": []}


class Recorder:
    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.params: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            self.params.append(dict(request.url.params))
            return httpx.Response(200, json=PAGE)
        self.bodies.append(json.loads(request.content))
        if request.url.path.endswith("search_memory"):
            compact = json.loads(request.content).get("response_format") == "compact"
            return httpx.Response(200, json=COMPACT if compact else SEARCH)
        return httpx.Response(200, json=RESULT)


def _client(rec: Recorder) -> Client:
    return Client("http://ce.test", "ce_k_s", transport=httpx.MockTransport(rec))


def test_add_messages_takes_the_python_apis_order_without_warning() -> None:
    rec = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r1 = _client(rec).add_messages(MESSAGES, "s1")
        r2 = _client(rec).add_messages(messages=MESSAGES, conversation_id="s1")
    assert r1.items[0].status == r2.items[0].status == "added"
    assert rec.bodies == [{"conversation_id": "s1", "messages": MESSAGES}] * 2


def test_the_old_order_still_works_and_warns() -> None:
    rec = Recorder()
    with pytest.warns(DeprecationWarning, match=r"add_messages\(messages, conversation_id\)") as caught:
        result = _client(rec).add_messages("s1", MESSAGES)
    assert caught[0].filename == __file__  # points at the caller's line
    assert result.uris == [RESULT["items"][0]["uri"]]
    assert rec.bodies == [{"conversation_id": "s1", "messages": MESSAGES}]
    with pytest.warns(DeprecationWarning):
        _client(rec).add_messages(conversation_id=MESSAGES, messages="s1")  # swapped keywords: the same rule
    assert rec.bodies[-1] == {"conversation_id": "s1", "messages": MESSAGES}


def test_add_messages_session_id_is_the_old_name_of_conversation_id() -> None:
    rec = Recorder()
    with pytest.warns(DeprecationWarning, match=r"add_messages\(session_id=\.\.\.\) is deprecated") as caught:
        _client(rec).add_messages(MESSAGES, session_id="s1")
    assert caught[0].filename == __file__
    with pytest.warns(DeprecationWarning):
        _client(rec).add_messages(MESSAGES, "s1", session_id="s1")  # both, the same value: fine
    assert rec.bodies == [{"conversation_id": "s1", "messages": MESSAGES}] * 2  # the new name goes out
    with pytest.warns(DeprecationWarning), pytest.raises(ApiError) as err:
        _client(rec).add_messages(MESSAGES, "s1", session_id="s2")
    assert err.value.code is ErrorCode.REQUEST_INVALID and "session_id is the deprecated name" in err.value.message
    assert len(rec.bodies) == 2  # nothing sent


def test_async_client_has_the_same_order_and_the_same_warning() -> None:
    rec = Recorder()

    async def main() -> None:
        async with AsyncClient("http://ce.test", "ce_k_s", transport=httpx.MockTransport(rec)) as client:
            await client.add_messages(MESSAGES, "s1")
            with pytest.warns(DeprecationWarning):
                await client.add_messages("s1", MESSAGES)

            with pytest.warns(DeprecationWarning):
                await client.add_messages(MESSAGES, session_id="s1")
            with pytest.warns(DeprecationWarning):
                await client.list_memories(session_id="s1")

    asyncio.run(main())
    assert rec.bodies[:3] == [{"conversation_id": "s1", "messages": MESSAGES}] * 3
    assert rec.params == [{"conversation_id": "s1", "limit": "20", "offset": "0"}]


def test_add_messages_without_a_session_is_refused_before_sending() -> None:
    rec = Recorder()
    with pytest.raises(ApiError) as err:
        _client(rec).add_messages(MESSAGES)
    assert err.value.code is ErrorCode.REQUEST_INVALID and rec.bodies == []


def test_tool_invocation_list_names_its_rows_items_and_keeps_the_old_name() -> None:
    page = ToolInvocationList(items=[], limit=10, offset=0)
    assert page.model_dump() == {"items": [], "invocations": [], "limit": 10, "offset": 0}
    old = ToolInvocationList.model_validate({"invocations": [], "limit": 10, "offset": 0})  # an older server's body
    assert old.items == []
    with pytest.warns(DeprecationWarning, match="use items"):
        assert old.invocations == []
    schema = ToolInvocationList.model_json_schema()
    assert schema["properties"]["invocations"].get("deprecated") is True


def test_list_memories_takes_conversation_id_and_still_the_old_name() -> None:
    rec = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        page = _client(rec).list_memories(conversation_id="s1", limit=5)
        assert page.items[0].conversation_id == "s1"  # an older server's session_id, read under the new name
    with pytest.warns(DeprecationWarning, match=r"list_memories\(session_id=\.\.\.\) is deprecated") as caught:
        _client(rec).list_memories(session_id="s1")
    assert caught[0].filename == __file__
    assert rec.params == [{"conversation_id": "s1", "limit": "5", "offset": "0"}, {"conversation_id": "s1",
                          "limit": "20", "offset": "0"}]  # the new name goes out
    with pytest.warns(DeprecationWarning), pytest.raises(ApiError) as err:
        _client(rec).list_memories(conversation_id="s1", session_id="s2")
    assert err.value.code is ErrorCode.REQUEST_INVALID and err.value.status_code is None
    assert "session_id is the deprecated name of conversation_id" in err.value.message
    assert len(rec.params) == 2  # nothing sent
    with pytest.warns(DeprecationWarning, match="use conversation_id"):
        assert page.items[0].session_id == "s1"  # the old field of the answer still reads


def test_search_memory_takes_conversation_id_and_still_the_old_name() -> None:
    rec = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _client(rec).search_memory("lisbon", conversation_id="s1")
    with pytest.warns(DeprecationWarning, match=r"search_memory\(session_id=\.\.\.\) is deprecated") as caught:
        _client(rec).search_memory("lisbon", session_id="s1")
    assert caught[0].filename == __file__
    with pytest.warns(DeprecationWarning):
        _client(rec).search_memory_compact("lisbon", session_id="s1")
    assert [b["conversation_id"] for b in rec.bodies] == ["s1"] * 3 and all("session_id" not in b for b in rec.bodies)
    with pytest.warns(DeprecationWarning), pytest.raises(ApiError) as err:
        _client(rec).search_memory("lisbon", conversation_id="s1", session_id="s2")
    assert err.value.code is ErrorCode.QUERY_INVALID and len(rec.bodies) == 3
