"""lookup_knowledge and search_memory on a model's calibrated similarity scale (schema/similarity.py), real model."""

from __future__ import annotations

from pathlib import Path

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.knowledge import RelevanceLevel

SAMPLE = Path(__file__).resolve().parents[2] / "src" / "context_engine" / "sample_corpus"


@pytest.mark.slow
def test_levels_and_threshold_use_the_calibrated_similarity(make_engine, tmp_path):
    plain = make_engine(home=tmp_path / "plain")
    shifted = make_engine(home=tmp_path / "shifted", embedding={"similarity_low": 0.2, "similarity_high": 1.0})
    for engine in (plain, shifted):
        engine.add_resource(SAMPLE, "ctx://resources/ops/")
    query = "Why does my pod keep restarting?"
    a = plain.lookup_knowledge(query, top_k=5, min_similarity=0.3)
    b = shifted.lookup_knowledge(query, top_k=5, min_similarity=0.3)
    for block in b.evidence_blocks:
        assert block.similarity == pytest.approx((block.raw_score - 0.2) / 0.8, abs=1e-6)
        assert block.similarity >= 0.3
        assert block.score == pytest.approx(1 - block.raw_score)  # the distance form stays on the raw cosine
        if block.relevance_level == RelevanceLevel.HIGHLY_RELEVANT:
            assert block.similarity >= 0.5
    for block in a.evidence_blocks:
        assert block.similarity == pytest.approx(block.raw_score, abs=1e-6)  # MiniLM: the identity
    # the same cosines, a stricter scale: never more evidence than the plain engine
    assert {x.doc_id for x in b.evidence_blocks} <= {x.doc_id for x in a.evidence_blocks}
    hits_a = plain.search_memory(query, top_k=5).hits
    hits_b = shifted.search_memory(query, top_k=5).hits
    assert len(hits_b) <= len(hits_a) and hits_a


def test_an_inverted_scale_is_a_config_error(make_engine, tmp_path):
    with pytest.raises(ContextEngineError) as err:
        make_engine(home=tmp_path / "bad", embedding={"similarity_low": 0.9, "similarity_high": 0.5})
    assert err.value.code == ErrorCode.CONFIG_INVALID and "similarity" in err.value.message
