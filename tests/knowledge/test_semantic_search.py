"""The semantic layer's modes, auto fallback and filtered-then-unfiltered retry, with fake indexes."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.knowledge.semantic_search import VectorSearchService
from context_engine.schema.nodes import VectorFilter, VectorHit
from context_engine.schema.similarity import SimilarityScale
from context_engine.settings import KeywordSettings
from context_engine.storage.keyword.bm25_index import BM25Index, KeywordDoc
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from tests.knowledge.conftest import chunk

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


# ---- hybrid (knowledge.hybrid) and the calibrated scale -------------------------------------------------------------


def kdoc(doc: str, text: str, account: str = "acme", idx: int = 0) -> KeywordDoc:
    return KeywordDoc(id=f"{doc}#{idx}", text=text, account_id=account, uri=doc, level=2, doc_id=doc, chunk_index=idx)


def bm25(*docs: KeywordDoc) -> BM25Index:
    index = BM25Index(KeywordSettings())
    index.upsert(docs)
    return index


def test_weighted_hybrid_fuses_bm25_and_scores_a_bm25_only_chunk_by_its_stored_vector(tmp_path):
    # dense: a (0.8) > b (0.5); BM25: c (all query words) > b (one word); c is unknown to the dense side.
    meta = SqlMetadataStore.sqlite(tmp_path / "m.db")
    c_rec = chunk("ctx://resources/ops/c.md", 0, "disk quota exceeded on node", "c")
    meta.put_vectors([c_rec])
    c_uri = c_rec.uri
    primary = FakeIndex("lancedb", lambda f: [hit("a", 0.8), hit("b", 0.5)])
    keyword = bm25(
        kdoc("a", "network latency"),
        kdoc("b", "disk is slow"),
        KeywordDoc(id=c_rec.id, text=c_rec.text, account_id="acme", uri=c_uri, level=2, doc_id=c_uri),
    )
    service = VectorSearchService(
        primary,
        primary,
        keyword=keyword,
        keyword_settings=KeywordSettings(fusion="weighted", dense_weight=0.4),
        metadata=meta,
    )
    res = service.search_similar_documents(VEC, FLT, top_k=5, min_similarity=0.3, query="disk quota exceeded")
    # min-max per list: dense a=1 b=0; BM25 c=1 b=0 -> fused c=0.6, a=0.4, b=0
    assert [h.doc_id for h in res.hits] == [c_uri, "a", "b"]
    assert res.fusion == {c_rec.id: 0.6, "a#0": 0.4, "b#0": 0.0}
    # c's similarity is the cosine of the query vector and its stored vector (e0 . [0.5]*4 = 0.5)
    assert res.hits[0].score == 0.5
    assert res.keyword_hits == 2 and set(res.bm25) == {c_rec.id, "b#0"}
    meta.close()


def test_bm25_runs_beside_the_dense_search_and_fuses_the_same():
    """BM25 for the first attempt's filter runs on a worker thread while the dense search runs: a dense search that
    waits for BM25 to have started finishes (it would wait forever with BM25 after it); the fusion is the one BM25
    searched in line gives, and a retry under another filter searches BM25 again, under that filter."""
    started = threading.Event()

    class Recording:
        def __init__(self, index: BM25Index) -> None:
            self.index, self.threads, self.filters = index, [], []

        def search(self, query, top_k, flt):
            self.threads.append(threading.current_thread().name)
            self.filters.append(flt)
            started.set()
            return self.index.search(query, top_k, flt)

    def dense(flt):
        assert started.wait(10), "BM25 did not start before the dense search ended"
        return [hit("a", 0.8), hit("b", 0.5)]

    docs = (kdoc("a", "network latency"), kdoc("b", "disk is slow"), kdoc("c", "disk quota exceeded"))
    keyword = Recording(bm25(*docs))
    ks = KeywordSettings(fusion="weighted", dense_weight=0.4)
    service = VectorSearchService(FakeIndex("lancedb", dense), FakeIndex("exact"), keyword=keyword, keyword_settings=ks)
    res = service.search_similar_documents(VEC, FLT, top_k=5, min_similarity=0.3, query="disk is slow")
    assert keyword.threads[0].startswith("ce-bm25")

    inline = VectorSearchService(
        FakeIndex("lancedb", lambda f: [hit("a", 0.8), hit("b", 0.5)]), FakeIndex("exact"), keyword=bm25(*docs),
        keyword_settings=ks,
    )
    same = inline.search_similar_documents(VEC, FLT, top_k=5, min_similarity=0.3, query="disk is slow")
    assert [h.id for h in res.hits] == [h.id for h in same.hits] == ["b#0", "a#0"]
    assert res.fusion == same.fusion == {"b#0": 0.6, "a#0": 0.4}  # c: BM25 only, with no stored vector to score
    assert res.bm25 == same.bm25 and set(res.bm25) == {"b#0", "c#0"} and res.bm25_docs == same.bm25_docs
    assert res.keyword_hits == same.keyword_hits == 2

    # the domain filter's result is unusable: the unfiltered retry fuses with BM25 under the unfiltered filter
    keyword.filters.clear()

    def by_filter(flt):
        return [] if flt.doc_ids else [hit("a", 0.8), hit("b", 0.5)]

    primary = FakeIndex("lancedb", by_filter)
    service = VectorSearchService(primary, FakeIndex("exact"), keyword=keyword, keyword_settings=ks)
    res = service.search_similar_documents(
        VEC, FLT, top_k=5, min_similarity=0.3, query="disk is slow", domain="storage", restriction=("doc_ids", ["c"])
    )
    assert [f.doc_ids for f in keyword.filters] == [["c"], None]
    assert [h.id for h in res.hits] == ["b#0", "a#0"] and res.bm25 == same.bm25
    service.close()


def test_hybrid_never_crosses_the_tenant_filter():
    primary = FakeIndex("lancedb", lambda f: [hit("a", 0.8)])
    keyword = bm25(kdoc("a", "pod restarts"), kdoc("theirs", "disk quota exceeded", account="other"))
    service = VectorSearchService(primary, primary, keyword=keyword)
    res = service.search_similar_documents(VEC, FLT, top_k=5, min_similarity=0.3, query="disk quota exceeded")
    assert [h.doc_id for h in res.hits] == ["a"] and res.keyword_hits == 0


def test_hybrid_degrades_to_dense_when_bm25_fails():
    class Broken:
        def search(self, query, top_k, flt):
            raise ContextEngineError(ErrorCode.VECTOR_SEARCH_FAILED, "bm25 exploded", retryable=True)

    primary = FakeIndex("lancedb", lambda f: [hit("a", 0.8), hit("b", 0.5)])
    res = VectorSearchService(primary, primary, keyword=Broken()).search_similar_documents(
        VEC, FLT, top_k=5, min_similarity=0.3, query="anything"
    )
    assert [h.doc_id for h in res.hits] == ["a", "b"] and res.fusion is None
    assert res.warnings and res.warnings[0].startswith("RET-5001")


def test_hybrid_off_without_a_query_text():
    primary = FakeIndex("lancedb", lambda f: [hit("a", 0.8)])
    keyword = bm25(kdoc("b", "disk quota exceeded"))
    res = VectorSearchService(primary, primary, keyword=keyword).search_similar_documents(
        VEC, FLT, top_k=5, min_similarity=0.3
    )
    assert [h.doc_id for h in res.hits] == ["a"] and res.fusion is None


def test_usable_is_judged_on_the_calibrated_scale():
    # cosine 0.7 on a scale (0.5, 1.0) is 0.4: below 0.45, so the domain-filtered result is retried unfiltered.
    primary = FakeIndex("lancedb", lambda f: [hit("a", 0.7)])
    service = VectorSearchService(primary, primary, scale=SimilarityScale(0.5, 1.0))
    res = service.search_similar_documents(
        VEC, FLT, top_k=5, min_similarity=0.45, domain="k8s", restriction=("doc_ids", ["a"])
    )
    assert [a.reason for a in res.attempts] == ["initial", "filtered_unusable"]
    assert "best 0.400 < 0.450" in (res.fallback_reason or "")


def test_convex_hybrid_sums_calibrated_similarity_and_bm25_coverage(tmp_path):
    # Both sides absolute: a chunk BM25 matches on one incidental word stays weak (min-max would lift it to 1).
    meta = SqlMetadataStore.sqlite(tmp_path / "m.db")
    c_rec = chunk("ctx://resources/ops/c.md", 0, "disk quota exceeded on node", "c")
    meta.put_vectors([c_rec])
    primary = FakeIndex("lancedb", lambda f: [hit("a", 0.8), hit("b", 0.5)])
    keyword = bm25(
        kdoc("a", "network latency"),
        kdoc("b", "the pod"),
        KeywordDoc(id=c_rec.id, text=c_rec.text, account_id="acme", uri=c_rec.uri, level=2, doc_id=c_rec.uri),
    )
    scale = SimilarityScale(0.2, 1.0)
    ks = KeywordSettings(fusion="convex", dense_weight=0.5)
    service = VectorSearchService(primary, primary, scale=scale, keyword=keyword, keyword_settings=ks, metadata=meta)
    query = "disk quota exceeded pod"
    res = service.search_similar_documents(VEC, FLT, top_k=5, min_similarity=0.3, query=query)
    cov = {h.id: h.coverage for h in keyword.search(query, 10, FLT)}
    assert 0 < cov["b#0"] < cov[c_rec.id] < 1
    expected = {
        "a#0": 0.5 * scale(0.8),
        "b#0": 0.5 * scale(0.5) + 0.5 * cov["b#0"],
        c_rec.id: 0.5 * scale(0.5) + 0.5 * cov[c_rec.id],  # c's cosine from its stored vector: 0.5
    }
    assert res.fusion == pytest.approx(expected)
    assert [h.id for h in res.hits] == sorted(expected, key=lambda i: -expected[i])
    meta.close()
