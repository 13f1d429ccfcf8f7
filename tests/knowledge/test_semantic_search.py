"""The semantic layer's modes, auto fallback and filtered-then-unfiltered retry, with fake indexes."""

from __future__ import annotations

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.knowledge.semantic_search import VectorSearchService
from context_engine.schema.nodes import VectorFilter, VectorHit

FLT = VectorFilter(account_id="acme", levels=[2])
VEC = np.ones(4, dtype=np.float32) / 2


def hit(doc: str, score: float, idx: int = 0) -> VectorHit:
    return VectorHit(
        id=f"{doc}#{idx}",
        score=score,
        uri=doc,
        parent_uri=None,
        owner_space="shared",
        context_type="resource",
        category="",
        level=2,
        doc_id=doc,
        chunk_index=idx,
        text="t",
    )


class FakeIndex:
    def __init__(self, name, answer=None, fail=False):
        self.name = name
        self.answer = answer or (lambda flt: [])
        self.fail = fail
        self.calls: list[VectorFilter] = []

    def search(self, vector, top_k, flt):
        self.calls.append(flt)
        if self.fail:
            raise ContextEngineError(ErrorCode.VECTOR_SEARCH_FAILED, "lance exploded", retryable=True)
        return self.answer(flt)[:top_k]


def test_auto_uses_primary_when_it_works():
    primary = FakeIndex("lancedb", lambda f: [hit("a", 0.8)])
    exact = FakeIndex("exact", lambda f: [hit("b", 0.9)])
    res = VectorSearchService(primary, exact).search_similar_documents(VEC, FLT, top_k=5, min_similarity=0.3)
    assert [h.doc_id for h in res.hits] == ["a"] and res.backend == "lancedb"
    assert [a.reason for a in res.attempts] == ["initial"] and not exact.calls
    assert res.fallback_reason is None


def test_auto_falls_back_to_exact_and_says_why():
    primary = FakeIndex("lancedb", fail=True)
    exact = FakeIndex("exact", lambda f: [hit("b", 0.9)])
    res = VectorSearchService(primary, exact).search_similar_documents(VEC, FLT, top_k=5, min_similarity=0.3)
    assert [h.doc_id for h in res.hits] == ["b"] and res.backend == "exact"
    first, second = res.attempts
    assert (first.backend, first.ok, first.error_code) == ("lancedb", False, "RET-5001")
    assert "lance exploded" in first.error
    assert (second.backend, second.ok, second.reason) == ("exact", True, "primary_failed")
    assert res.fallback_reason.startswith("primary_failed: lancedb raised RET-5001")


def test_primary_and_fallback_modes_do_not_switch():
    primary = FakeIndex("lancedb", fail=True)
    exact = FakeIndex("exact", lambda f: [hit("b", 0.9)])
    svc = VectorSearchService(primary, exact)
    res = svc.search_similar_documents(VEC, FLT, top_k=5, min_similarity=0.3, mode="primary")
    assert res.failed and res.hits == [] and res.error_code == "RET-5001" and len(res.attempts) == 1
    res = svc.search_similar_documents(VEC, FLT, top_k=5, min_similarity=0.3, mode="fallback")
    assert [a.backend for a in res.attempts] == ["exact"] and res.hits
    assert len(primary.calls) == 1


def test_filtered_empty_result_is_retried_without_the_domain():
    def answer(flt):
        return [] if flt.doc_ids is not None else [hit("z", 0.7)]

    primary = FakeIndex("lancedb", answer)
    res = VectorSearchService(primary, primary).search_similar_documents(
        VEC, FLT, top_k=5, min_similarity=0.3, domain="storage", restriction=("doc_ids", ["x"])
    )
    assert [a.reason for a in res.attempts] == ["initial", "filtered_unusable"]
    assert res.attempts[0].domain_filter == "storage" and res.attempts[0].filter_kind == "doc_ids"
    assert res.attempts[1].domain_filter is None and res.attempts[1].filter_kind == "none"
    assert primary.calls[0].doc_ids == ["x"] and primary.calls[1].doc_ids is None
    assert primary.calls[1].account_id == "acme" and primary.calls[1].levels == [2]  # tenancy never dropped
    assert [h.doc_id for h in res.hits] == ["z"] and not res.domain_filter_used
    assert "no hits" in res.fallback_reason


def test_filtered_result_below_threshold_is_retried_once():
    def answer(flt):
        return [hit("low", 0.2)] if flt.parent_uris is not None else [hit("low", 0.2), hit("other", 0.25)]

    primary = FakeIndex("lancedb", answer)
    res = VectorSearchService(primary, primary).search_similar_documents(
        VEC, FLT, top_k=5, min_similarity=0.3, domain="etcd", restriction=("parent_uris", ["ctx://resources/e/"])
    )
    assert len(res.attempts) == 2  # one retry, even though the retry is unusable too
    assert "best 0.200 < 0.300" in res.fallback_reason
    assert [h.doc_id for h in res.hits] == ["low", "other"]


def test_usable_filtered_result_is_kept():
    primary = FakeIndex("lancedb", lambda f: [hit("k", 0.6)])
    res = VectorSearchService(primary, primary).search_similar_documents(
        VEC, FLT, top_k=5, min_similarity=0.3, domain="kubernetes", restriction=("parent_uris", ["ctx://resources/k/"])
    )
    assert len(res.attempts) == 1 and res.domain_filter_used
    assert primary.calls[0].parent_uris == ["ctx://resources/k/"]


def test_after_a_primary_failure_the_retry_goes_straight_to_exact():
    primary = FakeIndex("lancedb", fail=True)
    exact = FakeIndex("exact", lambda f: [] if f.doc_ids is not None else [hit("z", 0.7)])
    res = VectorSearchService(primary, exact).search_similar_documents(
        VEC, FLT, top_k=5, min_similarity=0.3, domain="storage", restriction=("doc_ids", [])
    )
    assert [(a.backend, a.reason) for a in res.attempts] == [
        ("lancedb", "initial"),
        ("exact", "primary_failed"),
        ("exact", "filtered_unusable"),
    ]
    assert len(primary.calls) == 1 and [h.doc_id for h in res.hits] == ["z"]
