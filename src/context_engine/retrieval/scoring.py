"""Final score, deduplication and thresholds of search_memory (seed 000 §6; DESIGN.md §5).

``final = (w_v·vector + w_h·hierarchy + w_c·category_boost + w_t·target_uri_boost) / (w_v + w_h + w_c + w_t)``
with the default weights 0.65 / 0.20 / 0.10 / 0.05 (sum 1), every component in 0..1, so ``final`` is in 0..1 and
higher is better. Components:

* ``vector_score = clip(scale(cosine), 0, 1)``: cosine similarity of the query and the node's abstract on the
  engine's calibrated scale (the embedding model's :class:`~context_engine.schema.similarity.SimilarityScale`, the
  identity for all-MiniLM-L6-v2), with negative values (no similarity) at 0. Clipping rather than ``(cos + 1) / 2``
  keeps the scale of the raw similarity, so a threshold such as 0.3 keeps its usual meaning for sentence embeddings
  (unrelated pairs sit near 0 with all-MiniLM-L6-v2; ``(cos + 1) / 2`` would put them near 0.5).
* ``hierarchy_score``: path consistency, computed by ``HierarchicalSearcher`` (see its docstring), 0..1.
* ``category_boost``: 1 when the node's category is named by the query: one of the typed query's ``categories``,
  or the category name (or a configured synonym, e.g. 偏好 -> preference) occurring in the query text; else 0.
* ``target_uri_boost``: 1 when a ``target_uri`` is in force and the node lies in its subtree; else 0.

Scores are rounded to 6 decimals so that the same request always ranks identically, whichever similarity path
(index or in-memory matrix) produced them. Ranking: score descending, then ``has_overview`` first, then URI.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from context_engine.retrieval.scope import within_target
from context_engine.schema.hits import NodeHit
from context_engine.schema.query import TypedQuery
from context_engine.schema.similarity import IDENTITY, SimilarityScale
from context_engine.settings import ScoringSettings

__all__ = ["Scorer", "dedupe_by_uri", "passes_threshold", "rank_key", "vector_score"]

_DECIMALS = 6


def vector_score(similarity: float, scale: SimilarityScale = IDENTITY) -> float:
    """Cosine similarity in [-1, 1] mapped to 0..1: calibrated by ``scale``, then clipped (module docstring)."""
    return min(1.0, max(0.0, scale(similarity)))


def rank_key(hit: NodeHit) -> tuple[float, bool, str]:
    """Sort key: score descending, nodes with an overview first on ties, then URI ascending (deterministic)."""
    return (-hit.score, not hit.has_overview, hit.uri)


def dedupe_by_uri(hits: Iterable[NodeHit]) -> list[NodeHit]:
    """One hit per URI, the best by :func:`rank_key` (then a seed over an expansion hit), in ranked order."""
    best: dict[str, NodeHit] = {}
    for h in hits:
        kept = best.get(h.uri)
        if kept is None or (rank_key(h), h.source != "seed") < (rank_key(kept), kept.source != "seed"):
            best[h.uri] = h
    return sorted(best.values(), key=rank_key)


def passes_threshold(score: float, threshold: float, gte: bool) -> bool:
    """``score > threshold`` by default, ``score >= threshold`` with ``score_gte`` (seed 000 §6)."""
    return score >= threshold if gte else score > threshold


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def _mentions(text: str, word: str) -> bool:
    """Whether ``word`` occurs in ``text`` (both normalised): as a whole word for ASCII, as a substring otherwise."""
    w = _normalise(word).strip()
    if not w:
        return False
    if w.isascii():
        return re.search(r"(?<![\w])" + re.escape(w) + r"(?![\w])", text) is not None
    return w in text


class Scorer:
    """Computes the seed 000 §6 components and the final score of candidates.

    Args:
        settings: the ``retrieval.scoring`` section (weights, synonyms, default threshold).
        scale: the embedding model's similarity scale (``vector_score``).
    """

    def __init__(self, settings: ScoringSettings, scale: SimilarityScale = IDENTITY) -> None:
        self._settings = settings
        self.scale = scale
        s = settings
        self._weights = (s.weight_vector, s.weight_hierarchy, s.weight_category, s.weight_target)
        self._total = sum(self._weights)

    def vector_score(self, similarity: float) -> float:
        """:func:`vector_score` on this scorer's scale."""
        return vector_score(similarity, self.scale)

    @property
    def default_threshold(self) -> float:
        return self._settings.default_score_threshold

    def final(self, vector: float, hierarchy: float, category: float, target: float) -> float:
        """The weighted mean of the four 0..1 components, rounded to 6 decimals."""
        wv, wh, wc, wt = self._weights
        value = (wv * vector + wh * hierarchy + wc * category + wt * target) / self._total
        return round(min(1.0, max(0.0, value)), _DECIMALS)

    def category_terms(self, typed_query: TypedQuery, categories: Iterable[str]) -> set[str]:
        """Which of ``categories`` the typed query names (its categories, the query text, synonyms)."""
        text = _normalise(typed_query.text)
        named = set(typed_query.categories)
        for cat in set(categories):
            if not cat or cat in named:
                continue
            if _mentions(text, cat) or any(_mentions(text, s) for s in self._settings.category_synonyms.get(cat, ())):
                named.add(cat)
        return named

    def score(self, typed_query: TypedQuery, hits: Sequence[NodeHit]) -> list[NodeHit]:
        """``hits`` with ``category_boost``, ``target_uri_boost`` and ``score`` set (in place: the hits belong to the
        request), in ranked order. ``vector_score`` and ``hierarchy_score`` are taken as the searcher computed them.
        """
        named = self.category_terms(typed_query, {h.category for h in hits})
        target = typed_query.target_uri
        for h in hits:
            h.category_boost = 1.0 if h.category and h.category in named else 0.0
            h.target_uri_boost = 1.0 if target and within_target(h.uri, target) else 0.0
            h.score = self.final(h.vector_score, h.hierarchy_score, h.category_boost, h.target_uri_boost)
        return sorted(hits, key=rank_key)
