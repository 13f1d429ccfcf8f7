"""The compact ``lookup_knowledge`` answer (issue 15; models in :mod:`context_engine.schema.compact`)."""

from __future__ import annotations

from context_engine.knowledge.context_pack import packed_bodies
from context_engine.schema.compact import SCORE_DECIMALS, CompactEvidence, LookupCompact, LookupDebug, PackStatus
from context_engine.schema.knowledge import LookupResult, RelevanceLevel


def compact_lookup(result: LookupResult, include_debug: bool = False) -> LookupCompact:
    """The compact form of a full ``lookup_knowledge`` result: the evidence blocks in the same order, each with the
    text it has in the context pack (so the answer stays within the pack's token budget plus per-block fields).

    Args:
        result: the full result.
        include_debug: add the context pack, the traces and the hint-layer result.
    """
    bodies = packed_bodies(result.context_pack, result.evidence_blocks)
    truncated = {e.index for e in result.context_pack.entries if e.truncated}
    evidence = []
    for i, b in enumerate(result.evidence_blocks):
        status: PackStatus
        if b.relevance_level == RelevanceLevel.DEDUPED:
            status = "deduped"
        elif i not in bodies:
            status = "omitted"
        else:
            status = "truncated" if i in truncated else "full"
        evidence.append(
            CompactEvidence(
                uri=b.doc_id,
                title=b.title,
                section=b.breadcrumb,
                relevance_level=b.relevance_level,
                similarity=round(b.similarity, SCORE_DECIMALS),
                excerpt=bodies.get(i, ""),
                pack=status,
                evidence_ref=f"$.evidence_blocks[{i}]",
            )
        )
    debug = (
        LookupDebug(context_pack=result.context_pack, traces=result.traces, hints=result.hints)
        if include_debug
        else None
    )
    return LookupCompact(
        invocation_id=result.invocation_id,
        session_id=result.session_id,
        evidence_status=result.evidence_status,
        relevance_level=result.relevance_level,
        dedup_reason=result.dedup_reason,
        evidence=evidence,
        warnings=list(result.traces.warnings),
        debug=debug,
    )
