"""RetrievalAssembler: node hits -> RetrievedBlocks and next actions (DESIGN.md §5, seed 000 §4.2
"RetrievalAssembler").

Blocks are built from L0 data only (``level_hit='L0'``, ``overview`` and ``content_excerpt`` ``None``); the
assembler has no reader and no store, so it cannot read L1 or L2 (seed 000: 仅当编排层显式调用 MemoryReadService
后，才填充 overview/content_excerpt). Abstracts pass through the fast pattern redaction.

``read_recommendation`` (``s`` is the final score, thresholds from ``retrieval.assembly``):

* a directory: ``read_l1`` when it has an overview (its L1 lists what is below it), else ``none``;
* a file with content and ``s >= read_l2_min_score``: ``read_l2`` (a strong leaf hit: read the content);
* a file with an overview and ``s >= read_l1_min_score``: ``read_l1`` (a mid-score hit: check the overview first);
* otherwise ``none``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from context_engine.retrieval.query_planner import preferred_types
from context_engine.retrieval.redaction import Redactor
from context_engine.schema.context import RequestContext
from context_engine.schema.hits import NodeHit, RetrievedBlock
from context_engine.schema.query import NextActions, TypedQuery
from context_engine.settings import AssemblySettings

__all__ = ["RetrievalAssembler"]

Recommendation = Literal["none", "read_l1", "read_l2"]


class RetrievalAssembler:
    """Pure assembly (no I/O).

    Args:
        settings: the ``retrieval.assembly`` section.
        redactor: applied (patterns only) to abstracts; ``None`` leaves them as stored.
    """

    def __init__(self, settings: AssemblySettings, redactor: Redactor | None = None) -> None:
        self._settings = settings
        self._redactor = redactor

    def recommend(self, hit: NodeHit) -> Recommendation:
        """The read recommendation of one hit (see the module docstring)."""
        if hit.is_dir:
            return "read_l1" if hit.has_overview else "none"
        if hit.has_content and hit.score >= self._settings.read_l2_min_score:
            return "read_l2"
        if hit.has_overview and hit.score >= self._settings.read_l1_min_score:
            return "read_l1"
        return "none"

    def assemble(self, typed_query: TypedQuery, hits: Sequence[NodeHit], ctx: RequestContext) -> list[RetrievedBlock]:
        """One block per hit, in the given order (seed 000 §4.2).

        Args:
            typed_query: the typed query the hits came from (named in ``match_reason``).
            hits: ranked, rechecked, thresholded hits.
            ctx: the caller (unused: every hit was already checked against it; kept for the stage signature).

        Returns:
            ``RetrievedBlock`` with ``level_hit='L0'``, the final ``score`` and a ``match_reason`` that says how the
            hit was found and which score components contributed (``intent`` when its type got the intent boost).
        """
        del ctx
        out: list[RetrievedBlock] = []
        for h in hits:
            abstract = self._redactor.redact(h.abstract, library=False).text if self._redactor else h.abstract
            out.append(
                RetrievedBlock(
                    uri=h.uri,
                    level_hit="L0",
                    score=h.score,
                    category=h.category,
                    owner_space=h.owner_space,
                    abstract=abstract,
                    overview=None,
                    content_excerpt=None,
                    relations=[],
                    has_overview=h.has_overview,
                    has_content=h.has_content,
                    read_recommendation=self.recommend(h),
                    match_reason=self._reason(typed_query, h),
                    occurred_at=h.occurred_at if h.context_type == "memory" and not h.is_dir else None,
                )
            )
        return out

    @staticmethod
    def next_actions(blocks: Sequence[RetrievedBlock]) -> NextActions:
        """The URIs recommended for an explicit L1 or L2 read, in rank order (never executed here)."""
        return NextActions(
            recommended_read_l1_uris=[b.uri for b in blocks if b.read_recommendation == "read_l1"],
            recommended_read_l2_uris=[b.uri for b in blocks if b.read_recommendation == "read_l2"],
        )

    @staticmethod
    def _reason(tq: TypedQuery, h: NodeHit) -> str:
        parts = [f"vector {h.vector_score:.3f}", f"hierarchy {h.hierarchy_score:.3f}"]
        if h.category_boost:
            parts.append("category")
        if h.target_uri_boost:
            parts.append("target")
        if tq.context_type in preferred_types([tq]):
            parts.append("intent")  # the planner preferred this type: its hits got retrieval.scoring.intent_boost
        return f"{h.match_reason} [{tq.context_type}] ({', '.join(parts)})"
