"""Rank fusion of several ranked lists (dense and BM25): pure functions, no I/O (DESIGN §7.2, §11).

A ranked list is a sequence of ``(id, score)`` pairs, best first (higher score is better). Both functions return one
fused list of ``(id, fused_score)`` pairs ordered by fused score descending, ties by id ascending (deterministic),
truncated to ``top_k`` when given. Ids absent from a list contribute nothing from that list.

* :func:`rrf` — reciprocal rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009): ``sum_i w_i / (k + rank_i)``,
  ranks starting at 1. Uses ranks only, so it needs no score calibration.
* :func:`weighted_fusion` — convex combination of per-list normalised scores (Fox and Shaw's CombSUM with weights;
  normalisation as in Lee 1997 / Bruch et al. 2023): each list's scores are mapped to ``[0, 1]`` (``minmax``), or
  standardised (``zscore``), or taken as they are (``none``: scores already on a bounded, query-independent scale),
  then ``sum_i w_i * norm_i(score)``; an id missing from a list gets that list's minimum normalised value (0 for
  ``minmax`` and ``none``).
* ``convex`` (the engine's pipelines, :func:`convex_inputs`): ``weighted_fusion`` with ``none`` over the dense
  similarity on the model's calibrated scale clipped to [0, 1] and BM25's ``coverage`` (score over its upper bound
  for the query, ``storage/keyword``). Both sides are absolute, so a list whose best item is weak (BM25 matching one
  incidental word of a Chinese query over English text) stays weak, where min-max would lift it to 1; this is the
  theoretically-bounded normalisation Bruch et al. 2023 (ACM TOIS) recommend over min-max.

Parameters used by the engine (``KeywordSettings.rrf_k``, ``dense_weight``) were tuned on SciFact train and the dev
half of the runbook queries (eval/README.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

__all__ = ["RankedList", "convex_inputs", "normalize_scores", "rrf", "weighted_fusion"]

RankedList = Sequence[tuple[str, float]]


def _order(fused: dict[str, float], top_k: int | None) -> list[tuple[str, float]]:
    out = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
    return out if top_k is None else out[:top_k]


def _weights(n: int, weights: Sequence[float] | None) -> list[float]:
    if weights is None:
        return [1.0] * n
    if len(weights) != n:
        raise ValueError(f"{n} ranked lists but {len(weights)} weights")
    if any(w < 0 for w in weights):
        raise ValueError("fusion weights must be >= 0")
    return list(weights)


def _ranked(lst: RankedList) -> list[tuple[str, float]]:
    """The list in rank order (score descending, then id), first occurrence of an id kept."""
    seen: set[str] = set()
    out: list[tuple[str, float]] = []
    for doc_id, score in sorted(lst, key=lambda kv: (-kv[1], kv[0])):
        if doc_id not in seen:
            seen.add(doc_id)
            out.append((doc_id, float(score)))
    return out


def rrf(
    lists: Sequence[RankedList],
    *,
    k: int = 60,
    weights: Sequence[float] | None = None,
    depth: int | None = None,
    top_k: int | None = None,
) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: ``score(d) = sum_i w_i / (k + rank_i(d))``.

    Args:
        lists: ranked lists of ``(id, score)``; each is re-sorted by score (desc, ties by id) to get ranks.
        k: the RRF constant (> 0); larger flattens the rank discount. 60 in the paper.
        weights: one non-negative weight per list (default all 1).
        depth: only the first ``depth`` items of each list take part (default all).
        top_k: truncate the fused list.

    Returns:
        ``(id, rrf_score)`` pairs, fused score descending, ties by id ascending.

    Raises:
        ValueError: ``k <= 0``, negative weights, or a weight count that does not match ``lists``.
    """
    if k <= 0:
        raise ValueError("rrf k must be > 0")
    ws = _weights(len(lists), weights)
    fused: dict[str, float] = {}
    for w, lst in zip(ws, lists, strict=True):
        ranked = _ranked(lst)[:depth] if depth is not None else _ranked(lst)
        for rank, (doc_id, _) in enumerate(ranked, start=1):
            fused[doc_id] = fused.get(doc_id, 0.0) + w / (k + rank)
    return _order(fused, top_k)


Normalization = Literal["minmax", "zscore", "none"]


def normalize_scores(lst: RankedList, method: Normalization = "minmax") -> dict[str, float]:
    """Per-list score normalisation: ``minmax`` to ``[0, 1]`` (all equal -> 1), ``zscore`` (all equal -> 0), or
    ``none`` (the scores as given)."""
    ranked = _ranked(lst)
    if not ranked:
        return {}
    values = [s for _, s in ranked]
    if method == "none":
        return dict(ranked)
    if method == "minmax":
        lo, hi = min(values), max(values)
        if hi == lo:
            return {d: 1.0 for d, _ in ranked}
        return {d: (s - lo) / (hi - lo) for d, s in ranked}
    if method == "zscore":
        mean = sum(values) / len(values)
        var = sum((v - mean) ** 2 for v in values) / len(values)
        if var == 0:
            return {d: 0.0 for d, _ in ranked}
        sd = var**0.5
        return {d: (s - mean) / sd for d, s in ranked}
    raise ValueError(f"unknown normalisation {method!r}")


def weighted_fusion(
    lists: Sequence[RankedList],
    weights: Sequence[float],
    *,
    normalization: Normalization = "minmax",
    depth: int | None = None,
    top_k: int | None = None,
) -> list[tuple[str, float]]:
    """Weighted sum of normalised scores: ``score(d) = sum_i w_i * norm_i(d)``.

    Args:
        lists: ranked lists of ``(id, score)``, higher score better.
        weights: one non-negative weight per list (e.g. ``[alpha, 1 - alpha]`` for dense and BM25).
        normalization: ``minmax`` (each list to [0, 1]), ``zscore``, or ``none`` (scores used as given); computed over
            the first ``depth`` items.
        depth: only the first ``depth`` items of each list take part (default all).
        top_k: truncate the fused list.

    Returns:
        ``(id, fused_score)`` pairs, fused score descending, ties by id ascending. An id missing from a list gets that
        list's lowest normalised value among the items taken.

    Raises:
        ValueError: negative weights, a weight count that does not match ``lists``, an unknown normalisation.
    """
    ws = _weights(len(lists), weights)
    normed: list[dict[str, float]] = []
    for lst in lists:
        ranked = _ranked(lst)[:depth] if depth is not None else _ranked(lst)
        normed.append(normalize_scores(ranked, normalization))
    ids = {d for n in normed for d in n}
    fused: dict[str, float] = {}
    for w, n in zip(ws, normed, strict=True):
        floor = min(n.values()) if n else 0.0
        floor = min(floor, 0.0) if normalization in ("minmax", "none") else floor
        for d in ids:
            fused[d] = fused.get(d, 0.0) + w * n.get(d, floor)
    return _order(fused, top_k)


def convex_inputs(
    dense: RankedList, coverage: RankedList, calibrate: Callable[[float], float]
) -> list[list[tuple[str, float]]]:
    """The two lists ``convex`` fusion sums with ``normalization='none'``: ``dense`` similarities mapped by
    ``calibrate`` (the model's similarity scale) and clipped to [0, 1], and BM25 ``coverage`` values as given."""
    return [
        [(d, min(1.0, max(0.0, calibrate(s)))) for d, s in dense],
        [(d, float(c)) for d, c in coverage],
    ]
