"""HierarchicalSearcher: breadth-first expansion from roots and seed parents, depth and children caps, time budget,
hierarchy_score definition and range (DESIGN §5)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_engine.errors import ErrorCode
from context_engine.observability.trace import TraceRecorder
from context_engine.retrieval.hierarchical_searcher import HierarchicalSearcher, ancestor_uris
from context_engine.retrieval.run import RequestNodes, SearchRun
from context_engine.retrieval.scoring import Scorer
from context_engine.schema.context import RequestContext
from context_engine.schema.hits import SeedHit
from context_engine.schema.nodes import NodeRecord
from context_engine.schema.query import QueryHints, TypedQuery
from context_engine.settings import HierarchySettings, ScoringSettings
from context_engine.storage.vector.scoring import L0Match

CTX = RequestContext(account_id="acme", role="user", user_space="alice")

TREE = {  # uri -> similarity; every node is a resource in the shared space
    "ctx://resources/": 0.2,
    "ctx://resources/ops/": 0.8,
    "ctx://resources/ops/disk.md": 0.9,
    "ctx://resources/ops/cpu.md": 0.3,
    "ctx://resources/ops/deep/": 0.6,
    "ctx://resources/ops/deep/a.md": 0.5,
    "ctx://resources/ops/deep/deeper/": 0.4,
    "ctx://resources/ops/deep/deeper/b.md": 0.95,
    "ctx://resources/hr/": -0.1,
    "ctx://resources/hr/leave.md": 0.1,
}


def parent_of(uri: str) -> str | None:
    anc = ancestor_uris(uri, 1)
    return anc[0] if anc else None


class FakeScorer:
    name = "fake"

    def __init__(self, sims: dict[str, float], delay_s: float = 0.0):
        self.sims = sims
        self.delay_s = delay_s
        self.children_calls: list[list[str]] = []

    def _match(self, uri: str) -> L0Match:
        return L0Match(uri, parent_of(uri), "shared", "resource", "", f"text {uri}", self.sims[uri])

    def top(self, flt, k):
        ms = sorted((self._match(u) for u in self.sims), key=lambda m: (-m.similarity, m.uri))
        return ms[:k]

    def children(self, flt, parents, per_parent):
        time.sleep(self.delay_s)
        self.children_calls.append(list(parents))
        out = {}
        for p in parents:
            kids = sorted(
                (
                    self._match(u)
                    for u in self.sims
                    if parent_of(u) == p and (not flt.uri_prefix or u.startswith(flt.uri_prefix))
                ),
                key=lambda m: (-m.similarity, m.uri),
            )
            if kids:
                out[p] = kids[:per_parent]
        return out

    def lookup(self, flt, uris):
        return {u: self.sims[u] for u in uris if u in self.sims}


class FakeMetadata:
    def __init__(self, uris, pending=()):
        self.rows = {
            u: NodeRecord(
                account_id="acme",
                uri=u,
                parent_uri=parent_of(u),
                owner_space="shared",
                context_type="resource",
                is_dir=u.endswith("/"),
                has_overview=True,
                has_content=not u.endswith("/"),
                index_status="pending" if u in pending else "indexed",
            )
            for u in uris
        }

    def get_nodes(self, account_id, uris):
        return {u: self.rows[u] for u in uris if u in self.rows}

    get_node_heads = get_nodes  # a NodeRecord has every field of a NodeHead


def make_run(sims=TREE, pending=(), delay_s=0.0, detailed=True):
    nodes = RequestNodes(FakeMetadata(sims, pending), "acme")
    return SearchRun(FakeScorer(sims, delay_s), nodes, TraceRecorder(detailed=detailed))


def seed(run: SearchRun, uri: str) -> SeedHit:
    run.nodes.fetch([uri])
    return SeedHit(
        uri=uri,
        score=TREE[uri],
        category="",
        owner_space="shared",
        abstract="a",
        has_overview=True,
        has_content=True,
        match_reason="l0_vector",
    )


def searcher(**kw) -> HierarchicalSearcher:
    return HierarchicalSearcher(HierarchySettings(**kw), Scorer(ScoringSettings()))


TQ = TypedQuery(text="q", context_type="resource", top_k=10)


def test_hierarchy_score_is_the_decayed_mean_of_ancestor_scores():
    run = make_run()
    hits = searcher(ancestor_levels=2, ancestor_decay=0.5).expand(
        TQ, [seed(run, "ctx://resources/ops/deep/a.md")], CTX, run=run
    )
    by_uri = {h.uri: h for h in hits}
    # a.md: parent deep/ 0.6, grandparent ops/ 0.8 -> (1*0.6 + 0.5*0.8) / 1.5
    assert by_uri["ctx://resources/ops/deep/a.md"].hierarchy_score == pytest.approx((0.6 + 0.4) / 1.5, abs=1e-6)
    # disk.md: parent ops/ 0.8, grandparent resources/ 0.2
    assert by_uri["ctx://resources/ops/disk.md"].hierarchy_score == pytest.approx((0.8 + 0.1) / 1.5, abs=1e-6)
    # hr/: parent resources/ 0.2 only (ctx:// is no node)
    assert by_uri["ctx://resources/hr/"].hierarchy_score == pytest.approx(0.2, abs=1e-6)
    # negative similarity counts as 0: leave.md's parent hr/ has -0.1
    assert by_uri["ctx://resources/hr/leave.md"].hierarchy_score == pytest.approx((0.0 + 0.5 * 0.2) / 1.5, abs=1e-6)


def test_expansion_starts_from_root_and_seed_parent_and_respects_depth():
    run = make_run()
    hits = searcher(max_depth=2).expand(TQ, [seed(run, "ctx://resources/ops/deep/a.md")], CTX, run=run)
    first = run.scorer.children_calls[0]
    assert first == ["ctx://resources/", "ctx://resources/ops/deep/"]  # root first, then the seed's parent
    assert len(run.scorer.children_calls) == 2  # depth 2
    uris = {h.uri for h in hits}
    assert "ctx://resources/ops/deep/deeper/" in uris  # child of the seed's parent (depth 1)
    assert "ctx://resources/ops/disk.md" in uris  # reached from the root at depth 2
    assert "ctx://resources/ops/deep/deeper/b.md" in uris  # deeper/ expanded at depth 2
    seeds = [h for h in hits if h.source == "seed"]
    assert [h.uri for h in seeds] == ["ctx://resources/ops/deep/a.md"]
    assert all(h.depth <= 2 for h in hits)

    run = make_run()
    hits = searcher(max_depth=1).expand(TQ, [seed(run, "ctx://resources/ops/deep/a.md")], CTX, run=run)
    assert len(run.scorer.children_calls) == 1
    assert "ctx://resources/ops/disk.md" not in {h.uri for h in hits}

    run = make_run()
    hits = searcher(max_depth=0).expand(TQ, [seed(run, "ctx://resources/ops/deep/a.md")], CTX, run=run)
    assert [h.uri for h in hits] == ["ctx://resources/ops/deep/a.md"] and run.scorer.children_calls == []


def test_only_the_preferred_types_are_walked_and_the_others_keep_their_seeds():
    """A plan whose intent prefers memories (the planner's label on every typed query) walks the memory typed query
    only; the resource typed query keeps its seed, scored with its ancestors exactly as when walked (issue 26)."""
    intent = QueryHints(intent="memory")
    memory = TypedQuery(text="q", context_type="memory", top_k=10, hints=intent)
    resource = TypedQuery(text="q", context_type="resource", top_k=10, hints=intent)
    a_md = "ctx://resources/ops/deep/a.md"

    run = make_run()
    hits = searcher().expand_all([memory, resource], [[], [seed(run, a_md)]], CTX, run=run)
    assert [h.uri for h in hits[1]] == [a_md]  # the seed, none of its siblings
    assert hits[1][0].source == "seed"
    assert hits[1][0].hierarchy_score == pytest.approx((0.6 + 0.4) / 1.5, abs=1e-6)
    walked = {u for call in run.scorer.children_calls for u in call}
    assert not any(u.startswith("ctx://resources/") for u in walked)
    events = [e for e in run.trace.events if e["event"] == "not_walked"]
    assert events == [
        {"stage": "hierarchical", "event": "not_walked", "context_type": "resource", "reason": "not_preferred"}
    ]

    for walk_all, label in ((True, "memory"), (False, "fallback"), (False, "memory+resource")):
        hints = QueryHints(intent=label)
        plan = [tq.model_copy(update={"hints": hints}) for tq in (memory, resource)]
        run = make_run()
        hits = searcher(expand_other_types=walk_all).expand_all(plan, [[], [seed(run, a_md)]], CTX, run=run)
        uris = {h.uri for h in hits[1]}
        assert a_md in uris and "ctx://resources/ops/deep/deeper/" in uris, label  # walked from the seed's parent
        assert not [e for e in run.trace.events if e["event"] == "not_walked"]


def test_children_cap_and_beam():
    run = make_run()
    hits = searcher(children_per_dir=1, dirs_per_level=1).expand(TQ, [], CTX, run=run)
    # root's best child is ops/ (0.8); then only ops/'s best child disk.md (0.9)
    assert {h.uri for h in hits} == {"ctx://resources/ops/", "ctx://resources/ops/disk.md"}


def test_expansion_hits_are_hydrated_and_pending_ones_dropped():
    run = make_run(pending={"ctx://resources/ops/disk.md"})
    hits = searcher().expand(TQ, [], CTX, run=run)
    assert "ctx://resources/ops/disk.md" not in {h.uri for h in hits}
    drops = [e for e in run.trace.events if e["event"] == "drop"]
    assert {
        "stage": "hierarchical",
        "event": "drop",
        "uri": "ctx://resources/ops/disk.md",
        "exclude_reason": "pending",
    } in drops
    assert all(h.source == "expansion" and h.match_reason.startswith("child_of:") for h in hits)


def test_time_budget_truncates_deeper_levels_with_a_warning():
    run = make_run(delay_s=0.02)
    searcher(max_depth=3, budget_ms=5).expand(TQ, [], CTX, run=run)
    assert len(run.scorer.children_calls) == 1
    assert run.trace.codes == [ErrorCode.EXPANSION_TRUNCATED]
    assert run.trace.warnings[0].startswith("RET-5004:")


def test_target_limits_the_roots():
    run = make_run()
    tq = TQ.model_copy(update={"target_uri": "ctx://resources/ops/deep/"})
    hits = searcher().expand(tq, [], CTX, run=run)
    assert run.scorer.children_calls[0] == ["ctx://resources/ops/deep/"]
    assert all(h.uri.startswith("ctx://resources/ops/deep/") for h in hits)


def test_score_children_of_one_directory():
    run = make_run()
    hits = searcher(children_per_dir=2).score_children("ctx://resources/ops/", TQ, CTX, run=run)
    assert [h.uri for h in hits] == ["ctx://resources/ops/disk.md", "ctx://resources/ops/deep/"]
    assert all(h.depth == 1 and h.source == "expansion" for h in hits)


@given(
    sims=st.lists(st.floats(-1, 1, allow_nan=False), min_size=len(TREE), max_size=len(TREE)),
    decay=st.floats(0.05, 1.0),
    levels=st.integers(1, 4),
)
@settings(max_examples=100, derandomize=True, deadline=None)
def test_hierarchy_score_in_unit_interval(sims, decay, levels):
    tree = dict(zip(TREE, sims, strict=True))
    run = make_run(tree, detailed=False)
    hits = searcher(ancestor_levels=levels, ancestor_decay=decay).expand(TQ, [], CTX, run=run)
    assert hits
    for h in hits:
        assert 0.0 <= h.hierarchy_score <= 1.0
        assert 0.0 <= h.vector_score <= 1.0
