"""Scores and relevance levels of lookup_knowledge (DESIGN.md §7.3; seed 001 §5).

Every candidate carries three scores: ``raw_score`` (what the vector backend returned: cosine similarity in
[-1, 1], higher is better), ``score_label`` (``similarity``) and ``score``, the compatible distance-like form
(lower is better): ``1 - raw_score``, which equals half the squared L2 distance of the unit vectors, so a backend
that reports ``l2_distance`` maps onto the same scale. Levels and thresholds are decided on ``similarity``, the raw
cosine mapped onto the engine's calibrated scale by the embedding model's :class:`SimilarityScale`
(``schema/similarity.py``; the identity for all-MiniLM-L6-v2, on which the thresholds below were calibrated).

Levels, from configuration (``Settings.knowledge``):

* ``PRECISE``: similarity >= ``precise_min_similarity`` and the hint layer named the document (a strong or weak
  hint match): the query's own keywords and the semantic match support each other;
* ``HIGHLY_RELEVANT``: similarity >= ``highly_relevant_min_similarity``;
* ``REFERENCE``: similarity >= ``min_similarity`` (the search threshold; below it a chunk is dropped);
* ``DEDUPED``: set later by session dedup, whatever the similarity.

Calibration (``scripts/eval_runbooks.py --calibrate``, runbook golden set, all-MiniLM-L6-v2): ``min_similarity`` is
placed between the best similarity that nonsense/out-of-domain queries reach and the low tail of the relevant
documents' best-chunk similarity; ``highly_relevant_min_similarity`` where a returned document at or above it is
the relevant one at least about half the time (the golden set has one relevant document per query, so this is
precision among returned documents). The figures are in ``docs/lookup_knowledge.md``.

The hint boost (``hint_boost_named`` when the query names the document by alert name or title, else
``hint_boost_strong`` / ``hint_boost_weak``) is added to the similarity (with ``knowledge.hybrid``: to the fused dense +
BM25 score) to form ``rank_score``, the order of the evidence blocks; it never changes ``score``, ``raw_score``,
``similarity`` or the level thresholds.
"""

from __future__ import annotations

from context_engine.schema.knowledge import HintMatch, HintResult, HintStrength, RelevanceLevel
from context_engine.settings import KnowledgeSettings

NAMING_KINDS = frozenset({"alert", "title"})
"""Hint kinds by which a query names a document outright."""


def distance_score(similarity: float) -> float:
    """The distance-like ``score`` of a cosine similarity: ``1 - similarity`` in [0, 2], lower is better."""
    return 1.0 - similarity


class RelevanceClassifier:
    """Levels and hint boosts from the ``knowledge`` settings (see the module docstring)."""

    def __init__(self, settings: KnowledgeSettings) -> None:
        self._s = settings

    @staticmethod
    def hint_strength(uri: str, hints: HintResult) -> HintStrength | None:
        """``strong``/``weak`` when the hint layer matched ``uri``, else ``None``."""
        for m in hints.matches:
            if m.uri == uri:
                return m.strength
        return None

    def boost(self, match: HintMatch | None) -> float:
        """Rank boost for a document the hint layer matched (0 when boosts are off or there is no match):
        ``hint_boost_named`` when the query names it (alert name or title), ``hint_boost_strong`` for another
        strong match (error code, metric, service, heading), ``hint_boost_weak`` for a title-word match."""
        if not self._s.hint_boost or match is None:
            return 0.0
        if match.strength == "weak":
            return self._s.hint_boost_weak
        if NAMING_KINDS.intersection(match.kinds):
            return self._s.hint_boost_named
        return self._s.hint_boost_strong

    def level(
        self, similarity: float, strength: HintStrength | None, *, min_similarity: float | None = None
    ) -> RelevanceLevel | None:
        """The level of a document whose best chunk has ``similarity``; ``None`` below the search threshold."""
        floor = self._s.min_similarity if min_similarity is None else min_similarity
        if similarity < floor:
            return None
        if strength is not None and similarity >= self._s.precise_min_similarity:
            return RelevanceLevel.PRECISE
        if similarity >= self._s.highly_relevant_min_similarity:
            return RelevanceLevel.HIGHLY_RELEVANT
        return RelevanceLevel.REFERENCE
