"""One relevance scale for every embedding model (DESIGN §5, §7.3; measured in eval/README.md).

Cosine similarities of different models live on different scales: unrelated texts sit near 0.0–0.1 with
all-MiniLM-L6-v2 but near 0.75 with multilingual-e5-small, whose scores are compressed into roughly 0.7–0.95. The
thresholds of search_memory (final score, read recommendations) and lookup_knowledge (relevance levels) were
calibrated once, on MiniLM's scale. A :class:`SimilarityScale` maps a model's cosine onto that scale with one affine
map, ``calibrated = (cosine - low) / (high - low)``, fitted per model on the runbook golden set
(``scripts/eval_runbooks.py --calibrate --embedder NAME``): ``low``/``high`` send the model's nonsense-query best
similarity and its relevant-document median to where MiniLM has them. MiniLM's own scale is the identity
(``low=0``, ``high=1``), so its calibrated similarity is its cosine.

The map changes no ranking (it is increasing); it only decides what clears a threshold.

A model also carries its tuned dense weights for dense + BM25 fusion (``fusion_weights``, by fusion method, tuned on
SciFact train and the runbook dev halves by ``bench/tune_fusion.py``): a weak dense model gets less weight.
:func:`dense_weight_of` resolves them against ``keyword.dense_weight``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_CONVEX_WEIGHT",
    "DEFAULT_DENSE_WEIGHT",
    "IDENTITY",
    "SimilarityScale",
    "dense_weight_of",
    "scale_of",
]

DEFAULT_DENSE_WEIGHT = 0.4
"""The weighted-fusion dense weight of a model without its own (all-MiniLM-L6-v2's tuned value)."""
DEFAULT_CONVEX_WEIGHT = 0.5
"""The convex-fusion dense weight of a model without its own."""


@dataclass(frozen=True, slots=True)
class SimilarityScale:
    """``calibrated = (cosine - low) / (high - low)`` (see the module docstring).

    Attributes:
        low: the cosine mapped to 0.0.
        high: the cosine mapped to 1.0 (``> low``).
    """

    low: float = 0.0
    high: float = 1.0

    def __post_init__(self) -> None:
        if not self.high > self.low:
            raise ValueError(f"similarity scale needs high > low, got low={self.low} high={self.high}")

    @property
    def is_identity(self) -> bool:
        return self.low == 0.0 and self.high == 1.0

    def __call__(self, cosine: float) -> float:
        """The calibrated similarity of ``cosine`` (unclipped: below ``low`` it is negative)."""
        if self.is_identity:
            return float(cosine)
        return (float(cosine) - self.low) / (self.high - self.low)


IDENTITY = SimilarityScale()


def scale_of(embedder: Any, low: float | None = None, high: float | None = None) -> SimilarityScale:
    """The scale of ``embedder`` (its ``similarity_scale`` attribute; identity when it has none), with
    ``low``/``high`` overriding it when given (``embedding.similarity_low`` / ``similarity_high``)."""
    base = getattr(embedder, "similarity_scale", None)
    base = base if isinstance(base, SimilarityScale) else IDENTITY
    if low is None and high is None:
        return base
    return SimilarityScale(base.low if low is None else low, base.high if high is None else high)


def dense_weight_of(embedder: Any, configured: float | None = None, fusion: str = "weighted") -> float:
    """The dense weight of a weighted (min-max) or convex fusion: ``configured`` (``keyword.dense_weight``) when set,
    else the model's tuned ``fusion_weights[fusion]``, else :data:`DEFAULT_DENSE_WEIGHT` (weighted) or
    :data:`DEFAULT_CONVEX_WEIGHT` (convex)."""
    if configured is not None:
        return float(configured)
    weights = getattr(embedder, "fusion_weights", None)
    value = weights.get(fusion) if isinstance(weights, dict) else None
    if isinstance(value, int | float):
        return float(value)
    return DEFAULT_CONVEX_WEIGHT if fusion == "convex" else DEFAULT_DENSE_WEIGHT
