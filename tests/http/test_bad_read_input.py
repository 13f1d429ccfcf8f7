"""Bad read input is a 400 with the read code, never a 500 (attack pass 3, docs/interfaces.md "Errors").

* A time no UTC datetime can hold (``9999-12-31T23:59:59-14:00`` is 10000-01-01 in UTC): the audit list's
  ``since``/``until``, and ``time_range`` / ``planner_hints.time_range`` of search_memory, were ``500 WRT-5001``
  (retryable!) and ``500 API-5001``. ``planner_hints.time_range`` with ``start >= end`` was accepted; it is now refused
  like ``time_range``.
* A ``metadata_filter`` integer outside signed 64 bits failed inside SQLite (500); a key with NUL (or any key the
  write refuses: not printable) or a string with NUL failed inside PostgreSQL: now ``400 RET-4001``.
* ``session_archive`` / ``planner_hints`` / ``metadata_filter`` nested ~300 deep ran the search, then failed writing
  the audit row (500); now refused up front above ``MAX_JSON_DEPTH`` (32) levels, with no audit row.
* ``read_memory`` of a malformed URI was ``403 RET-4032`` while ``ls``/``tree`` said ``400 RET-4001``; a well-formed
  URI the caller cannot see keeps the one 403 body, the same as a missing one.
* ``GET /api/v1/memories?user_space=`` (an empty optional filter) was ``400 WRT-4001``; it now means "absent".

Surfaces: HTTP through the real app (the module's ``client``), MCP (the server object, in process) and Python.
"""

from __future__ import annotations

import json
from datetime import datetime

import anyio
import pytest
from pydantic import ValidationError

from context_engine.api import calls
from context_engine.errors import ContextEngineError
from context_engine.interfaces.mcp.server import build_mcp_server
from context_engine.schema.query import MAX_JSON_DEPTH, ReadMemoryRequest, SearchMemoryRequest, json_depth
from tests.http.conftest import ACME_ADMIN, ALICE, BOB

SEARCH = "/api/v1/search_memory"
READ = "/api/v1/read_memory"
AUDIT = "/api/v1/tool_invocations"
AFTER_UTC = "9999-12-31T23:59:59-14:00"  # 10000-01-01T13:59:59Z
BEFORE_UTC = "0001-01-01T00:00:00+14:00"  # 0000-12-31T10:00:00Z
INT64_MAX = 2**63 - 1


def _deep(levels: int) -> dict:
    value: dict = {"a": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def _raw_post(client, path: str, body: str, headers: dict):
    # a hand-written body: json.dumps of a value 300 levels deep would need Python's recursion
    return client.post(path, content=body, headers={**headers, "Content-Type": "application/json"})


def _code(r) -> tuple[int, str | None]:
    body = r.json()
    return r.status_code, body.get("code") if isinstance(body, dict) else None


def _mcp(service, ctx, tool: str, args: dict) -> tuple[bool, dict]:
    """(is_error, the answer's JSON) of one in-process MCP tool call made as ``ctx``."""
    server = build_mcp_server(lambda: service, lambda _request: ctx)
    result = anyio.run(server.call_tool, tool, args)
    return bool(result.is_error), json.loads(result.content[0].text)


def _search_rows(service) -> int:
    return len(service.list_invocations(ACME_ADMIN, tool_name="search_memory", limit=1000))


# ---- times that cannot be represented in UTC ------------------------------------------------------------------------
@pytest.mark.parametrize(("param", "value"), [("since", BEFORE_UTC), ("until", AFTER_UTC)])
def test_an_audit_bound_outside_utc_is_ret_4001(service, client, tenants, param, value):
    r = client.get(AUDIT, params={param: value}, headers=tenants.admin)
    assert _code(r) == (400, "RET-4001")
    assert r.json()["details"]["field"] == param and "retryable" not in r.json()["details"]
    with pytest.raises(ContextEngineError) as exc:
        service.list_invocations(ACME_ADMIN, **{param: datetime.fromisoformat(value)})
    assert (exc.value.code.value, exc.value.details) == ("RET-4001", {"field": param})


def test_an_audit_bound_with_an_offset_inside_utc_still_filters(client, tenants):
    client.post(SEARCH, json={"query": "disk pressure"}, headers=tenants.admin)
    everything = client.get(AUDIT, params={"since": "2000-01-01T00:00:00+14:00"}, headers=tenants.admin)
    nothing = client.get(AUDIT, params={"until": "2000-01-01T00:00:00-14:00"}, headers=tenants.admin)
    assert everything.status_code == nothing.status_code == 200
    assert everything.json()["items"] and nothing.json()["items"] == []


@pytest.mark.parametrize("bound", ["start", "end"])
@pytest.mark.parametrize("value", [AFTER_UTC, BEFORE_UTC])
def test_a_time_range_bound_outside_utc_is_ret_4001(service, client, tenants, bound, value):
    body = {"query": "concise answers", "time_range": {bound: value}}
    r = client.post(SEARCH, json=body, headers=tenants.alice)
    assert _code(r) == (400, "RET-4001")
    assert "cannot be represented in UTC" in r.json()["message"]
    is_error, answer = _mcp(service, ALICE, "search_memory", body)
    assert is_error and answer["code"] == "RET-4001"
    with pytest.raises(ValidationError, match="cannot be represented in UTC"):
        SearchMemoryRequest(**body)


@pytest.mark.parametrize(
    "window",
    [{"end": AFTER_UTC}, {"start": BEFORE_UTC}, {"start": "2024-01-02T00:00:00Z", "end": "2024-01-01T00:00:00Z"}],
)
def test_planner_hints_time_range_is_checked_like_time_range(service, client, tenants, window):
    body = {"query": "concise answers", "planner_hints": {"time_range": window}}
    r = client.post(SEARCH, json=body, headers=tenants.alice)
    assert _code(r) == (400, "RET-4001")
    assert r.json()["details"]["field"] == "planner_hints"
    with pytest.raises(ContextEngineError) as exc:
        service.search_memory(SearchMemoryRequest(**body), ALICE)
    assert (exc.value.code.value, exc.value.details["field"]) == ("RET-4001", "planner_hints")


def test_time_ranges_at_the_edge_of_utc_are_answered(client, tenants):
    last = "9999-12-31T09:59:59-14:00"  # 9999-12-31T23:59:59Z: the last second UTC holds
    for body in (
        {"query": "concise answers", "time_range": {"start": "2000-01-01T00:00:00+14:00", "end": last}},
        {"query": "concise answers", "planner_hints": {"time_range": {"end": last}}},
    ):
        r = client.post(SEARCH, json=body, headers=tenants.alice)
        assert r.status_code == 200, r.text


# ---- metadata_filter integers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [INT64_MAX + 1, [1, -(10**20)], -(2**63) - 1])
def test_a_metadata_integer_outside_64_bits_is_ret_4001(service, client, tenants, value):
    body = {"query": "concise answers", "metadata_filter": {"a": value}}
    r = client.post(SEARCH, json=body, headers=tenants.alice)
    assert _code(r) == (400, "RET-4001") and r.json()["details"]["field"] == "metadata_filter"
    is_error, answer = _mcp(service, ALICE, "search_memory", body)
    assert is_error and answer["code"] == "RET-4001"
    with pytest.raises(ContextEngineError) as exc:
        service.search_memory(SearchMemoryRequest(**body), ALICE)
    assert (exc.value.code.value, exc.value.details["field"]) == ("RET-4001", "metadata_filter")


@pytest.mark.parametrize("value", [INT64_MAX, -(2**63), [0, INT64_MAX]])
def test_metadata_integers_within_64_bits_are_answered(client, tenants, value):
    body = {"query": "concise answers", "metadata_filter": {"a": value}}
    r = client.post(SEARCH, json=body, headers=tenants.alice)
    assert r.status_code == 200 and r.json()["hits"] == []  # no memory has metadata key "a"


# ---- metadata_filter keys and strings the stores cannot compare ----------------------------------------------------
@pytest.mark.parametrize("metadata_filter", [{"a\x00": "x"}, {"tab\tkey": "x"}, {"a": "x\x00y"}, {"a": ["ok", "\x00"]}])
def test_a_metadata_key_no_memory_can_have_or_a_nul_value_is_ret_4001(service, client, tenants, metadata_filter):
    """A key the write refuses (not printable) matches nothing; a NUL failed inside PostgreSQL (500)."""
    body = {"query": "concise answers", "metadata_filter": metadata_filter}
    r = client.post(SEARCH, json=body, headers=tenants.alice)
    assert _code(r) == (400, "RET-4001") and r.json()["details"]["field"] == "metadata_filter"
    with pytest.raises(ContextEngineError) as exc:
        service.search_memory(SearchMemoryRequest(**body), ALICE)
    assert (exc.value.code.value, exc.value.details["field"]) == ("RET-4001", "metadata_filter")


# ---- nesting depth --------------------------------------------------------------------------------------------------
def test_json_depth_counts_objects_and_lists_without_recursion():
    assert [json_depth(v) for v in (1, "x", {}, {"a": 1}, [1], [[]], {"messages": [{"content": "x"}]})] == [
        0,
        0,
        1,
        1,
        1,
        2,
        3,
    ]
    assert json_depth(_deep(MAX_JSON_DEPTH)) == MAX_JSON_DEPTH
    assert json_depth(_deep(5000)) == MAX_JSON_DEPTH + 1  # stops looking past the limit; no RecursionError


@pytest.mark.parametrize("field", ["session_archive", "planner_hints", "metadata_filter"])
def test_a_request_object_nested_300_deep_is_refused_before_the_search(service, client, tenants, field):
    rows = _search_rows(service)
    body = '{"query":"disk pressure","' + field + '":' + '{"a":' * 300 + "1" + "}" * 300 + "}"
    r = _raw_post(client, SEARCH, body, tenants.admin)
    assert _code(r) == (400, "RET-4001")
    assert [e["loc"] for e in r.json()["details"]["errors"]] == [["body", field]]
    assert "nested more than 32 levels deep" in r.json()["message"]
    assert _search_rows(service) == rows  # refused up front: the search never ran, no audit row


def test_a_deep_value_inside_the_archive_messages_is_refused(client, tenants):
    inner = '{"a":' * 300 + "1" + "}" * 300
    body = '{"query":"x","session_archive":{"messages":[{"role":"user","content":"hi","x":' + inner + "}]}}"
    assert _code(_raw_post(client, SEARCH, body, tenants.admin)) == (400, "RET-4001")


def test_the_depth_cap_is_32_levels_on_every_surface(service, client, tenants):
    at_cap, over = _deep(MAX_JSON_DEPTH), _deep(MAX_JSON_DEPTH + 1)
    ok = client.post(SEARCH, json={"query": "disk pressure", "session_archive": at_cap}, headers=tenants.admin)
    assert ok.status_code == 200, ok.text
    refused = client.post(SEARCH, json={"query": "disk pressure", "session_archive": over}, headers=tenants.admin)
    assert _code(refused) == (400, "RET-4001")
    is_error, answer = _mcp(service, ACME_ADMIN, "search_memory", {"query": "disk pressure", "session_archive": over})
    assert is_error and answer["code"] == "RET-4001"
    with pytest.raises(ValidationError, match="nested more than 32 levels deep"):
        SearchMemoryRequest(query="disk pressure", metadata_filter=over)


# ---- read_memory: a malformed URI is RET-4001, an unseen one the one 403 --------------------------------------------
MALFORMED = ["", "ctx://", "http://x", "ctx://resources/../x", "ctx://resources/run:books/", "./"]


@pytest.mark.parametrize("uri", MALFORMED)
def test_read_memory_of_a_malformed_uri_is_ret_4001(service, client, tenants, uri):
    for headers in (tenants.admin, tenants.alice, tenants.bob):
        r = client.post(READ, json={"uri": uri, "level": "L1"}, headers=headers)
        assert _code(r) == (400, "RET-4001") and r.json()["details"]["field"] == "uri"
        assert _code(client.get("/api/v1/ls", params={"uri": uri}, headers=headers)) == (400, "RET-4001")
    is_error, answer = _mcp(service, ALICE, "read_memory", {"uri": uri})
    assert is_error and answer["code"] == "RET-4001"
    with pytest.raises(ContextEngineError) as exc:
        calls.read_memory(service, ReadMemoryRequest(uri=uri), ALICE)
    assert exc.value.code.value == "RET-4001"
    with pytest.raises(ContextEngineError) as direct:  # the Python API itself, not only the tool layer
        service.read_memory(ReadMemoryRequest(uri=uri), ALICE)
    assert direct.value.code.value == "RET-4001"


def test_read_memory_of_an_unseen_uri_is_one_403_whether_it_exists_or_not(service, client, tenants):
    same_id = {"X-Request-ID": "read-probe"}
    existing = client.post(
        READ, json={"uri": "ctx://resources/kubernetes/NodeNotReady.md"}, headers={**tenants.bob, **same_id}
    )
    missing = client.post(
        READ, json={"uri": "ctx://resources/kubernetes/NoSuchRunbook.md"}, headers={**tenants.bob, **same_id}
    )
    assert _code(existing) == _code(missing) == (403, "RET-4032")
    assert existing.content.replace(b"NodeNotReady", b"X") == missing.content.replace(b"NoSuchRunbook", b"X")
    for uri in ("ctx://resources/kubernetes/NodeNotReady.md", "ctx://resources/kubernetes/NoSuchRunbook.md"):
        is_error, answer = _mcp(service, BOB, "read_memory", {"uri": uri})
        assert is_error and answer["code"] == "RET-4032" and answer["details"] == {"uri": uri}
    owner = client.post(READ, json={"uri": "ctx://resources/kubernetes/NodeNotReady.md"}, headers=tenants.admin)
    assert owner.status_code == 200


# ---- an empty optional filter is an absent one ----------------------------------------------------------------------
@pytest.mark.parametrize("param", ["user_space", "category", "conversation_id", "session_id"])
def test_an_empty_list_memories_filter_is_absent(service, client, tenants, param):
    plain = client.get("/api/v1/memories", headers=tenants.alice)
    empty = client.get("/api/v1/memories", params={param: ""}, headers=tenants.alice)
    assert plain.status_code == empty.status_code == 200, empty.text
    uris = [m["uri"] for m in plain.json()["items"]]
    assert uris and [m["uri"] for m in empty.json()["items"]] == uris
    is_error, answer = _mcp(service, ALICE, "list_memories", {param: ""})
    assert not is_error and [m["uri"] for m in answer["items"]] == uris


def test_an_empty_user_space_on_memory_events_is_absent(client, tenants):
    plain = client.get("/api/v1/memories/events", headers=tenants.alice)
    empty = client.get("/api/v1/memories/events", params={"user_space": ""}, headers=tenants.alice)
    assert plain.status_code == empty.status_code == 200, empty.text
    assert plain.json()["items"] and empty.json()["items"] == plain.json()["items"]
