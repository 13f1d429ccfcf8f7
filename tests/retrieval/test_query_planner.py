"""QueryPlanner: rule classification (zh/en), intent ranking (never exclusion), fallback, session, hints (seed 000
§4.2, §10)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.observability.trace import TraceRecorder
from context_engine.retrieval.query_planner import QueryPlanner, classify, preferred_types
from context_engine.schema.context import RequestContext
from context_engine.settings import PlannerSettings

CTX = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="bot")


def plan(query: str, **kwargs):
    trace = TraceRecorder(detailed=True)
    planner = QueryPlanner(kwargs.pop("settings", PlannerSettings()))
    typed = planner.plan(query, kwargs.pop("session", None), kwargs.pop("hints", None), CTX, trace=trace, **kwargs)
    return typed, trace


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("我的回答偏好是什么", "memory"),
        ("回顾一下我的背景", "memory"),
        ("What are my preferences for answers?", "memory"),
        ("Do you remember where I work?", "memory"),
        ("重启服务的步骤", "skill"),
        ("用什么命令清理镜像", "skill"),
        ("How to rotate the signing keys", "skill"),
        ("which command lists pods", "skill"),
        ("数据库连接池的文档", "resource"),
        ("给我看一下接口规范和链接", "resource"),
        ("Show me the documentation for the payments API", "resource"),
        ("the runbook for disk pressure", "resource"),
    ],
)
def test_single_intent_ranks_its_type_first_and_keeps_the_others(query, expected):
    typed, trace = plan(query)
    others = [t for t in ("memory", "skill", "resource") if t != expected]
    assert [t.context_type for t in typed] == [expected, *others]
    assert trace.warnings == []
    assert {t.hints.intent for t in typed} == {expected}
    assert preferred_types(typed) == {expected}
    assert all(t.text == query for t in typed)


def test_how_do_i_question_still_searches_memory_and_resource():
    typed, trace = plan("how do I handle a node that is not ready?")
    assert [t.context_type for t in typed] == ["skill", "memory", "resource"]
    assert preferred_types(typed) == {"skill"}
    assert trace.warnings == []


def test_english_keywords_match_whole_words_only():
    assert classify("docker commands") == {"skill": ["commands"]}  # 'doc' is not in 'docker'
    assert classify("recommendation engines") == {}  # 'command' is not in 'recommendation'


def test_several_intents_split_in_priority_order():
    typed, trace = plan("根据我的偏好，给出部署步骤")
    assert [t.context_type for t in typed] == ["memory", "skill", "resource"]
    assert preferred_types(typed) == {"memory", "skill"}
    assert trace.warnings == []
    typed, trace = plan("the doc about how to restart")  # skill + resource, written resource first
    assert [t.context_type for t in typed] == ["skill", "resource", "memory"]
    assert preferred_types(typed) == {"skill", "resource"}
    assert trace.warnings == []
    assert all(t.text == typed[0].text for t in typed)


@pytest.mark.parametrize("query", ["Pod is crash looping", "磁盘快满了", "hello"])
def test_no_intent_falls_back_to_three_queries_with_warning(query):
    typed, trace = plan(query)
    assert [t.context_type for t in typed] == ["memory", "skill", "resource"]
    assert all(t.hints.intent == "fallback" for t in typed)
    assert preferred_types(typed) == frozenset()  # ranked equally: no boost
    assert "ranked equally" in trace.warnings[0]  # informational wording
    assert len(trace.warnings) == 1 and trace.warnings[0].startswith("RET-4221:")
    assert trace.codes == [ErrorCode.PLANNER_UNCLASSIFIED]


def test_every_type_matched_is_a_conflict_and_falls_back():
    typed, trace = plan("remember the steps in the doc")
    assert [t.context_type for t in typed] == ["memory", "skill", "resource"]
    assert trace.warnings[0].startswith("RET-4221:") and "conflict" in trace.warnings[0]


def test_session_classifies_a_follow_up_and_extends_the_text():
    session = {
        "messages": [
            {"role": "user", "content": "Where is the runbook for the payments database?"},
            {"role": "assistant", "content": "Here it is."},
            {"role": "user", "content": "What about backups?"},
        ]
    }
    typed, trace = plan("and for staging?", session=session)
    # the newest user message names no intent; the one before names 'runbook' (resource)
    assert [t.context_type for t in typed] == ["resource", "memory", "skill"]
    assert typed[0].hints.intent == "session:resource"
    assert preferred_types(typed) == {"resource"}
    assert trace.warnings == []
    assert typed[0].text.startswith("and for staging?") and "backups" in typed[0].text


def test_session_as_plain_strings_and_max_messages():
    session = {"messages": ["怎么重启服务的步骤", "ok", "再说一遍"]}
    typed, _ = plan("嗯?", session=session)
    assert [t.context_type for t in typed] == ["skill", "memory", "resource"]
    typed, trace = plan("嗯?", session=session, settings=PlannerSettings(session_max_messages=2))
    assert len(typed) == 3 and trace.warnings[0].startswith("RET-4221")


def test_long_unclassified_query_is_not_extended_by_the_session():
    session = {"messages": ["show me the payments runbook"]}
    query = "the certificate of the ingress controller expires tomorrow morning"
    typed, _ = plan(query, session=session)
    assert typed[0].text == query


def test_planner_hints_force_types_and_carry_terms_and_time_range():
    hints = {
        "context_types": ["resource", "memory"],
        "terms": ["kubernetes"],
        "must_have_terms": ["pod"],
        "exclude_terms": ["draft"],
        "time_range": {"start": "2026-01-01T00:00:00Z"},
    }
    typed, trace = plan("what is going on", hints=hints)
    assert [t.context_type for t in typed] == ["memory", "resource"]  # the caller's types only: exclusive
    assert preferred_types(typed) == frozenset()
    assert trace.warnings == []
    for t in typed:
        assert t.hints.intent == "hint:memory+resource"
        assert t.text == "what is going on kubernetes"
        assert t.hints.must_have_terms == ["pod"] and t.hints.exclude_terms == ["draft"]
        assert t.filters.time_range.start == datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("hints", "session"),
    [({"intent": "everything"}, None), ({"account_id": "other"}, None), (None, {"messages": 5})],
)
def test_malformed_hints_or_session_are_rejected(hints, session):
    with pytest.raises(ContextEngineError) as exc:
        plan("docs", hints=hints, session=session)
    assert exc.value.code is ErrorCode.QUERY_INVALID


def test_account_comes_from_the_context_and_request_fields_are_copied():
    typed, _ = plan("how to deploy", top_k=7, categories=["k8s"], owner_space="user:alice")
    assert len(typed) == 3
    for tq in typed:
        assert tq.filters.account_id == "acme"
        assert tq.filters.owner_space == "user:alice"
        assert tq.top_k == 7 and tq.categories == ["k8s"]


def test_default_categories_fill_an_empty_request():
    settings = PlannerSettings(default_categories={"memory": ("preference", "profile")})
    typed, _ = plan("my preferences", settings=settings)
    assert typed[0].categories == ["preference", "profile"]
    assert [t.categories for t in typed[1:]] == [[], []]  # the other types have no default categories
    typed, _ = plan("my preferences", settings=settings, categories=["event"])
    assert typed[0].categories == ["event"]


def test_target_uri_decides_the_type():
    typed, trace = plan("anything at all", target_uri="ctx://user/alice/memories/")
    assert [t.context_type for t in typed] == ["memory"]
    assert typed[0].target_uri == "ctx://user/alice/memories/"
    assert trace.warnings == []
