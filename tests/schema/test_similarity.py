"""The per-model similarity scale and fusion weight (schema/similarity.py)."""

from __future__ import annotations

import pytest

from context_engine.providers.embedder import SentenceTransformerEmbedder
from context_engine.providers.use_embedder import USEMultilingualEmbedder
from context_engine.schema.similarity import (
    DEFAULT_CONVEX_WEIGHT,
    DEFAULT_DENSE_WEIGHT,
    IDENTITY,
    SimilarityScale,
    dense_weight_of,
    scale_of,
)
from context_engine.settings import EmbeddingSettings


def test_identity_keeps_the_cosine():
    assert IDENTITY(0.42) == 0.42 and IDENTITY(-0.3) == -0.3 and IDENTITY.is_identity


def test_affine_map_sends_low_to_0_and_high_to_1_unclipped():
    s = SimilarityScale(0.7, 0.9)
    assert s(0.7) == pytest.approx(0.0)
    assert s(0.9) == pytest.approx(1.0)
    assert s(0.8) == pytest.approx(0.5)
    assert s(0.6) == pytest.approx(-0.5)  # below low stays below 0: thresholds and levels see it as unrelated


def test_scale_needs_high_above_low():
    with pytest.raises(ValueError, match="high > low"):
        SimilarityScale(0.5, 0.5)


def test_scale_of_reads_the_model_and_applies_overrides():
    minilm = SentenceTransformerEmbedder(EmbeddingSettings())  # not loaded: only class attributes are read
    use = USEMultilingualEmbedder(EmbeddingSettings(backend="use-multilingual"))
    assert scale_of(minilm) is IDENTITY
    assert scale_of(use) == USEMultilingualEmbedder.similarity_scale and not scale_of(use).is_identity
    assert scale_of(minilm, low=0.2) == SimilarityScale(0.2, 1.0)
    assert scale_of(object()) is IDENTITY  # an embedder without a scale (an external model) keeps the cosine
    with pytest.raises(ValueError):
        scale_of(minilm, low=0.9, high=0.1)


def test_dense_weight_configured_then_model_then_default():
    use = USEMultilingualEmbedder(EmbeddingSettings(backend="use-multilingual"))
    assert dense_weight_of(use, fusion="convex") == USEMultilingualEmbedder.fusion_weights["convex"]
    assert dense_weight_of(use, fusion="weighted") == USEMultilingualEmbedder.fusion_weights["weighted"]
    assert dense_weight_of(use, 0.7, "convex") == 0.7
    assert dense_weight_of(object()) == DEFAULT_DENSE_WEIGHT
    assert dense_weight_of(object(), fusion="convex") == DEFAULT_CONVEX_WEIGHT
