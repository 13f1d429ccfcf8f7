"""``similar_search``: raw semantic search, one result per document (``POST /api/search/similar``; seed 001 §9).

No planner, no hint layer, no session dedup, no audit row: the semantic layer of lookup_knowledge
(:class:`~context_engine.knowledge.semantic_search.VectorSearchService`) asked directly, its chunks collapsed to the
best one per document. Split out of ``service.py`` (issue 28), whose ``similar_search`` delegates here.
"""

from __future__ import annotations

import time
from typing import Any

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.knowledge.semantic_search import VectorSearchService
from context_engine.redaction import Redactor
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import SemanticMode
from context_engine.schema.nodes import NodeRecord, VectorFilter
from context_engine.schema.text import QUERY_MAX_CHARS, check_query_text, require_valid_text
from context_engine.schema.uri import parse_read_target
from context_engine.schema.views import SimilarHit, SimilarSearchResult
from context_engine.settings import KnowledgeSettings
from context_engine.storage.protocols import Embedder, MetadataStore

__all__ = ["SIMILAR_MAX_QUERY_CHARS", "SimilarSearch"]

SIMILAR_MAX_QUERY_CHARS = QUERY_MAX_CHARS
"""Longest query of ``similar_search`` (characters), as search_memory's: ``RET-4001`` beyond."""


class SimilarSearch:
    """One engine's ``similar_search``. Holds no state of its own: the service builds one per call from its current
    collaborators.

    Args:
        settings: the knowledge section (default ``context_types`` of level 2, default ``mode``).
        search: the semantic layer (the configured index, exact search on error).
        embedder: embeds the query.
        metadata: the node rows (index status, visibility, titles).
        redactor: the read-time redactor of every text returned.
    """

    def __init__(
        self,
        settings: KnowledgeSettings,
        search: VectorSearchService,
        embedder: Embedder,
        metadata: MetadataStore,
        redactor: Redactor,
    ) -> None:
        self._settings = settings
        self._search = search
        self._embedder = embedder
        self._metadata = metadata
        self._redactor = redactor

    def search(
        self,
        query: str,
        ctx: RequestContext,
        *,
        top_k: int = 10,
        level: int = 2,
        mode: SemanticMode | None = None,
        context_types: list[str] | None = None,
        categories: list[str] | None = None,
        target_uri: str | None = None,
    ) -> SimilarSearchResult:
        """See :meth:`ContextEngineService.similar_search <context_engine.service.ContextEngineService>` (the
        arguments, the result, and the errors)."""
        started = time.perf_counter()
        # the one query check of every read tool: a megabyte query would hold the embedder, a NUL the tokenizers
        check_query_text(query, max_chars=SIMILAR_MAX_QUERY_CHARS)
        require_valid_text(
            {"query": query, "categories": categories, "context_types": context_types}, ErrorCode.QUERY_INVALID
        )
        if not 1 <= top_k <= 1000:
            raise ContextEngineError(ErrorCode.TOP_K_OUT_OF_RANGE, f"top_k must be in 1..1000, got {top_k}")
        if level not in (0, 2):
            raise ContextEngineError(ErrorCode.QUERY_INVALID, f"level must be 0 or 2, got {level}")
        prefix = None
        t = parse_read_target(target_uri)  # RET-4001 when malformed; None for ctx:// (everything visible)
        if t is not None:
            if not ctx.can_see_uri(t):
                raise ContextEngineError(ErrorCode.TARGET_FORBIDDEN, "target_uri is not visible to this caller")
            prefix = str(t.as_dir()) if t.segments else t.root
        if context_types is None and level == 2:
            context_types = list(self._settings.context_types)
        flt = VectorFilter(
            account_id=ctx.account_id,
            owner_spaces=ctx.visible_owner_spaces(),
            levels=[level],
            context_types=context_types or None,
            categories=categories or None,
            uri_prefix=prefix,
        )
        mode = mode or self._settings.mode
        fetch = top_k * 2 + 5 if level == 0 else min(top_k * 8 + 20, 4000)
        found = self._search.search_similar_documents(
            self._embedder.embed_query(query), flt, top_k=fetch, min_similarity=-1.0, mode=mode
        )
        warnings = []
        if found.failed:
            warnings.append(f"{ErrorCode.VECTOR_SEARCH_FAILED.value}: vector search failed ({found.error_code})")
        best: dict[str, Any] = {}
        for h in found.hits:  # score descending: the first record of a document is its best
            doc = h.doc_id or h.uri
            if doc not in best:
                best[doc] = h
        nodes = self._metadata.get_nodes(ctx.account_id, [h.uri for h in best.values()])
        results = self._hits(best, nodes, ctx, top_k)
        return SimilarSearchResult(
            results=results,
            level=level,
            mode=mode,
            backend=found.backend,
            fallback_reason=found.fallback_reason,
            warnings=warnings,
            retryable=found.failed,
            took_ms=round((time.perf_counter() - started) * 1000.0, 3),
        )

    def _hits(
        self, best: dict[str, Any], nodes: dict[str, NodeRecord], ctx: RequestContext, top_k: int
    ) -> list[SimilarHit]:
        """The best record of each document as a hit, score descending then doc id; pending, deleted and invisible
        nodes are skipped; at most ``top_k``."""
        results: list[SimilarHit] = []
        for doc, h in sorted(best.items(), key=lambda kv: (-kv[1].score, kv[0])):
            node = nodes.get(h.uri)
            if node is None or node.index_status != "indexed" or not ctx.can_see(node.owner_space):
                continue
            results.append(
                SimilarHit(
                    rank=len(results) + 1,
                    doc_id=doc,
                    uri=node.uri,
                    score=h.score,
                    title=self._stored_text(node.title),
                    category=node.category or h.category or "",
                    level=h.level,
                    chunk_index=h.chunk_index,
                    breadcrumb=self._stored_text(h.breadcrumb),  # headings: as titles, patterns (issue 27)
                    text=self._redactor.redact(h.text).text,  # read-time redaction, as every text that leaves
                )
            )
            if len(results) == top_k:
                break
        return results

    def _stored_text(self, text: str) -> str:
        # stored derived text (titles, headings): the patterns only, as the browse reads return it
        return self._redactor.redact(text, library=False).text
