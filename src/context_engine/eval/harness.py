"""The evaluation harness (DESIGN §11): run retrievers over a dataset, fuse runs, score them, time them.

:func:`run_retriever` queries one :class:`~context_engine.eval.retrievers.Retriever` per query (one at a time, so the
latency is what a caller waits for: query embedding plus search, or the HTTP round trip in live mode) and scores the
run with :func:`~context_engine.eval.metrics.evaluate`. :func:`fuse_runs` combines a dense and a BM25 result with
:mod:`context_engine.retrieval.fusion`; its latency per query is the sum of both plus the fusion itself (the two
searches run one after the other). Context tokens per query: the CJK-aware token estimate
(:func:`~context_engine.ingest.parse.estimate_tokens`) of the top ``context_k`` documents' ``title + " " + text``
(what an agent would put in its context); documents unknown to the corpus (live mode) count 0.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from context_engine.eval.datasets import EvalDataset
from context_engine.eval.metrics import MEASURES, evaluate
from context_engine.eval.retrievers import Retriever
from context_engine.eval.trec import Run, rank_order
from context_engine.ingest.parse import estimate_tokens
from context_engine.retrieval.fusion import convex_inputs, rrf, weighted_fusion
from context_engine.schema.similarity import IDENTITY, SimilarityScale

__all__ = ["WRITE_LIMITS", "MethodResult", "config_hash", "fuse_runs", "progress_ticker", "run_retriever", "score_run"]


def progress_ticker(
    progress: Callable[[str, int, int], None] | None,
) -> Callable[[str, int], Callable[[int], None]]:
    """``tick(stage, total)``: a callback that adds ``n`` done items of ``stage`` and reports ``(stage, done, total)``
    to ``progress`` (nothing when ``progress`` is ``None``)."""

    def tick(stage: str, total: int) -> Callable[[int], None]:
        done = 0

        def inner(n: int) -> None:
            nonlocal done
            done += n
            if progress:
                progress(stage, done, total)

        return inner

    return tick


WRITE_LIMITS = frozenset({"max_chunks_per_document", "write_wait_s"})
"""``ingest`` settings left out of every eval configuration (and so of its hash): they bound a request's work and
never change what is stored or ranked."""


def config_hash(config: dict[str, Any]) -> str:
    """First 16 hex characters of the SHA-256 of ``config`` as canonical JSON (sorted keys, no spaces)."""
    canon = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


@dataclass
class MethodResult:
    """One method's outcome on one dataset.

    Attributes:
        method: ``dense``, ``bm25``, ``rrf``, ``weighted``, ``live`` or ``fixture``.
        model: the embedder label for methods that embed (``backend:model_name``), else ``None``.
        config: what decides the ranking (method parameters, model, ``top_k``); ``config_hash`` is its hash.
        metrics: aggregate metric values (mean over judged queries; missing or empty queries score 0).
        per_query: ``{qid: {measure: value}}``.
        latency_ms: ``p50``, ``p95``, ``mean`` of the per-query latency (milliseconds).
        context_tokens: ``mean``, ``p50``, ``p95`` of the per-query context size (estimated tokens).
        run: the ranked results, ``{qid: [(doc_id, score), ...]}``.
        latencies: per-query latency (milliseconds).
        empty_queries: queries that returned nothing.
        prepare_s: seconds spent indexing (and embedding, when not cached) the corpus.
        variant: a caller's label telling configurations of one method apart (e.g. ``plain``); with ``method`` and
            ``model`` it keys the baseline entry.
    """

    method: str
    model: str | None
    config: dict[str, Any]
    config_hash: str
    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]
    latency_ms: dict[str, float]
    context_tokens: dict[str, float]
    run: Run
    latencies: dict[str, float] = field(repr=False)
    empty_queries: int = 0
    prepare_s: float = 0.0
    variant: str = ""

    @property
    def label(self) -> str:
        """``method``, plus ``(variant)`` and ``[model]`` when set: a row title."""
        label = f"{self.method} ({self.variant})" if self.variant else self.method
        return f"{label} [{self.model}]" if self.model else label

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary without the run and per-query values."""
        return {
            "method": self.method,
            "variant": self.variant,
            "model": self.model,
            "config": self.config,
            "config_hash": self.config_hash,
            "metrics": {k: round(v, 6) for k, v in self.metrics.items()},
            "latency_ms": {k: round(v, 3) for k, v in self.latency_ms.items()},
            "context_tokens": {k: round(v, 1) for k, v in self.context_tokens.items()},
            "queries": len(self.per_query),
            "empty_queries": self.empty_queries,
            "prepare_s": round(self.prepare_s, 3),
        }


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p95": 0.0, "mean": 0.0}
    arr = np.asarray(values, dtype=np.float64)
    return {"p50": float(np.percentile(arr, 50)), "p95": float(np.percentile(arr, 95)), "mean": float(arr.mean())}


class _ContextCounter:
    def __init__(self, dataset: EvalDataset) -> None:
        self._dataset = dataset
        self._tokens: dict[str, int] = {}

    def __call__(self, results: list[tuple[str, float]], k: int) -> int:
        total = 0
        for doc_id, _ in results[:k]:
            n = self._tokens.get(doc_id)
            if n is None:
                doc = self._dataset.corpus.get(doc_id)
                n = estimate_tokens(doc.content()) if doc else 0
                self._tokens[doc_id] = n
            total += n
        return total


def score_run(
    dataset: EvalDataset,
    run: Run,
    latencies: dict[str, float],
    *,
    method: str,
    model: str | None,
    config: dict[str, Any],
    context_k: int,
    prepare_s: float = 0.0,
    counter: Callable[[list[tuple[str, float]], int], int] | None = None,
) -> MethodResult:
    """Score a finished run: metrics (ir-measures), latency and context-size statistics."""
    counter = counter or _ContextCounter(dataset)
    metrics = evaluate(dataset.qrels, run, MEASURES)
    ctx = [float(counter(run.get(q, []), context_k)) for q in dataset.queries]
    return MethodResult(
        method=method,
        model=model,
        config=config,
        config_hash=config_hash(config),
        metrics=metrics.aggregate,
        per_query=metrics.per_query,
        latency_ms=_stats([latencies[q] for q in dataset.queries if q in latencies]),
        context_tokens=_stats(ctx),
        run=run,
        latencies=latencies,
        empty_queries=sum(1 for q in dataset.queries if not run.get(q)),
        prepare_s=prepare_s,
    )


def run_retriever(
    dataset: EvalDataset,
    retriever: Retriever,
    *,
    top_k: int = 100,
    context_k: int = 5,
    progress: Callable[[int], None] | None = None,
) -> MethodResult:
    """Prepare ``retriever`` on the corpus, query every dataset query, and score the run.

    Args:
        dataset: the test set.
        retriever: the method under test; ``prepare`` is called here, ``close`` is left to the caller.
        top_k: results kept per query.
        context_k: top results counted as a query's context.
        progress: called with 1 after each query.
    """
    t0 = time.perf_counter()
    retriever.prepare(dataset)
    prepare_s = time.perf_counter() - t0
    run: Run = {}
    latencies: dict[str, float] = {}
    for qid, query in dataset.queries.items():
        t1 = time.perf_counter()
        results = retriever.search(qid, query, top_k)
        latencies[qid] = (time.perf_counter() - t1) * 1000.0
        run[qid] = rank_order(results)[:top_k]
        if progress:
            progress(1)
    config = {**retriever.config, "top_k": top_k}
    model = config.get("model") if isinstance(config.get("model"), str) else None
    return score_run(
        dataset,
        run,
        latencies,
        method=retriever.method,
        model=model,
        config=config,
        context_k=context_k,
        prepare_s=prepare_s,
    )


def fuse_runs(
    dataset: EvalDataset,
    dense: MethodResult,
    bm25: MethodResult,
    *,
    method: Literal["rrf", "weighted", "convex"],
    rrf_k: int = 60,
    dense_weight: float = 0.5,
    depth: int = 100,
    top_k: int = 100,
    context_k: int = 5,
    scale: SimilarityScale = IDENTITY,
) -> MethodResult:
    """Fuse a dense and a BM25 result per query, each list cut to ``depth`` first: ``rrf``
    (:func:`~context_engine.retrieval.fusion.rrf`, equal weights), ``weighted``
    (:func:`~context_engine.retrieval.fusion.weighted_fusion`, ``[dense_weight, 1 - dense_weight]`` over min-max
    normalised scores) or ``convex`` (the same weights over the dense similarity on ``scale`` clipped to [0, 1] and the
    BM25 run's scores, which :class:`~context_engine.eval.retrievers.BM25Retriever` gives as ``coverage``)."""
    run: Run = {}
    latencies: dict[str, float] = {}
    for qid in dataset.queries:
        t0 = time.perf_counter()
        lists = [dense.run.get(qid, []), bm25.run.get(qid, [])]
        if method == "rrf":
            fused = rrf(lists, k=rrf_k, depth=depth, top_k=top_k)
        elif method == "convex":
            fused = weighted_fusion(
                convex_inputs(lists[0], lists[1], scale),
                [dense_weight, 1.0 - dense_weight],
                normalization="none",
                depth=depth,
                top_k=top_k,
            )
        else:
            fused = weighted_fusion(lists, [dense_weight, 1.0 - dense_weight], depth=depth, top_k=top_k)
        run[qid] = fused
        latencies[qid] = (
            dense.latencies.get(qid, 0.0) + bm25.latencies.get(qid, 0.0) + (time.perf_counter() - t0) * 1000.0
        )
    params: dict[str, Any] = (
        {"rrf_k": rrf_k} if method == "rrf" else {"dense_weight": dense_weight, "normalization": "minmax"}
    )
    if method == "convex":
        params = {"dense_weight": dense_weight, "normalization": "none", "scale": [scale.low, scale.high]}
    config = {"method": method, **params, "depth": depth, "top_k": top_k, "dense": dense.config, "bm25": bm25.config}
    return score_run(
        dataset,
        run,
        latencies,
        method=method,
        model=dense.model,
        config=config,
        context_k=context_k,
        prepare_s=dense.prepare_s + bm25.prepare_s,
    )
