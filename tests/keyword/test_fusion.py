import pytest

from context_engine.retrieval.fusion import normalize_scores, rrf, weighted_fusion


def test_rrf_sums_reciprocal_ranks():
    dense = [("a", 0.9), ("b", 0.8), ("c", 0.1)]
    bm25 = [("b", 12.0), ("d", 3.0)]
    fused = dict(rrf([dense, bm25], k=60))
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["d"] == pytest.approx(1 / 62)
    assert [d for d, _ in rrf([dense, bm25], k=60)] == ["b", "a", "d", "c"]


def test_rrf_ranks_come_from_scores_and_ties_break_by_id():
    fused = rrf([[("z", 1.0), ("y", 2.0)], [("x", 5.0)]], k=1)
    assert fused == [("x", 0.5), ("y", 0.5), ("z", pytest.approx(1 / 3))]


def test_rrf_weights_depth_and_top_k():
    lists = [[("a", 2.0), ("b", 1.0)], [("b", 2.0), ("a", 1.0)]]
    assert rrf(lists, k=1, weights=[2.0, 1.0])[0][0] == "a"
    assert rrf(lists, k=1, depth=1) == [("a", 0.5), ("b", 0.5)]
    assert len(rrf(lists, top_k=1)) == 1
    with pytest.raises(ValueError):
        rrf(lists, k=0)
    with pytest.raises(ValueError):
        rrf(lists, weights=[1.0])


def test_minmax_and_zscore_normalisation():
    assert normalize_scores([("a", 3.0), ("b", 1.0), ("c", 2.0)]) == {"a": 1.0, "b": 0.0, "c": 0.5}
    assert normalize_scores([("a", 3.0), ("b", 3.0)]) == {"a": 1.0, "b": 1.0}
    z = normalize_scores([("a", 1.0), ("b", 3.0)], "zscore")
    assert z == {"a": -1.0, "b": 1.0}
    assert normalize_scores([]) == {}


def test_weighted_fusion_is_a_convex_combination_of_minmax_scores():
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    bm25 = [("c", 10.0), ("a", 0.0)]
    fused = dict(weighted_fusion([dense, bm25], [0.7, 0.3]))
    assert fused["a"] == pytest.approx(0.7 * 1.0 + 0.3 * 0.0)
    assert fused["b"] == pytest.approx(0.7 * 0.5)  # missing from bm25: its minimum, 0
    assert fused["c"] == pytest.approx(0.7 * 0.0 + 0.3 * 1.0)
    assert weighted_fusion([dense, bm25], [1.0, 0.0])[0][0] == "a"
    assert weighted_fusion([dense, bm25], [0.0, 1.0])[0][0] == "c"


def test_weighted_fusion_rejects_bad_weights():
    with pytest.raises(ValueError):
        weighted_fusion([[("a", 1.0)]], [-1.0])
    with pytest.raises(ValueError):
        weighted_fusion([[("a", 1.0)]], [0.5, 0.5])


def test_duplicate_ids_in_a_list_keep_the_best():
    assert rrf([[("a", 1.0), ("a", 5.0), ("b", 2.0)]], k=1) == [("a", 0.5), ("b", pytest.approx(1 / 3))]
