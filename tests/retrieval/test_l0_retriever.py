"""L0Retriever: level=0 only, tenancy filter from the context, hydration drops, no content access (seed 000 §10)."""

from __future__ import annotations

import pytest

from context_engine.observability.trace import TraceRecorder
from context_engine.retrieval.run import RequestNodes, SearchRun
from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import Level, VectorFilter
from context_engine.schema.query import QueryFilters, TypedQuery
from tests.retrieval.conftest import ADMIN, ALICE, BOB, CountingContent, seed_small_store


class RecordingScorer:
    """Delegates to a real scorer and records every filter it is asked about."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.filters: list[VectorFilter] = []

    def top(self, flt, k):
        self.filters.append(flt)
        return self.inner.top(flt, k)

    def children(self, flt, parents, per_parent):
        self.filters.append(flt)
        return self.inner.children(flt, parents, per_parent)

    def lookup(self, flt, uris):
        self.filters.append(flt)
        return self.inner.lookup(flt, uris)


def run_for(engine, ctx, text, trace=None):
    vector = engine.embedder.embed_query(text)
    scorer = RecordingScorer(engine.l0_source.scorer(ctx.account_id, vector))
    return SearchRun(scorer, RequestNodes(engine.metadata, ctx.account_id), trace or TraceRecorder(detailed=True))


@pytest.fixture(params=["index", "memory"])
def engine(request, hash_engine):
    # the dense first round (hybrid has its own tests below)
    e = hash_engine(retrieval={"l0_source": request.param, "seed": {"hybrid": False}})
    counting = CountingContent(e.content)
    seed_small_store(e)
    e.counting_content = counting
    e.reader._content = counting  # only to prove nothing reads; the retriever has no content store at all
    return e


def test_filter_is_level_zero_and_built_from_the_context(engine):
    tq = TypedQuery(text="prefers answers", context_type="memory", filters=QueryFilters(account_id="someone-else"))
    run = run_for(engine, ALICE, tq.text)
    seeds = engine.search_pipeline.retriever.search(tq, ALICE, run=run)
    (flt,) = run.scorer.filters
    assert flt.levels == [0]
    assert flt.account_id == "default"  # never the typed query's filters.account_id
    assert flt.owner_spaces == ["shared", "user:alice", "agent:helper"]
    assert flt.context_types == ["memory"]
    assert any(s.uri.startswith("ctx://user/alice/memories/preference/alice-prefers") for s in seeds)
    assert all(s.owner_space in ("shared", "user:alice", "agent:helper") for s in seeds)
    assert all(s.match_reason == "l0_vector" for s in seeds)


def test_seed_abstract_is_the_level_zero_text_never_a_chunk(engine):
    # 'Delete old container images.' is only in the L2 content (a level-2 chunk), not in the abstract.
    tq = TypedQuery(text="Delete old container images", context_type="resource", top_k=10)
    seeds = engine.search_pipeline.retriever.search(tq, ADMIN, run=run_for(engine, ADMIN, tq.text))
    assert seeds
    for s in seeds:
        assert s.abstract == engine.content.read_level("default", s.uri, Level.L0)
        assert "Delete old container images" not in s.abstract


def test_invisible_and_pending_nodes_are_dropped_with_reasons(engine):
    bob_pref = next(
        n.uri
        for n in engine.metadata.list_all_nodes("default")
        if n.uri.startswith("ctx://user/bob/memories/preference/b")
    )
    # Bob's memory is filtered out for Alice by the pre-filter; an admin sees it until it goes pending.
    tq = TypedQuery(text="Bob prefers long detailed answers", context_type="memory")
    assert bob_pref not in [
        s.uri for s in engine.search_pipeline.retriever.search(tq, ALICE, run=run_for(engine, ALICE, tq.text))
    ]
    assert bob_pref in [
        s.uri for s in engine.search_pipeline.retriever.search(tq, ADMIN, run=run_for(engine, ADMIN, tq.text))
    ]
    engine.metadata.set_index_status("default", [bob_pref], "pending")
    trace = TraceRecorder(detailed=True)
    seeds = engine.search_pipeline.retriever.search(tq, ADMIN, run=run_for(engine, ADMIN, tq.text, trace))
    assert bob_pref not in [s.uri for s in seeds]
    assert {"stage": "seed", "event": "drop", "uri": bob_pref, "exclude_reason": "pending"} in trace.events


def test_owner_space_narrowing_and_foreign_account(engine):
    tq = TypedQuery(text="prefers answers", context_type="memory", filters=QueryFilters(owner_space="user:bob"))
    assert engine.search_pipeline.retriever.search(tq, ALICE, run=run_for(engine, ALICE, tq.text)) == []
    stranger = RequestContext(account_id="other", role="admin")
    tq = TypedQuery(text="prefers answers", context_type="memory")
    assert engine.search_pipeline.retriever.search(tq, stranger, run=run_for(engine, stranger, tq.text)) == []


def test_retriever_never_touches_content(engine):
    engine.counting_content.reads.clear()
    engine.search_memory("prefers answers disk images certificate", BOB, top_k=10)
    assert engine.counting_content.reads == []


def test_search_without_a_prepared_run_embeds_the_query(engine):
    tq = TypedQuery(text="restart deployment pods", context_type="skill", top_k=1)
    (seed,) = engine.search_pipeline.retriever.search(tq, ALICE)
    assert seed.uri == "ctx://agent/helper/skills/restart-deployment.md"


# ---- hybrid first round (retrieval.seed.hybrid) ---------------------------------------------------------------------
@pytest.fixture(params=["index", "memory"])
def hybrid_engine(request, hash_engine):
    # fusion_depth=1: each list contributes its best row only, so BM25's top record (weight 0.6) must lead.
    e = hash_engine(
        retrieval={"l0_source": request.param, "seed": {"hybrid": True}},
        keyword={"fusion_depth": 1, "fusion": "weighted"},
    )
    seed_small_store(e)
    return e


@pytest.mark.parametrize("text", ["renew the TLS certificate", "container images on the node", "restarting pod logs"])
def test_hybrid_seeds_follow_the_fusion_and_keep_their_cosine(hybrid_engine, text):
    tq = TypedQuery(context_type="resource", text=text, top_k=1)
    run = run_for(hybrid_engine, ADMIN, text)
    seeds = hybrid_engine.search_pipeline.retriever.search(tq, ADMIN, run=run)
    flt = VectorFilter(account_id="default", levels=[0], context_types=["resource"], owner_spaces=None)
    best_bm25 = hybrid_engine.keyword_index.search(text, 1, flt)[0]
    assert [s.uri for s in seeds] == [best_bm25.uri]
    assert seeds[0].match_reason == "l0_hybrid"
    # the seed's score is still the cosine similarity of its abstract, not the fused score
    assert seeds[0].score == pytest.approx(run.scorer.inner.lookup(flt, [best_bm25.uri])[best_bm25.uri], abs=1e-6)


def test_hybrid_seeds_stay_inside_the_callers_spaces(hybrid_engine):
    # Bob's memory matches every word of the query, but Alice cannot see Bob's space.
    tq = TypedQuery(context_type="memory", text="Bob prefers long detailed answers", top_k=3)
    seeds = hybrid_engine.search_pipeline.retriever.search(tq, ALICE, run=run_for(hybrid_engine, ALICE, tq.text))
    assert seeds and all("/alice/" in s.uri for s in seeds)


def test_convex_hybrid_orders_seeds_by_calibrated_similarity_plus_coverage(hash_engine):
    e = hash_engine(retrieval={"seed": {"hybrid": True}}, keyword={"fusion": "convex", "dense_weight": 0.5})
    seed_small_store(e)
    text = "renew the TLS certificate"
    tq = TypedQuery(context_type="resource", text=text, top_k=5)
    run = run_for(e, ADMIN, text)
    seeds = e.search_pipeline.retriever.search(tq, ADMIN, run=run)
    flt = VectorFilter(account_id="default", levels=[0], context_types=["resource"])
    coverage = {h.uri: h.coverage for h in e.keyword_index.search(text, 100, flt)}
    fused = {s.uri: 0.5 * min(1.0, max(0.0, s.score)) + 0.5 * coverage.get(s.uri, 0.0) for s in seeds}
    assert [s.uri for s in seeds] == sorted(fused, key=lambda u: (-round(fused[u], 9), u))
    assert seeds[0].uri.endswith("certificate-expiry.md")
