"""The search_memory orchestration on the hashing embedder: request errors, every seed 000 §7 degradation (warning,
counter, result), thresholds through the pipeline, the thinking trace, and the assembler's independence of reads."""

from __future__ import annotations

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.query import SearchMemoryRequest
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from tests.retrieval.conftest import ADMIN, ALICE, BOB, HashEmbedder, seed_small_store


@pytest.fixture(scope="module", params=["index", "memory"])
def shared(request, tmp_path_factory):
    """One seeded engine per similarity source for the tests that change nothing (counters are read as deltas)."""
    settings = load_settings(tmp_path_factory.mktemp("pipeline"), retrieval={"l0_source": request.param})
    e = ContextEngineService(settings, embedder=HashEmbedder())
    seed_small_store(e)
    yield e
    e.close()


@pytest.fixture
def engine(shared):
    return shared


@pytest.fixture(params=["index", "memory"])
def fresh(request, hash_engine):
    """An engine of its own, for tests that break a part of it."""
    e = hash_engine(retrieval={"l0_source": request.param})
    seed_small_store(e)
    return e


def fallbacks(engine, code: str) -> float:
    return engine.metrics.registry.get_sample_value("ce_retrieval_fallback_total", {"code": code}) or 0.0


def sample(engine, name: str, labels: dict | None = None) -> float:
    return engine.metrics.registry.get_sample_value(name, labels or {}) or 0.0


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"query": ""}, "RET-4001"),
        ({"query": "   "}, "RET-4001"),
        ({"query": "a\x00b"}, "RET-4001"),
        ({"query": "x" * 5000}, "RET-4001"),
        ({"query": "disk", "top_k": 0}, "RET-4002"),
        ({"query": "disk", "top_k": 51}, "RET-4002"),
        ({"query": "disk", "score_threshold": -0.1}, "RET-4003"),
        ({"query": "disk", "score_threshold": 1.5}, "RET-4003"),
        ({"query": "disk", "score_threshold": float("nan")}, "RET-4003"),
        ({"query": "disk", "owner_space": "everyone"}, "RET-4001"),
        ({"query": "disk", "target_uri": "not-a-uri"}, "RET-4001"),
        ({"query": "disk", "planner_hints": {"intent": "all"}}, "RET-4001"),
        ({"query": "disk", "categories": [""]}, "RET-4001"),
    ],
)
def test_invalid_requests(engine, fields, code):
    with pytest.raises(ContextEngineError) as exc:
        engine.search_memory(SearchMemoryRequest(**fields), ALICE)
    assert exc.value.code.value == code
    assert exc.value.code.http_status == 400


def test_invisible_target_is_403_whether_or_not_it_exists(engine):
    errors = []
    for target in ("ctx://user/bob/memories/", "ctx://user/bob/memories/nothing/"):
        with pytest.raises(ContextEngineError) as exc:
            engine.search_memory("prefers", ALICE, target_uri=target)
        errors.append(exc.value.envelope())
    assert errors[0] == errors[1]
    assert errors[0]["code"] == "RET-4031"


def test_missing_visible_target_is_ignored_with_a_warning(engine):
    before = fallbacks(engine, "RET-4041")
    r = engine.search_memory("disk space", ALICE, target_uri="ctx://resources/nowhere/", score_threshold=0.0)
    assert any(w.startswith("RET-4041:") for w in r.trace.warnings)
    assert all(tq.target_uri is None for tq in r.typed_queries)
    assert r.hits
    assert fallbacks(engine, "RET-4041") == before + 1


def test_target_restricts_and_canonicalises(engine):
    r = engine.search_memory("disk", ALICE, target_uri="ctx://resources/ops/storage", score_threshold=0.0)
    assert [tq.context_type for tq in r.typed_queries] == ["resource"]
    assert r.typed_queries[0].target_uri == "ctx://resources/ops/storage/"
    assert r.hits and all(h.uri.startswith("ctx://resources/ops/storage/") for h in r.hits)


def test_vector_failure_gives_empty_hits_retryable_and_a_warning(fresh):
    class Broken:
        name = "broken"

        def search(self, *args, **kwargs):
            raise RuntimeError("index is down")

    class BrokenLoad:
        def __getattr__(self, item):
            raise ContextEngineError(ErrorCode.STORAGE_FAILED, "store is down", retryable=True)

    fresh.l0_source.index = Broken()
    if fresh.settings.retrieval.l0_source == "memory":
        fresh.l0_matrix._accounts.clear()
        fresh.l0_matrix._metadata = fresh.l0_source._metadata = BrokenLoad()
    r = fresh.search_memory("disk space", ALICE)
    assert r.hits == [] and r.seed_hits == []
    assert r.retryable is True
    assert [w[:8] for w in r.trace.warnings if w.startswith("RET-5")] == ["RET-5001"]
    assert fallbacks(fresh, "RET-5001") == 1


def test_embedding_failure_is_the_same_degradation(fresh):
    def broken(text):
        raise ContextEngineError(ErrorCode.EMBEDDING_FAILED, "model crashed", retryable=True)

    fresh.search_pipeline._embedder = type("E", (), {"embed_query": staticmethod(broken)})()
    r = fresh.search_memory("disk", ALICE)
    assert r.hits == [] and r.retryable and r.trace.warnings[-1].startswith("RET-5001:")


def test_expansion_failure_keeps_the_seeds(engine, monkeypatch):
    def broken(*args, **kwargs):
        raise ContextEngineError(ErrorCode.VECTOR_SEARCH_FAILED, "down", retryable=True)

    monkeypatch.setattr(engine.search_pipeline.searcher, "_explore", broken)
    r = engine.search_memory("Delete old container images disk pressure", ADMIN, score_threshold=0.0)
    assert r.hits and all(h.match_reason.startswith(("l0_vector", "l0_hybrid")) for h in r.hits)  # seeds only
    assert r.retryable
    assert any(w.startswith("RET-5001:") for w in r.trace.warnings)


def test_recheck_failure_keeps_candidates(engine, monkeypatch):
    before = fallbacks(engine, "RET-5002")

    def boom(*a, **k):
        raise RuntimeError("bug")

    monkeypatch.setattr(type(engine.search_pipeline.rechecker), "_reason", staticmethod(boom))
    r = engine.search_memory("disk", ALICE, score_threshold=0.0, planner_hints={"exclude_terms": ["disk"]})
    assert any(w.startswith("RET-5002:") for w in r.trace.warnings)
    assert any("disk" in h.uri for h in r.hits)  # the exclude term could not be applied
    assert fallbacks(engine, "RET-5002") == before + 1


def test_assembly_failure_returns_raw_seed_hits(engine, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("bug")

    monkeypatch.setattr(engine.search_pipeline.assembler, "assemble", boom)
    r = engine.search_memory("disk space", ALICE, score_threshold=0.0)
    assert r.hits == [] and r.seed_hits
    assert r.next_actions.recommended_read_l1_uris == [] and r.next_actions.recommended_read_l2_uris == []
    assert any(w.startswith("RET-5003:") for w in r.trace.warnings)
    assert not r.retryable


def test_planner_fallback_is_counted(engine):
    before = fallbacks(engine, "RET-4221")
    r = engine.search_memory("disk space", ALICE)
    assert len(r.typed_queries) == 3
    assert r.trace.warnings == [w for w in r.trace.warnings if w.startswith("RET-4221:")] and r.trace.warnings
    assert fallbacks(engine, "RET-4221") == before + 1


def test_threshold_strict_and_inclusive_through_the_pipeline(engine):
    filtered = sample(engine, "ce_retrieval_search_memory_threshold_filtered_total")
    base = engine.search_memory(
        SearchMemoryRequest(query="disk space", score_threshold=0.0, include_debug=True, trace_level="detailed"), ADMIN
    )
    protected = set(base.thinking_trace["stages"]["assemble"]["protected"])
    edge_hit = next(h for h in base.hits if h.uri not in protected)  # a threshold never drops a protected hit
    edge = edge_hit.score
    strict = engine.search_memory("disk space", ADMIN, score_threshold=edge)
    inclusive = engine.search_memory("disk space", ADMIN, score_threshold=edge, score_gte=True)
    assert edge_hit.uri not in [h.uri for h in strict.hits]
    assert edge_hit.uri in [h.uri for h in inclusive.hits]
    assert all(h.score > edge for h in strict.hits if h.uri not in protected)
    assert all(h.score >= edge for h in inclusive.hits if h.uri not in protected)
    assert sample(engine, "ce_retrieval_search_memory_threshold_filtered_total") > filtered


def test_results_are_merged_deduplicated_and_ranked(engine):
    r = engine.search_memory("prefers answers restart deployment disk", ALICE, top_k=50, score_threshold=0.0)
    uris = [h.uri for h in r.hits]
    assert len(uris) == len(set(uris))
    keys = [(-h.score, not h.has_overview, h.uri) for h in r.hits]
    assert keys == sorted(keys)
    assert len({s.uri for s in r.seed_hits}) == len(r.seed_hits)
    assert {"memory", "skill", "resource"} >= {tq.context_type for tq in r.typed_queries}


def test_top_k_caps_the_hits(engine):
    assert len(engine.search_memory("answers disk pods", ADMIN, top_k=2, score_threshold=0.0).hits) == 2


def test_owner_space_and_category_narrowing(engine):
    r = engine.search_memory("prefers answers", ADMIN, owner_space="user:bob", score_threshold=0.0)
    assert r.hits and {h.owner_space for h in r.hits} == {"user:bob"}
    r = engine.search_memory("prefers answers", ALICE, owner_space="user:bob", score_threshold=0.0)
    assert r.hits == []  # narrowing to an invisible space matches nothing
    r = engine.search_memory("Alice", ALICE, categories=["profile"], score_threshold=0.0)
    assert r.hits and {h.category for h in r.hits} == {"profile"}


def test_must_have_and_exclude_terms(engine):
    r = engine.search_memory("answers", ALICE, score_threshold=0.0, planner_hints={"must_have_terms": ["short"]})
    assert r.hits and all("short" in (h.abstract or "").lower() or "short" in h.uri for h in r.hits)
    r = engine.search_memory("answers", ADMIN, score_threshold=0.0, planner_hints={"exclude_terms": ["Bob"]})
    assert all("bob" not in (h.abstract or "").lower() for h in r.hits)


def test_thinking_trace_only_with_debug_and_detailed(engine):
    basic = engine.search_memory("disk", ALICE, include_debug=True)
    assert basic.thinking_trace is None
    assert engine.search_memory("disk", ALICE, trace_level="detailed").thinking_trace is None
    full = engine.search_memory(
        "disk", ALICE, include_debug=True, trace_level="detailed", planner_hints={"exclude_terms": ["pressure"]}
    )
    tt = full.thinking_trace
    assert set(tt["stages"]) == {"planner", "seed", "hierarchical", "recheck", "assemble"}
    assert len(tt["stages"]["planner"]["typed_queries"]) == 3
    assert {"uri", "vector", "hierarchy", "category", "target", "final"} <= set(tt["stages"]["assemble"]["scores"][0])
    drops = [e for e in tt["events"] if e["event"] == "drop" and e["stage"] == "recheck"]
    assert drops and all(e["exclude_reason"] == "excluded_term:pressure" for e in drops)
    assert full.trace.event_count == len(tt["events"]) >= basic.trace.event_count > 0


def test_trace_fields_and_request_ids(engine):
    names = [
        ("ce_retrieval_search_memory_requests_total", None),
        ("ce_retrieval_search_memory_duration_seconds_count", None),
        ("ce_retrieval_stage_duration_seconds_count", {"stage": "hierarchical"}),
        ("ce_retrieval_seed_hits_total", None),
        ("ce_retrieval_recheck_input_total", None),
        ("ce_retrieval_recheck_pass_total", None),
    ]
    before = [sample(engine, n, lbl) for n, lbl in names]
    a = engine.search_memory("disk", ALICE)
    b = engine.search_memory("disk", ALICE)
    assert a.request_id != b.request_id and len(a.request_id) == 32
    assert set(a.trace.model_dump()) == {
        "planner_ms",
        "seed_ms",
        "recheck_ms",
        "hierarchical_ms",
        "assemble_ms",
        "warnings",
        "event_count",
    }
    delta = [sample(engine, n, lbl) - b0 for (n, lbl), b0 in zip(names, before, strict=True)]
    assert delta[:3] == [2, 2, 2]
    assert delta[3] > 0 and delta[4] >= delta[5] > 0


def test_search_never_calls_the_read_service(engine, monkeypatch):
    def forbidden(*a, **k):
        raise AssertionError("search_memory must not read")

    for name in ("read", "read_batch", "relations"):
        monkeypatch.setattr(engine.reader, name, forbidden)
    r = engine.search_memory("disk prefers restart", ALICE, score_threshold=0.0)
    assert r.hits and all(h.level_hit == "L0" and h.overview is None and h.content_excerpt is None for h in r.hits)


def test_recheck_drops_are_counted_by_reason(engine):
    labels = {"reason": "excluded_term"}
    before = sample(engine, "ce_retrieval_recheck_drop_total", labels)
    engine.search_memory("answers", ADMIN, score_threshold=0.0, planner_hints={"exclude_terms": ["answers"]})
    assert sample(engine, "ce_retrieval_recheck_drop_total", labels) > before


def test_seed_hits_are_visible_deduplicated_and_exclude_dropped(engine):
    r = engine.search_memory("prefers answers", BOB, planner_hints={"exclude_terms": ["long"]}, score_threshold=0.0)
    assert all(s.owner_space in ("shared", "user:bob", "agent:other") for s in r.seed_hits)
    assert all("long" not in s.abstract.lower() for s in r.seed_hits)
    scores = [s.score for s in r.seed_hits]
    assert scores == sorted(scores, reverse=True)


# ---- planner faults fall back to the three-query plan (issue 27) -----------------------------------------------------
@pytest.mark.parametrize("fault", ["empty_plan", "key_error", "index_error"])
def test_a_planner_fault_falls_back_to_three_queries_with_ret_4221(engine, monkeypatch, fault):
    def broken(*args, **kwargs):
        if fault == "empty_plan":
            return []
        raise KeyError("intent") if fault == "key_error" else IndexError("list index out of range")

    before = fallbacks(engine, "RET-4221")
    monkeypatch.setattr(engine.search_pipeline.planner, "plan", broken)
    r = engine.search_memory("Delete old container images disk pressure", ALICE, score_threshold=0.0)
    assert [tq.context_type for tq in r.typed_queries] == ["memory", "skill", "resource"]
    assert all(tq.hints.intent == "fallback" and tq.filters.account_id == ALICE.account_id for tq in r.typed_queries)
    assert any(w.startswith("RET-4221:") and "planner" in w for w in r.trace.warnings)
    assert r.hits  # the search itself went on
    assert fallbacks(engine, "RET-4221") == before + 1
    compact = engine.search_memory_compact("Delete old container images disk pressure", ALICE, score_threshold=0.0)
    assert compact.hits


def test_a_planner_fault_keeps_the_target_type_and_request_errors_still_raise(engine, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(engine.search_pipeline.planner, "_decide", broken)
    r = engine.search_memory("disk", ALICE, target_uri="ctx://resources/ops/storage", score_threshold=0.0)
    assert [tq.context_type for tq in r.typed_queries] == ["resource"]
    assert r.typed_queries[0].target_uri == "ctx://resources/ops/storage/"
    assert any(w.startswith("RET-4221:") for w in r.trace.warnings)
    with pytest.raises(ContextEngineError) as exc:  # a caller's error is not a planner fault
        engine.search_memory("disk", ALICE, planner_hints={"intent": "all"})
    assert exc.value.code is ErrorCode.QUERY_INVALID


def test_a_clear_intent_walks_its_types_and_keeps_the_others_seeds(hash_engine):
    """A memory-intent query expands the memory typed query only; the resource typed query still answers with its
    seeds (the intent never excludes a type), and ``expand_other_types`` walks every typed query (issue 26)."""
    query = "remember the disk space fix"
    by_setting = {}
    for walk_all in (False, True):
        engine = hash_engine(retrieval={"hierarchy": {"expand_other_types": walk_all}})
        seed_small_store(engine)
        r = engine.search_memory(query, ALICE, include_debug=True, trace_level="detailed")
        assert [tq.context_type for tq in r.typed_queries] == ["memory", "skill", "resource"]
        assert {tq.hints.intent for tq in r.typed_queries} == {"memory"}
        events = [e for e in r.thinking_trace["events"] if e["stage"] == "hierarchical"]
        by_setting[walk_all] = (
            sorted(e["context_type"] for e in events if e["event"] == "not_walked"),
            [h.uri for h in r.hits],
        )
    assert by_setting[False][0] == ["resource", "skill"] and by_setting[True][0] == []
    assert by_setting[False][1][0] == "ctx://resources/ops/storage/disk-pressure.md"  # a seed of a skipped type
    fallback = hash_engine()
    seed_small_store(fallback)
    r = fallback.search_memory("disk space fix", ALICE, include_debug=True, trace_level="detailed")
    assert {tq.hints.intent for tq in r.typed_queries} == {"fallback"}
    assert not [e for e in r.thinking_trace["events"] if e["event"] == "not_walked"]
