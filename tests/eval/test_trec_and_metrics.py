from pathlib import Path

import pytest

from context_engine.errors import ContextEngineError
from context_engine.eval.metrics import MEASURES, evaluate
from context_engine.eval.trec import rank_order, read_qrels, read_run, write_qrels, write_run


def test_run_round_trip_keeps_string_ids_and_rank_order(tmp_path: Path):
    run = {"007": [("0042", 0.5), ("10", 0.9), ("9", 0.5)], "1": [("a", 1.0)]}
    write_run(run, tmp_path / "run.trec", tag="t")
    lines = (tmp_path / "run.trec").read_text().splitlines()
    assert lines[0].split() == ["007", "Q0", "10", "1", "0.900000", "t"]
    assert [ln.split()[2] for ln in lines[:3]] == ["10", "0042", "9"]  # tie at 0.5 broken by id
    back = read_run(tmp_path / "run.trec")
    assert set(back) == {"007", "1"} and back["007"][1][0] == "0042"


def test_qrels_round_trip(tmp_path: Path):
    qrels = {"01": {"007": 2, "8": 0}}
    write_qrels(qrels, tmp_path / "q.txt")
    assert read_qrels(tmp_path / "q.txt") == qrels


def test_malformed_files_raise(tmp_path: Path):
    (tmp_path / "bad").write_text("q Q0 d 1\n")
    with pytest.raises(ContextEngineError):
        read_run(tmp_path / "bad")
    with pytest.raises(ContextEngineError):
        write_run({"q 1": [("d", 1.0)]}, tmp_path / "x")


def test_rank_order_dedups():
    assert rank_order([("a", 1.0), ("b", 2.0), ("a", 3.0)]) == [("a", 3.0), ("b", 2.0)]


def test_metrics_match_hand_computed_values():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1, "c": 1}}
    run = {"q1": [("x", 3.0), ("a", 2.0)], "q2": [("b", 1.0)]}
    res = evaluate(qrels, run)
    assert res.per_query["q1"]["RR@10"] == pytest.approx(0.5)
    assert res.per_query["q1"]["nDCG@10"] == pytest.approx(1 / 1.5849625, rel=1e-6)
    assert res.per_query["q2"]["R@5"] == pytest.approx(0.5)
    assert res.aggregate["RR@10"] == pytest.approx(0.75)
    assert list(res.aggregate) == list(MEASURES)


def test_queries_without_results_score_zero_and_count_in_the_mean():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    res = evaluate(qrels, {"q1": [("a", 1.0)], "q2": []})
    assert res.per_query["q2"] == {m: 0.0 for m in MEASURES}
    assert res.per_query["q3"] == {m: 0.0 for m in MEASURES}
    assert res.aggregate["nDCG@10"] == pytest.approx(1 / 3)


def test_ties_are_ranked_by_doc_id_not_by_trec_eval():
    qrels = {"q": {"b": 1}}
    assert evaluate(qrels, {"q": [("b", 1.0), ("a", 1.0)]}).per_query["q"]["RR@10"] == pytest.approx(0.5)


def test_queries_with_only_zero_grades_are_not_judged():
    res = evaluate({"q1": {"a": 0}, "q2": {"b": 1}}, {"q2": [("b", 1.0)]})
    assert set(res.per_query) == {"q2"} and res.aggregate["nDCG@10"] == 1.0
