"""The compact search_memory answer (issue 15): same hits and order, L0 cut at a word, notes only in debug, and
the match_quality label always shown."""

from __future__ import annotations

from context_engine.retrieval.compact import compact_search, is_informational, shorten
from context_engine.schema.hits import RetrievedBlock
from context_engine.schema.query import NextActions, SearchMemoryResponse, SearchTrace


def test_shorten_cuts_at_a_word_or_a_character():
    assert shorten("short", 10) == "short"
    assert shorten("alpha beta gamma delta", 15) == "alpha beta…"
    assert shorten("容器频繁重启的处理方法", 6) == "容器频繁重…"
    assert all(len(shorten("word " * 50, n)) <= n for n in (16, 33, 110))


def test_compact_search_keeps_order_and_moves_notes_to_debug():
    hits = [
        RetrievedBlock(
            uri=f"ctx://resources/ops/d{i}.md",
            level_hit="L0",
            score=s,
            category="",
            owner_space="shared",
            abstract="A fairly long abstract that goes on and on about runbooks " * 3,
            has_overview=True,
            has_content=True,
            read_recommendation="read_l1" if i == 0 else "none",
            match_reason="l0_vector",
        )
        for i, s in enumerate((0.51249, 0.2))
    ]
    warnings = ["RET-4221: planner found no preferred context type", "RET-5002: recheck degraded"]
    full = SearchMemoryResponse(
        request_id="r",
        typed_queries=[],
        seed_hits=[],
        hits=hits,
        next_actions=NextActions(recommended_read_l1_uris=[hits[0].uri]),
        trace=SearchTrace(warnings=warnings),
        match_quality="weak",
    )
    compact = compact_search(full, abstract_max_chars=40)
    assert [(h.uri, h.score) for h in compact.hits] == [(hits[0].uri, 0.512), (hits[1].uri, 0.2)]
    assert all(len(h.abstract) <= 40 and h.abstract.endswith("…") for h in compact.hits)
    assert compact.warnings == ["RET-5002: recheck degraded"] and compact.debug is None
    assert is_informational(warnings[0]) and not is_informational(warnings[1])
    assert set(compact.model_dump()) == {"request_id", "match_quality", "hits", "warnings"}
    assert compact.match_quality == "weak"
    debug = compact_search(full, include_debug=True).debug
    assert debug is not None and debug.trace.warnings == warnings and debug.next_actions == full.next_actions


def test_compact_search_always_shows_match_quality():
    """``none`` is what tells an agent the store most likely lacks the answer: never left out of the JSON."""
    empty = SearchMemoryResponse(
        request_id="r", typed_queries=[], seed_hits=[], hits=[], next_actions=NextActions(), trace=SearchTrace()
    )
    assert empty.match_quality == "none"
    dumped = compact_search(empty).model_dump(mode="json")
    assert dumped == {"request_id": "r", "match_quality": "none", "hits": []}


def test_a_hit_carries_when_its_memory_happened_and_nothing_else_does():
    """``occurred_at`` in the full and the compact hit for a memory with a time; left out of the JSON otherwise."""
    from datetime import UTC, datetime

    when = datetime(2024, 10, 14, 16, 0, tzinfo=UTC)
    common = {"level_hit": "L0", "category": "", "has_overview": False, "has_content": True, "match_reason": "l0"}
    message = RetrievedBlock(
        uri="ctx://user/ann/memories/sessions/s1/000001.md",
        score=0.5,
        owner_space="user:ann",
        abstract="user: I started at Northwind last Monday.",
        occurred_at=when,
        **common,
    )
    runbook = RetrievedBlock(uri="ctx://resources/ops/d.md", score=0.4, owner_space="shared", abstract="d", **common)
    assert message.model_dump(mode="json")["occurred_at"] == "2024-10-14T16:00:00Z"
    assert "occurred_at" not in runbook.model_dump(mode="json")
    full = SearchMemoryResponse(
        request_id="r",
        typed_queries=[],
        seed_hits=[],
        hits=[message, runbook],
        next_actions=NextActions(),
        trace=SearchTrace(),
    )
    hits = compact_search(full).model_dump(mode="json")["hits"]
    assert hits[0]["occurred_at"] == "2024-10-14T16:00:00Z" and "occurred_at" not in hits[1]
