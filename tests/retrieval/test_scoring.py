"""Scoring (seed 000 §6): normalised components, weights, dedup tie-breaks, thresholds > and >=."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_engine.retrieval.scoring import Scorer, dedupe_by_uri, passes_threshold, vector_score
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
