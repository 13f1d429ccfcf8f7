"""A request refused for its size leaves an audit row of bounded size (an attack pass, 2026-12-07): a lookup or a
search with a 1 MB query or session id is refused at once (400 RET-4001), and its ``tool_invocation`` row held the
whole text, so a few refused calls grew the database by megabytes and a listing of three rows answered 6 MB. The
row keeps the query's SHA-256, the first ``AUDIT_PARAM_CHARS`` characters and the length
(``knowledge/tool_invocation_recorder.py`` ``bounded_params``)."""

from __future__ import annotations

import hashlib
import json

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.knowledge.tool_invocation_recorder import (
    AUDIT_PARAM_CHARS,
    AUDIT_PARAM_DEPTH,
    AUDIT_PARAM_ITEMS,
    bounded_params,
)
from context_engine.schema.context import RequestContext

ADMIN = RequestContext(account_id="default", role="admin")
HUGE = "crash looping " * 80_000  # 1,120,000 characters


@pytest.fixture
def engine(tmp_path):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings
    from tests.retrieval.conftest import HashEmbedder

    e = ContextEngineService(load_settings(tmp_path / "home"), embedder=HashEmbedder())
    yield e
    e.close()


def _rows(engine, tool: str):
    return engine.knowledge.recorder.list_invocations(ADMIN, tool_name=tool)


def test_a_lookup_refused_for_its_query_leaves_a_bounded_row(engine):
    with pytest.raises(ContextEngineError) as caught:
        engine.lookup_knowledge(HUGE, ADMIN)
    assert caught.value.code is ErrorCode.QUERY_INVALID
    [row] = _rows(engine, "lookup_knowledge")
    params = row.input_params
    assert row.success is False and params["query_sha256"] == hashlib.sha256(HUGE.encode()).hexdigest()
    assert params["query"] == HUGE[:AUDIT_PARAM_CHARS] + f"… [{len(HUGE)} characters]"
    assert len(json.dumps(params)) < 2 * AUDIT_PARAM_CHARS


def test_a_lookup_refused_for_its_session_id_leaves_a_bounded_row(engine):
    session = "s" * 1_000_000
    with pytest.raises(ContextEngineError) as caught:
        engine.lookup_knowledge("Pod is crash looping.", ADMIN, session_id=session)
    assert caught.value.code is ErrorCode.QUERY_INVALID
    [row] = _rows(engine, "lookup_knowledge")
    assert row.session_id is None and row.input_params["session_id"].endswith("… [1000000 characters]")
    assert len(json.dumps(row.input_params)) < 2 * AUDIT_PARAM_CHARS


def test_a_search_refused_for_its_query_leaves_a_bounded_row(engine):
    user = RequestContext(account_id="default", role="user", user_space="alice")
    with pytest.raises(ContextEngineError) as caught:
        engine.search_memory(HUGE, user)
    assert caught.value.code is ErrorCode.QUERY_INVALID
    [row] = _rows(engine, "search_memory")
    assert row.success is False and len(json.dumps(row.input_params)) < 2 * AUDIT_PARAM_CHARS
    assert row.input_params["query_sha256"] == hashlib.sha256(HUGE.encode()).hexdigest()


def test_an_accepted_request_is_kept_whole(engine):
    query = "q" * AUDIT_PARAM_CHARS  # the query's own limit
    engine.lookup_knowledge(query, ADMIN)
    [row] = _rows(engine, "lookup_knowledge")
    assert row.input_params["query"] == query


def test_bounded_params_cuts_lists_objects_and_depth_and_keeps_the_rest():
    deep: object = 1
    for _ in range(AUDIT_PARAM_DEPTH + 3):
        deep = [deep]
    params = {
        "ok": [1, 2.5, True, None, "x"],
        "many": list(range(500)),
        "deep": deep,
        "wide": {str(i): i for i in range(300)},
    }
    out = bounded_params(params)
    assert out["ok"] == [1, 2.5, True, None, "x"]
    assert out["many"][:AUDIT_PARAM_ITEMS] == list(range(AUDIT_PARAM_ITEMS)) and out["many"][-1] == "… [500 items]"
    assert len(out["wide"]) == AUDIT_PARAM_ITEMS + 1 and out["wide"]["…"] == "[300 entries]"
    level, depth = out["deep"], 1
    while isinstance(level, list):
        level, depth = level[0], depth + 1
    assert depth == AUDIT_PARAM_DEPTH and level == f"… [list nested deeper than {AUDIT_PARAM_DEPTH} levels]"
    assert bounded_params({"a": "b"}) == {"a": "b"}
