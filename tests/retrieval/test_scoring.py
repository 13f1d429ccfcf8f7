"""Scoring (seed 000 §6): normalised components, weights, dedup tie-breaks, thresholds > and >=, and the merge:
intent boost, no threshold at the defaults, protected hits, expansion hits that must earn their place, and directories
ranked after memories for a memory-intent query."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_engine.retrieval.scoring import (
    Scorer,
    below_memory_files,
    dedupe_by_uri,
    is_memory_intent,
    names_node,
    passes_threshold,
    select_top,
    vector_score,
)
from context_engine.schema.hits import NodeHit
from context_engine.schema.query import TypedQuery
from context_engine.settings import ScoringSettings


def hit(uri: str, **kw) -> NodeHit:
    base = {"owner_space": "shared", "context_type": "resource"}
    base.update(kw)
    return NodeHit(uri=uri, **base)


def test_vector_score_clips_cosine_to_unit_interval():
    assert vector_score(-0.4) == 0.0
    assert vector_score(0.37) == pytest.approx(0.37)
    assert vector_score(1.0000001) == 1.0


def test_vector_score_uses_the_models_scale():
    from context_engine.schema.similarity import SimilarityScale

    scale = SimilarityScale(0.7, 0.9)
    assert vector_score(0.8, scale) == pytest.approx(0.5)
    assert vector_score(0.65, scale) == 0.0 and vector_score(0.95, scale) == 1.0
    assert Scorer(ScoringSettings(), scale).vector_score(0.8) == pytest.approx(0.5)


def test_default_weights_and_final_formula():
    s = Scorer(ScoringSettings())
    assert s.final(1, 1, 1, 1) == 1.0
    assert s.final(0, 0, 0, 0) == 0.0
    assert s.final(0.5, 0.25, 1.0, 0.0) == pytest.approx(0.65 * 0.5 + 0.20 * 0.25 + 0.10 * 1.0)


def test_weights_are_configurable_and_normalised():
    s = Scorer(ScoringSettings(weight_vector=1.0, weight_hierarchy=1.0, weight_category=0.0, weight_target=0.0))
    assert s.final(0.8, 0.4, 1.0, 1.0) == pytest.approx(0.6)
    with pytest.raises(ValueError):
        ScoringSettings(weight_vector=0, weight_hierarchy=0, weight_category=0, weight_target=0)


@given(
    v=st.floats(0, 1),
    h=st.floats(0, 1),
    c=st.sampled_from([0.0, 1.0]),
    t=st.sampled_from([0.0, 1.0]),
    w=st.tuples(*[st.floats(0, 1)] * 4).filter(lambda w: sum(w) > 1e-6),
)
@settings(max_examples=200, derandomize=True)
def test_final_score_stays_in_unit_interval(v, h, c, t, w):
    s = Scorer(ScoringSettings(weight_vector=w[0], weight_hierarchy=w[1], weight_category=w[2], weight_target=w[3]))
    assert 0.0 <= s.final(v, h, c, t) <= 1.0


def test_category_boost_from_categories_query_words_and_synonyms():
    scorer = Scorer(ScoringSettings())
    hits = [
        hit("ctx://user/a/memories/preference/x.md", category="preference", vector_score=0.5),
        hit("ctx://user/a/memories/profile/y.md", category="profile", vector_score=0.5),
        hit("ctx://user/a/memories/z.md", category="", vector_score=0.5),
    ]
    tq = TypedQuery(text="我有什么偏好", context_type="memory")
    out = {h.uri: h for h in scorer.score(tq, hits)}
    assert out["ctx://user/a/memories/preference/x.md"].category_boost == 1.0  # synonym 偏好
    assert out["ctx://user/a/memories/profile/y.md"].category_boost == 0.0
    assert out["ctx://user/a/memories/z.md"].category_boost == 0.0
    tq = TypedQuery(text="anything", context_type="memory", categories=["profile"])
    out = {h.uri: h for h in scorer.score(tq, hits)}
    assert out["ctx://user/a/memories/profile/y.md"].category_boost == 1.0
    tq = TypedQuery(text="the kubernetes runbooks", context_type="resource")
    (k8s,) = scorer.score(tq, [hit("ctx://resources/kubernetes/a.md", category="kubernetes")])
    assert k8s.category_boost == 1.0


def test_target_boost_only_inside_the_target():
    scorer = Scorer(ScoringSettings())
    tq = TypedQuery(text="q", context_type="resource", target_uri="ctx://resources/ops/")
    inside, outside = scorer.score(
        tq,
        [hit("ctx://resources/ops/a.md", vector_score=0.5), hit("ctx://resources/opsx/b.md", vector_score=0.5)],
    )
    assert (inside.uri, inside.target_uri_boost) == ("ctx://resources/ops/a.md", 1.0)
    assert outside.target_uri_boost == 0.0


def test_dedupe_keeps_best_then_overview_then_uri():
    a1 = hit("ctx://resources/a.md", score=0.5, has_overview=False)
    a2 = hit("ctx://resources/a.md", score=0.7, has_overview=False)
    b_plain = hit("ctx://resources/b.md", score=0.6, has_overview=False)
    c_over = hit("ctx://resources/c.md", score=0.6, has_overview=True)
    d = hit("ctx://resources/d.md", score=0.6, has_overview=True)
    out = dedupe_by_uri([a1, b_plain, d, a2, c_over])
    assert [h.uri for h in out] == [
        "ctx://resources/a.md",
        "ctx://resources/c.md",  # same score as b and d: overview first, then URI order
        "ctx://resources/d.md",
        "ctx://resources/b.md",
    ]
    assert out[0].score == 0.7
    # equal duplicates: the seed wins over an expansion hit
    seed = hit("ctx://resources/e.md", score=0.4, source="seed")
    exp = hit("ctx://resources/e.md", score=0.4, source="expansion")
    assert dedupe_by_uri([exp, seed])[0].source == "seed"


@pytest.mark.parametrize(
    ("score", "threshold", "gte", "expected"),
    [(0.5, 0.5, False, False), (0.5, 0.5, True, True), (0.51, 0.5, False, True), (0.49, 0.5, True, False)],
)
def test_threshold_strict_and_inclusive(score, threshold, gte, expected):
    assert passes_threshold(score, threshold, gte) is expected


# ---- merge ------------------------------------------------------------------------------------------------------


def scored(uri: str, score: float, vector: float | None = None, **kw) -> NodeHit:
    return hit(uri, score=score, vector_score=score if vector is None else vector, **kw)


def test_default_threshold_is_none_and_merge_returns_min_top_k_candidates():
    s = Scorer(ScoringSettings())
    assert s.default_threshold is None
    pool = [scored(f"ctx://resources/r/{i}.md", 0.01 * i) for i in range(6)]  # all far below any usual threshold
    assert len(s.merge(pool, query="q", top_k=10, threshold=None).final) == 6
    assert len(s.merge(pool, query="q", top_k=4, threshold=None).final) == 4
    assert [h.score for h in s.merge(pool, query="q", top_k=3, threshold=None).final] == [0.05, 0.04, 0.03]


def test_a_caller_threshold_drops_weak_hits_but_never_a_protected_one():
    s = Scorer(ScoringSettings())
    named = scored("ctx://resources/runbooks/KubePodCrashLooping.md", 0.05)
    bm25_first = scored("ctx://resources/runbooks/other.md", 0.04)
    weak = scored("ctx://resources/runbooks/weak.md", 0.06)
    strong = scored("ctx://resources/runbooks/strong.md", 0.5)
    result = s.merge(
        [named, bm25_first, weak, strong],
        query="KubePodCrashLooping 告警怎么处理",
        top_k=10,
        threshold=0.3,
        keyword_top={"resource": [(bm25_first.uri, 9.0), (weak.uri, 3.0)]},  # 9 >= 1.5 * 3: a clear first
    )
    assert [h.uri for h in result.final] == [strong.uri, named.uri, bm25_first.uri]
    assert result.below_threshold == 1 and result.protected == sorted([named.uri, bm25_first.uri])
    close = s.merge(
        [scored(bm25_first.uri, 0.04), scored(weak.uri, 0.06)],
        query="x",
        top_k=10,
        threshold=0.3,
        keyword_top={"resource": [(bm25_first.uri, 4.0), (weak.uri, 3.0)]},  # 4 < 4.5: no clear margin
    )
    assert close.final == [] and close.protected == []


@pytest.mark.parametrize(
    ("query", "uri", "expected"),
    [
        ("KubePodCrashLooping 告警怎么处理", "ctx://resources/r/KubePodCrashLooping.md", True),
        ("kubepodcrashlooping?", "ctx://resources/r/KubePodCrashLooping.md", True),
        ("how to restart deployment", "ctx://agent/a/skills/restart-deployment.md", True),
        ("容器频繁重启怎么办", "ctx://resources/r/容器频繁重启.md", True),
        ("pod crash looping", "ctx://resources/r/KubePodCrashLooping.md", False),  # not named exactly
        ("KubePodCrashLoopingX", "ctx://resources/r/KubePodCrashLooping.md", False),  # not a whole word
        ("the faq", "ctx://resources/r/faq.md", False),  # too short to count
        ("kubernetes", "ctx://resources/r/kubernetes/", False),  # directories are not named documents
    ],
)
def test_names_node(query, uri, expected):
    assert names_node(query, uri) is expected


def test_intent_boost_ranks_the_preferred_type_first_and_keeps_the_others():
    s = Scorer(ScoringSettings())
    resource = scored("ctx://resources/r/a.md", 0.40, context_type="resource")
    skill = scored("ctx://agent/x/skills/b.md", 0.38, context_type="skill")
    memory = scored("ctx://user/u/memories/c.md", 0.10, context_type="memory")
    result = s.merge([resource, skill, memory], query="q", top_k=10, threshold=None, preferred={"skill"})
    assert [h.uri for h in result.final] == [skill.uri, resource.uri, memory.uri]
    assert skill.score == pytest.approx(0.43)  # 0.38 + intent_boost 0.05
    far = scored("ctx://resources/r/far.md", 0.60, context_type="resource")
    weak_skill = scored("ctx://agent/x/skills/w.md", 0.30, context_type="skill")
    ranked = s.merge([far, weak_skill], query="q", top_k=10, threshold=None, preferred={"skill"}).final
    assert [h.uri for h in ranked] == [far.uri, weak_skill.uri]  # a small boost, not an override
    plain = Scorer(ScoringSettings(intent_boost=0.0))
    r2 = scored("ctx://resources/r/a.md", 0.40)
    s2 = scored("ctx://agent/x/skills/b.md", 0.38, context_type="skill")
    assert [h.uri for h in plain.merge([r2, s2], query="q", top_k=10, threshold=None, preferred={"skill"}).final] == [
        r2.uri,
        s2.uri,
    ]


def test_an_expansion_hit_never_pushes_out_a_direct_hit_with_a_better_own_match():
    direct = [scored(f"ctx://user/u/memories/general/d{i}.md", 0.40 - 0.01 * i, 0.55 - 0.01 * i) for i in range(3)]
    # expansion hits ranked higher by the final score (path consistency) but matching less well on their own
    sibling = scored("ctx://user/u/memories/general/s.md", 0.45, 0.50, source="expansion")
    earned = scored("ctx://user/u/memories/general/e.md", 0.44, 0.60, source="expansion")
    ranked = sorted([*direct, sibling, earned], key=lambda h: (-h.score, h.uri))
    top = select_top(ranked, 3)
    assert [h.uri for h in top] == [earned.uri, direct[0].uri, direct[1].uri]
    assert sibling not in top  # own vector 0.50 < every direct hit's: it leaves first
    assert select_top(ranked, 10) == ranked  # room for all: nothing is swapped
    only_expansion = [scored("ctx://r/x/a.md", 0.3, 0.3, source="expansion")]
    assert select_top(only_expansion, 3) == only_expansion


def _memory(uri: str, score: float, **kw) -> NodeHit:
    return scored(uri, score, context_type="memory", owner_space="user:u", is_dir=uri.endswith("/"), **kw)


def test_memory_intent_ranks_directories_below_memory_files():
    """A directory ("Directory 2024-06-health: 10 items: ...") never takes a top_k slot from a memory."""
    s = Scorer(ScoringSettings())
    directory = _memory("ctx://user/u/memories/2024-06-health/", 0.60)
    root = _memory("ctx://user/u/memories/", 0.55)
    files = [_memory(f"ctx://user/u/memories/2024-06-health/m{i}.md", 0.50 - 0.1 * i) for i in range(3)]
    pool = [directory, root, *files]
    for preferred in ({"memory"}, set()):  # the planner's memory intent, or every candidate is a memory
        result = s.merge(pool, query="q", top_k=3, threshold=None, preferred=preferred)
        assert [h.uri for h in result.final] == [h.uri for h in files] and result.memory_intent
    # with room to spare, the directories follow the memories instead of disappearing
    roomy = s.merge(pool, query="q", top_k=10, threshold=None).final
    assert [h.uri for h in roomy] == [*(h.uri for h in files), directory.uri, root.uri]
    # no memory matches: the directories come back in their own order
    assert [h.uri for h in s.merge([directory, root], query="q", top_k=3, threshold=None).final] == [
        directory.uri,
        root.uri,
    ]


def test_below_memory_files_keeps_files_in_order_and_directories_by_score_after_the_last_memory():
    directory = scored("ctx://user/u/memories/health/", 0.60, is_dir=True, context_type="memory")
    resource = scored("ctx://resources/r/a.md", 0.50)
    m1 = _memory("ctx://user/u/memories/m1.md", 0.40)
    resource2 = scored("ctx://resources/r/b.md", 0.30)
    m2 = _memory("ctx://user/u/memories/m2.md", 0.20)
    low = scored("ctx://resources/r/c.md", 0.10)
    ranked = [directory, resource, m1, resource2, m2, low]
    assert below_memory_files(ranked) == [resource, m1, resource2, m2, directory, low]
    no_memory = [directory, resource, low]
    assert below_memory_files(no_memory) == no_memory


def test_a_memory_query_does_not_rank_an_unrelated_file_above_a_matching_directory_for_nothing():
    """Only memories outrank directories: a skill with score 0 stays below the memory directory it scored under."""
    s = Scorer(ScoringSettings())
    memory = _memory("ctx://user/u/memories/preference/p.md", 0.36)
    directory = _memory("ctx://user/u/memories/preference/", 0.31)
    skill = scored("ctx://agent/a/skills/x.md", 0.0, context_type="skill")
    final = s.merge([memory, directory, skill], query="q", top_k=3, threshold=None, preferred={"memory"}).final
    assert [h.uri for h in final] == [memory.uri, directory.uri, skill.uri]


def test_other_queries_rank_directories_among_files():
    s = Scorer(ScoringSettings())
    directory = scored("ctx://resources/ops/kubernetes/", 0.60, is_dir=True)
    memory_dir = _memory("ctx://user/u/memories/health/", 0.58)
    doc = scored("ctx://resources/ops/kubernetes/pod.md", 0.50)
    result = s.merge([directory, memory_dir, doc], query="q", top_k=2, threshold=None, preferred={"resource"})
    assert [h.uri for h in result.final] == [directory.uri, memory_dir.uri] and not result.memory_intent
    assert not is_memory_intent(set(), [directory, doc]) and is_memory_intent({"memory", "skill"}, [directory])


def test_a_directory_never_swaps_in_for_a_memory_under_memory_intent():
    direct = [_memory(f"ctx://user/u/memories/d{i}.md", 0.40 - 0.01 * i, vector=0.55 - 0.01 * i) for i in range(2)]
    sibling = _memory("ctx://user/u/memories/s.md", 0.45, vector=0.30, source="expansion")
    directory = _memory("ctx://user/u/memories/", 0.20, vector=0.90)  # a seed whose own match beats the sibling's
    ranked = sorted([*direct, sibling, directory], key=lambda h: (-h.score, h.uri))
    top = select_top(ranked, 3, memory_intent=True)
    assert [h.uri for h in top] == [sibling.uri, direct[0].uri, direct[1].uri]
    assert directory.uri in [h.uri for h in select_top(ranked, 3)]  # the plain rule would have swapped it in
