"""The compact lookup answer (issue 15): each block's excerpt is exactly its text in the context pack."""

from __future__ import annotations

from context_engine.knowledge.compact import compact_lookup
from context_engine.knowledge.context_pack import ContextPacker, packed_bodies
from context_engine.schema.knowledge import (
    EvidenceBlock,
    HintResult,
    LookupResult,
    LookupTraces,
    RelevanceLevel,
)
from context_engine.settings import KnowledgeSettings


def block(i: int, text: str, level: RelevanceLevel = RelevanceLevel.REFERENCE) -> EvidenceBlock:
    return EvidenceBlock(
        doc_id=f"ctx://resources/ops/doc{i}.md",
        title=f"Doc {i}",
        breadcrumb=f"Doc {i} > Steps",
        text=text,
        score=0.5,
        raw_score=0.5,
        similarity=0.51234,
        rank_score=0.5,
        relevance_level=level,
        anchor_chunk_index=0,
        chunk_indexes=[0],
        matched_chunk_indexes=[0],
    )


def test_excerpts_are_the_packed_bodies_even_with_separators_inside():
    blocks = [
        block(0, "First step.\n\n---\n\nA horizontal rule inside the body [fsync'd]."),
        block(1, "Already returned.", RelevanceLevel.DEDUPED),
        block(2, "\n".join(f"line {n} of a long runbook section with several words" for n in range(60))),
        block(3, "Never fits: " + "word " * 400),
    ]
    blocks[1] = blocks[1].model_copy(update={"text": ""})
    pack = ContextPacker(KnowledgeSettings()).pack(blocks, budget_tokens=200)
    bodies = packed_bodies(pack, blocks)
    assert bodies[0] == blocks[0].text  # the separator inside the body did not split it
    assert 2 in bodies and bodies[2].endswith("[…]") and blocks[2].text.startswith(bodies[2].removesuffix("\n[…]"))
    assert 1 not in bodies and 3 not in bodies
    result = LookupResult(
        invocation_id="inv",
        session_id="s",
        evidence_blocks=blocks,
        context_pack=pack,
        traces=LookupTraces(request_id="r", mode="auto"),
        hints=HintResult(),
        evidence_status="found",
        relevance_level=RelevanceLevel.REFERENCE,
    )
    compact = compact_lookup(result)
    assert [e.pack for e in compact.evidence] == ["full", "deduped", "truncated", "omitted"]
    assert [e.evidence_ref for e in compact.evidence] == [f"$.evidence_blocks[{i}]" for i in range(4)]
    assert compact.evidence[0].excerpt == blocks[0].text and compact.evidence[3].excerpt == ""
    assert compact.evidence[0].similarity == 0.512 and compact.debug is None
    assert "debug" not in compact.model_dump() and "warnings" not in compact.model_dump()
    assert compact_lookup(result, include_debug=True).debug.context_pack == pack
