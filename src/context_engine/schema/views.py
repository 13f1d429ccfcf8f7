"""What the browsing and raw-search methods of the service return: ``ls``/``tree`` nodes and ``similar_search``
results (DESIGN.md §9). Kept apart from ``service.py`` so the HTTP and MCP models import no engine code."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["NodeView", "SimilarHit", "SimilarSearchResult"]


class NodeView(BaseModel):
    """A node as ``ls``/``tree`` show it: metadata plus its L0 abstract."""

    uri: str
    is_dir: bool
    context_type: str | None
    category: str | None
    owner_space: str
    title: str
    abstract: str
    has_overview: bool
    has_content: bool
    index_status: str
    children: list[NodeView] | None = None


class SimilarHit(BaseModel):
    """One document of a raw semantic search (``similar_search``): its best-matching record.

    ``score`` is the cosine similarity of the query and that record (a ``level=2`` chunk or the ``level=0``
    abstract), in [-1, 1], higher is better (``score_label='similarity'``). ``doc_id`` is the document URI.
    """

    rank: int
    doc_id: str
    uri: str
    score: float
    score_label: str = "similarity"
    title: str
    category: str
    level: int
    chunk_index: int
    breadcrumb: str
    text: str


class SimilarSearchResult(BaseModel):
    """``similar_search`` output: documents best first (score descending, ties by doc id).

    ``backend`` is the index that answered (``None`` when every attempt failed, then ``retryable`` is true and
    ``warnings`` holds a ``RET-5001`` line); ``fallback_reason`` is set when auto mode fell back to exact search.
    """

    results: list[SimilarHit]
    level: int
    mode: str
    backend: str | None
    fallback_reason: str | None = None
    warnings: list[str] = []
    retryable: bool = False
    took_ms: float
