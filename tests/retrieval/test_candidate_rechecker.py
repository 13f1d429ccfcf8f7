"""CandidateRechecker: only drops, records exclude_reason, never raises, never raises a score (seed 000 §6, §10)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_engine.errors import ErrorCode
from context_engine.observability.trace import TraceRecorder
from context_engine.retrieval.candidate_rechecker import CandidateRechecker
from context_engine.schema.context import RequestContext
from context_engine.schema.hits import NodeHit
from context_engine.schema.query import QueryFilters, QueryHints, TimeRange, TypedQuery

ALICE = RequestContext(account_id="acme", role="user", user_space="alice")


def hit(uri: str, **kw) -> NodeHit:
    base = {
        "owner_space": "user:alice",
        "context_type": "memory",
        "category": "preference",
        "abstract": "Alice prefers short answers",
        "score": 0.5,
        "updated_at": datetime(2026, 3, 1, tzinfo=UTC),
    }
    base.update(kw)
    return NodeHit(uri=uri, **base)


@pytest.mark.parametrize(
    ("tq_kw", "hit_kw", "reason"),
    [
        ({}, {"owner_space": "user:bob"}, "not_visible"),
        ({"filters": QueryFilters(owner_space="shared")}, {}, "owner_space_mismatch"),
        ({}, {"context_type": "skill"}, "context_type_mismatch"),
        ({"categories": ["profile"]}, {}, "category_mismatch"),
        ({"target_uri": "ctx://user/alice/memories/profile/"}, {}, "outside_target_uri"),
        ({"target_uri": "ctx://user/alice/memories/pref"}, {}, "outside_target_uri"),  # no string-prefix match
        (
            {"filters": QueryFilters(time_range=TimeRange(start=datetime(2026, 4, 1, tzinfo=UTC)))},
            {},
            "outside_time_range",
        ),
        (
            {"filters": QueryFilters(time_range=TimeRange(end=datetime(2026, 3, 1, tzinfo=UTC)))},
            {},
            "outside_time_range",
        ),
        (
            {"filters": QueryFilters(time_range=TimeRange(end=datetime(2027, 1, 1)))},
            {"updated_at": None},
            "outside_time_range",
        ),
        ({"hints": QueryHints(must_have_terms=["Chinese"])}, {}, "missing_term:Chinese"),
        ({"hints": QueryHints(exclude_terms=["SHORT"])}, {}, "excluded_term:SHORT"),
    ],
)
def test_each_rule_drops_with_its_reason(tq_kw, hit_kw, reason):
    tq = TypedQuery(text="q", context_type="memory", **tq_kw)
    trace = TraceRecorder(detailed=True)
    h = hit("ctx://user/alice/memories/preference/a.md", **hit_kw)
    assert CandidateRechecker().recheck(tq, [h], ALICE, trace=trace) == []
    (event,) = [e for e in trace.events if e["event"] == "drop"]
    assert event == {"stage": "recheck", "event": "drop", "uri": h.uri, "exclude_reason": reason}
    assert trace.drop_reasons("recheck") == {reason.split(":")[0]: 1}


def test_passing_candidates_are_returned_unchanged_in_order():
    tq = TypedQuery(
        text="q",
        context_type="memory",
        categories=["preference"],
        target_uri="ctx://user/alice/memories/",
        hints=QueryHints(must_have_terms=["alice"], exclude_terms=["bob"]),
        filters=QueryFilters(
            owner_space="user:alice", time_range=TimeRange(start=datetime(2026, 1, 1), end=datetime(2026, 6, 1))
        ),
    )
    hits = [hit(f"ctx://user/alice/memories/preference/{i}.md", score=0.1 * i) for i in range(5)]
    kept = CandidateRechecker().recheck(tq, hits, ALICE)
    assert kept == hits and all(a is b for a, b in zip(kept, hits, strict=True))


def test_failure_keeps_candidates_and_warns(monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("broken rule")

    monkeypatch.setattr(CandidateRechecker, "_reason", staticmethod(boom))
    trace = TraceRecorder()
    hits = [hit("ctx://user/alice/memories/a.md")]
    assert CandidateRechecker().recheck(TypedQuery(text="q", context_type="memory"), hits, ALICE, trace=trace) == hits
    assert trace.codes == [ErrorCode.RECHECK_FAILED]
    assert trace.warnings[0].startswith("RET-5002:")


_hits = st.lists(
    st.builds(
        hit,
        uri=st.sampled_from(
            [f"ctx://user/{s}/memories/{c}/{i}.md" for s in ("alice", "bob") for c in "xy" for i in range(3)]
        ),
        owner_space=st.sampled_from(["user:alice", "user:bob", "shared"]),
        context_type=st.sampled_from(["memory", "skill"]),
        category=st.sampled_from(["x", "y", ""]),
        abstract=st.sampled_from(["alpha beta", "beta gamma", "gamma"]),
        score=st.floats(0, 1),
    ),
    max_size=12,
)


@given(
    hits=_hits,
    must=st.lists(st.sampled_from(["alpha", "beta", "gamma"]), max_size=2),
    never=st.lists(st.sampled_from(["alpha", "beta", "gamma"]), max_size=2),
    cats=st.lists(st.sampled_from(["x", "y"]), max_size=2),
)
@settings(max_examples=300, derandomize=True)
def test_recheck_only_removes_and_never_changes_scores(hits, must, never, cats):
    tq = TypedQuery(
        text="q", context_type="memory", categories=cats, hints=QueryHints(must_have_terms=must, exclude_terms=never)
    )
    trace = TraceRecorder()
    kept = CandidateRechecker().recheck(tq, hits, ALICE, trace=trace)
    assert all(any(k is h for h in hits) for k in kept)  # a subset, the very same objects
    assert [k.score for k in kept] == [h.score for h in hits if any(h is k for k in kept)]
    assert sum(trace.drop_reasons("recheck").values()) == len(hits) - len(kept)
    assert trace.warnings == []
