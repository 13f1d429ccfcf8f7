"""Retrieval metrics through ``ir-measures`` (pytrec_eval backend), never hand-written (DESIGN §11).

Measures: ``nDCG@10``, ``R@5``, ``R@10``, ``R@100``, ``RR@10`` (MRR@10). The run is ranked by our own order (score
descending, ties by doc id ascending) before it reaches the library, by handing it rank-derived scores: trec_eval's own
tie-breaking (by doc id, descending) would otherwise reorder ties. Every query with qrels counts: a query with no
results (or missing from the run) scores 0 on every measure, and the aggregate is the mean over all qrels queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import ir_measures

from context_engine.eval.trec import rank_order

__all__ = ["MEASURES", "MetricResult", "evaluate"]

MEASURES: tuple[str, ...] = ("nDCG@10", "R@5", "R@10", "R@100", "RR@10")


@dataclass(frozen=True)
class MetricResult:
    """Metric values: ``aggregate[measure]`` (mean over queries) and ``per_query[qid][measure]``."""

    aggregate: dict[str, float]
    per_query: dict[str, dict[str, float]]


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Sequence[tuple[str, float]]],
    measures: Sequence[str] = MEASURES,
) -> MetricResult:
    """Score ``run`` against ``qrels``.

    Args:
        qrels: ``{qid: {doc_id: grade}}``; queries without any grade > 0 are left out (no measure is defined).
        run: ``{qid: [(doc_id, score), ...]}``; queries absent from ``qrels`` are ignored.
        measures: names in ir-measures syntax (``nDCG@10``, ``R@100``, ``RR@10``, ...).

    Returns:
        Aggregates and per-query values; both cover exactly the judged queries, 0 for a query with no results.
    """
    parsed = [ir_measures.parse_measure(m) for m in measures]
    judged = sorted(q for q, docs in qrels.items() if any(g > 0 for g in docs.values()))
    qrels_list = [ir_measures.Qrel(q, d, int(g)) for q in judged for d, g in qrels[q].items()]
    scored: list[ir_measures.ScoredDoc] = []
    for qid in judged:
        ranked = rank_order(run.get(qid, []))
        n = len(ranked)
        scored.extend(ir_measures.ScoredDoc(qid, d, float(n - i)) for i, (d, _) in enumerate(ranked))
    per_query: dict[str, dict[str, float]] = {q: {m: 0.0 for m in measures} for q in judged}
    names = {p: m for p, m in zip(parsed, measures, strict=True)}
    if scored:
        for metric in ir_measures.iter_calc(parsed, qrels_list, scored):
            per_query[metric.query_id][names[metric.measure]] = float(metric.value)
    aggregate = {m: (sum(per_query[q][m] for q in judged) / len(judged)) if judged else 0.0 for m in measures}
    return MetricResult(aggregate, per_query)
