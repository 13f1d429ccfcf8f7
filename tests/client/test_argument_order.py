"""One argument order and one list word (issue 29): the client's ``add_messages`` takes ``(messages, session_id)``
as the Python API does, and the earlier ``(session_id, messages)`` still works with a ``DeprecationWarning``
(recognised by types); ``ToolInvocationList`` names its rows ``items`` and still carries ``invocations``
(deprecated). The server is an ``httpx.MockTransport`` that records the bodies."""

from __future__ import annotations

import asyncio
import json
import warnings

import httpx
import pytest

from context_engine.client import ApiError, AsyncClient, Client
from context_engine.errors import ErrorCode
from context_engine.interfaces.http.models import ToolInvocationList

RESULT = {"items": [{"uri": "ctx://user/alice/memories/sessions/s1/000001.md", "status": "added"}], "nodes": 1}
MESSAGES = [{"role": "user", "content": "I moved to Lisbon."}]


class Recorder:
    def __init__(self) -> None:
        self.bodies: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        return httpx.Response(200, json=RESULT)


def _client(rec: Recorder) -> Client:
    return Client("http://ce.test", "ce_k_s", transport=httpx.MockTransport(rec))


def test_add_messages_takes_the_python_apis_order_without_warning() -> None:
    rec = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r1 = _client(rec).add_messages(MESSAGES, "s1")
        r2 = _client(rec).add_messages(messages=MESSAGES, session_id="s1")
    assert r1.items[0].status == r2.items[0].status == "added"
    assert rec.bodies == [{"session_id": "s1", "messages": MESSAGES}] * 2


def test_the_old_order_still_works_and_warns() -> None:
    rec = Recorder()
    with pytest.warns(DeprecationWarning, match=r"add_messages\(messages, session_id\)") as caught:
        result = _client(rec).add_messages("s1", MESSAGES)
    assert caught[0].filename == __file__  # points at the caller's line
    assert result.uris == [RESULT["items"][0]["uri"]]
    assert rec.bodies == [{"session_id": "s1", "messages": MESSAGES}]
    with pytest.warns(DeprecationWarning):
        _client(rec).add_messages(session_id=MESSAGES, messages="s1")  # swapped keywords: the same rule
    assert rec.bodies[-1] == {"session_id": "s1", "messages": MESSAGES}


def test_async_client_has_the_same_order_and_the_same_warning() -> None:
    rec = Recorder()

    async def main() -> None:
        async with AsyncClient("http://ce.test", "ce_k_s", transport=httpx.MockTransport(rec)) as client:
            await client.add_messages(MESSAGES, "s1")
            with pytest.warns(DeprecationWarning):
                await client.add_messages("s1", MESSAGES)

    asyncio.run(main())
    assert rec.bodies == [{"session_id": "s1", "messages": MESSAGES}] * 2


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
