"""The semantic layer of lookup_knowledge: ``VectorSearchService.search_similar_documents`` (DESIGN.md §7.2).

Searches level=2 chunks through the :class:`~context_engine.storage.protocols.VectorIndex` protocol. Modes:

* ``auto``: the configured vector index (LanceDB by default); when it raises, the exact search over the vectors
  kept in the metadata store (``ExactVectorIndex``), recorded as a second attempt with reason ``primary_failed``;
* ``primary``: the configured vector index only; ``fallback``: the exact search only.

When a domain restriction is given (from the hint layer's ``single_domain_or_null``) the first search applies it;
if that result is unusable (empty, or no chunk reaches ``min_similarity``) the same query vector is searched once
more without the domain restriction (reason ``filtered_unusable``). The query is embedded once, by the caller.
The tenant and visibility parts of the filter (account, owner spaces, level, context types, subtree) are never
dropped. Every search is one :class:`SemanticAttempt` with its backend, filter, outcome and timing. ``min_similarity``
is on the calibrated scale (:mod:`context_engine.schema.similarity`).

Hybrid (``knowledge.hybrid``): the successful dense attempt fetches ``keyword.fusion_depth`` chunks, BM25 searches
the same chunks under the same filter (for the first attempt's filter on a worker thread, beside the dense search,
which spends its time in the vector index's own threads: 11 of 75 ms a lookup at 1,000,000 nodes; a retry under
another filter searches BM25 again after it), and the two lists are fused (``keyword.fusion``: ``convex`` = the
calibrated similarity and BM25 coverage summed with the model's weights, or min-max ``weighted``, or ``rrf``;
:mod:`context_engine.retrieval.fusion`); the first ``top_k`` fused chunks are returned in fused order, each with its
cosine similarity (computed from the stored vector for a chunk only BM25 found) and ``fusion_score``. A failing BM25
search degrades to the dense list with a warning.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from context_engine.errors import ContextEngineError
from context_engine.retrieval.fusion import convex_inputs, rrf, weighted_fusion
from context_engine.schema.knowledge import SemanticAttempt, SemanticMode
from context_engine.schema.nodes import VectorFilter, VectorHit
from context_engine.schema.similarity import DEFAULT_DENSE_WEIGHT, IDENTITY, SimilarityScale
from context_engine.settings import KeywordSettings
from context_engine.storage.keyword.bm25_index import KeywordHit
from context_engine.storage.protocols import MetadataStore, VectorIndex

DomainRestriction = tuple[Literal["parent_uris", "doc_ids"], list[str]]


@dataclass
class SemanticSearchResult:
    """Hits of the attempt that was used (score descending, ties by id), plus every attempt.

    Attributes:
        hits: cosine-similarity hits (``VectorHit.score``), possibly below ``min_similarity`` (the caller drops).
        attempts: every search made, in order.
        fallback_reason: why a fallback or retry happened (``None`` when the first search was used as is).
        backend: the backend whose hits are returned (``None`` when every attempt failed).
        domain_filter_used: whether the returned hits were restricted to the domain (the first ones, when a
            ``filtered_short`` fill followed); ``domain_docs`` are the documents of the filtered attempt.
        failed: every attempt raised; ``error_code`` is the last error's code.
        fusion: hybrid only: fused score by chunk id (``None`` when the hits are the dense list as is).
        bm25: hybrid only: BM25 score by chunk id, for the chunks BM25 found.
        bm25_docs: hybrid only: ``(score, coverage)`` of each document's best BM25 chunk, over every chunk BM25
            returned (``keyword.fusion_depth`` of them), best first: what "BM25 ranks it first" is decided on.
        keyword_hits, keyword_ms: hybrid only: BM25 hits taken and the time of the BM25 search (its own, on the
            worker thread when it ran beside the dense search) + fusion.
        warnings: degradations (a failed BM25 search).
    """

    hits: list[VectorHit] = field(default_factory=list)
    attempts: list[SemanticAttempt] = field(default_factory=list)
    fallback_reasons: list[str] = field(default_factory=list)
    backend: str | None = None
    domain_filter_used: bool = False
    failed: bool = False
    error_code: str | None = None
    primary_failed: bool = False
    fusion: dict[str, float] | None = None
    bm25: dict[str, float] = field(default_factory=dict)
    bm25_docs: dict[str, tuple[float, float]] = field(default_factory=dict)
    domain_docs: set[str] = field(default_factory=set)
    keyword_hits: int = 0
    keyword_ms: float = 0.0
    warnings: list[str] = field(default_factory=list)

    @property
    def fallback_reason(self) -> str | None:
        return "; ".join(self.fallback_reasons) or None


class KeywordSearch(Protocol):
    """BM25 over the indexed chunks (``storage.keyword.BM25Index``)."""

    def search(self, query: str, top_k: int, flt: VectorFilter) -> list[KeywordHit]: ...


class VectorSearchService:
    """Runs semantic-layer searches with the mode, fallback, retry and hybrid rules of the module docstring.

    Args:
        primary: the configured vector index.
        fallback: the exact index (may be the same object when the configured backend is exact).
        scale: the embedding model's similarity scale (thresholds are compared on it).
        keyword: BM25 over the same chunks (``None``: hybrid unavailable).
        keyword_settings: the ``keyword`` section (fusion method and parameters).
        metadata: where the vectors of chunks only BM25 found are read (hybrid).
    """

    def __init__(
        self,
        primary: VectorIndex,
        fallback: VectorIndex,
        *,
        scale: SimilarityScale = IDENTITY,
        keyword: KeywordSearch | None = None,
        keyword_settings: KeywordSettings | None = None,
        metadata: MetadataStore | None = None,
    ) -> None:
        self.primary = primary
        self.fallback = fallback
        self.scale = scale
        self.keyword = keyword
        self.keyword_settings = keyword_settings or KeywordSettings()
        self._metadata = metadata
        # BM25 beside the dense search (module docstring); threads start at the first hybrid search.
        self._beside = ThreadPoolExecutor(max_workers=4, thread_name_prefix="ce-bm25")

    def close(self) -> None:
        """Stop the BM25 worker threads (a search still running finishes; none is started after)."""
        self._beside.shutdown(wait=False, cancel_futures=True)

    def search_similar_documents(
        self,
        vector: np.ndarray,
        flt: VectorFilter,
        *,
        top_k: int,
        min_similarity: float,
        mode: SemanticMode = "auto",
        domain: str | None = None,
        restriction: DomainRestriction | None = None,
        query: str | None = None,
        min_docs: int = 0,
    ) -> SemanticSearchResult:
        """Search level=2 chunks nearest to ``vector`` (fused with BM25 on ``query`` when ``query`` is given and a
        keyword index is configured).

        Args:
            vector: the query embedding, shape ``(dim,)``, unit norm.
            flt: the tenant/visibility filter (account, owner spaces, levels, context types, subtree).
            top_k: chunks per attempt.
            min_similarity: a result is usable when at least one hit reaches it (calibrated scale).
            mode: ``auto``, ``primary`` or ``fallback``.
            domain: the hint layer's single domain (recorded in the attempts).
            restriction: how to restrict ``flt`` to that domain; ``None`` searches unrestricted at once.
            query: the query text, for the BM25 side of hybrid search (``None``: dense only).
            min_docs: documents wanted; a usable domain-filtered result with fewer distinct documents is followed by
                one unfiltered search (reason ``filtered_short``) whose new hits are appended after the domain's.

        Returns:
            The hits of the last successful attempt. Never raises for a backend failure: a failed search is an
            attempt with ``ok=False`` and, when nothing succeeded, ``failed=True``.
        """
        result = SemanticSearchResult()
        hybrid = query is not None and self.keyword is not None
        fetch = max(top_k, self.keyword_settings.fusion_depth) if hybrid else top_k
        used = flt
        if restriction is not None and domain is not None:
            kind, values = restriction
            restricted = flt.model_copy(update={kind: list(values)})
            beside = self._bm25_beside(query, restricted) if hybrid else None
            hits, ok = self._run(
                result, vector, restricted, fetch, min_similarity, mode, "initial", domain, restriction
            )
            if not ok:
                return result
            usable = [h for h in hits if self.scale(h.score) >= min_similarity]
            if usable:
                result.domain_filter_used = True
                result.hits = self._fuse(result, query, vector, hits, restricted, top_k, beside) if hybrid else hits
                result.domain_docs = {h.doc_id for h in result.hits}
                if len(result.domain_docs) < min_docs:
                    # The domain holds fewer documents than wanted: fill from the unfiltered search, after them.
                    result.fallback_reasons.append(
                        f"filtered_short: domain {domain!r} gave {len(result.domain_docs)} of {min_docs} documents; "
                        "filled without it"
                    )
                    backend = result.backend
                    more, ok = self._run(result, vector, flt, fetch, min_similarity, mode, "filtered_short", None, None)
                    if ok:
                        fill = self._fuse(result, query, vector, more, flt, top_k, merge=True) if hybrid else more
                        seen = {h.id for h in result.hits}
                        result.hits = result.hits + [h for h in fill if h.id not in seen]
                    else:
                        # the filtered hits stand; the failed fill is an attempt on record
                        result.failed, result.backend = False, backend
                return result
            top = f"best {self.scale(hits[0].score):.3f} < {min_similarity:.3f}" if hits else "no hits"
            result.fallback_reasons.append(f"filtered_unusable: domain {domain!r} gave {top}; retried without it")
            hits, ok = self._run(result, vector, flt, fetch, min_similarity, mode, "filtered_unusable", None, None)
            beside = None  # BM25 under the domain filter does not fit the unfiltered search
        else:
            beside = self._bm25_beside(query, used) if hybrid else None
            hits, ok = self._run(result, vector, used, fetch, min_similarity, mode, "initial", None, None)
        if ok:
            result.hits = self._fuse(result, query, vector, hits, used, top_k, beside) if hybrid else hits
        return result

    def _bm25_beside(self, query: str | None, flt: VectorFilter) -> Future[tuple[list[KeywordHit], float]]:
        """BM25's ``fusion_depth`` best chunks for ``query`` under ``flt``, on a worker thread: (hits, ms)."""
        assert self.keyword is not None and query is not None
        keyword, depth = self.keyword, self.keyword_settings.fusion_depth

        def search() -> tuple[list[KeywordHit], float]:
            start = time.perf_counter()
            return keyword.search(query, depth, flt), _ms(start)

        return self._beside.submit(search)

    def _fuse(
        self,
        result: SemanticSearchResult,
        query: str | None,
        vector: np.ndarray,
        dense: list[VectorHit],
        flt: VectorFilter,
        top_k: int,
        beside: Future[tuple[list[KeywordHit], float]] | None = None,
        *,
        merge: bool = False,
    ) -> list[VectorHit]:
        """The dense hits fused with BM25 under the same filter, first ``top_k`` (see the module docstring).
        ``beside``: BM25 already searched under ``flt`` on a worker thread (:meth:`_bm25_beside`), else searched
        here. ``merge``: a fill after a filtered fusion: its fused and BM25 scores are added, not replacing them."""
        assert self.keyword is not None and query is not None
        ks = self.keyword_settings
        start = time.perf_counter()
        searched_ms = 0.0
        try:
            if beside is not None:
                keyword, searched_ms = beside.result()
                start = time.perf_counter()  # the search's own time is counted, not the wait for the dense side
            else:
                keyword = self.keyword.search(query, ks.fusion_depth, flt)
        except ContextEngineError as err:
            result.warnings.append(f"{err.code.value}: BM25 search failed ({err.message[:120]}); dense results only")
            return dense[:top_k]
        by_id = {h.id: h for h in dense}
        if ks.fusion == "convex":
            # Both sides absolute: resolve the true cosine of BM25's best chunks the dense list lacks, then sum.
            missing = [h for h in keyword[:top_k] if h.id not in by_id]
            by_id.update(self._with_similarity(missing, vector, flt.account_id))
            lists = convex_inputs(
                [(i, h.score) for i, h in by_id.items()], [(h.id, h.coverage) for h in keyword], self.scale
            )
            fused = weighted_fusion(lists, [_weight(ks), 1.0 - _weight(ks)], normalization="none", top_k=top_k)
        else:
            pairs = [[(h.id, h.score) for h in dense], [(h.id, h.score) for h in keyword]]
            if ks.fusion == "rrf":
                fused = rrf(pairs, k=ks.rrf_k, depth=ks.fusion_depth, top_k=top_k)
            else:
                fused = weighted_fusion(pairs, [_weight(ks), 1.0 - _weight(ks)], depth=ks.fusion_depth, top_k=top_k)
            keyword_by_id = {h.id: h for h in keyword}
            missing = [keyword_by_id[i] for i, _ in fused if i not in by_id]
            by_id.update(self._with_similarity(missing, vector, flt.account_id))
        fusion = {i: s for i, s in fused if i in by_id}
        if merge and result.fusion is not None:
            result.fusion = {**fusion, **result.fusion}
            result.bm25 = {**{h.id: h.score for h in keyword}, **result.bm25}
        else:
            result.fusion = fusion
            result.bm25 = {h.id: h.score for h in keyword}
            for h in sorted(keyword, key=lambda k: (-k.score, k.id)):
                result.bm25_docs.setdefault(h.doc_id, (h.score, h.coverage))
        result.keyword_hits += len(keyword)
        result.keyword_ms = round(result.keyword_ms + searched_ms + _ms(start), 3)
        return [by_id[i] for i, _ in fused if i in by_id]

    def _with_similarity(self, hits: list[KeywordHit], vector: np.ndarray, account_id: str) -> dict[str, VectorHit]:
        """Vector hits for chunks only BM25 found: cosine similarity from their stored vectors (metadata store)."""
        if not hits or self._metadata is None:
            return {}
        wanted = {h.id for h in hits}
        stored = {
            r.id: r for r in self._metadata.get_vectors(account_id, sorted({h.uri for h in hits})) if r.id in wanted
        }
        out: dict[str, VectorHit] = {}
        for h in hits:
            rec = stored.get(h.id)
            if rec is None:  # written to BM25 but its vector row is gone: not servable
                continue
            sim = float(np.clip(np.dot(np.asarray(rec.vector, dtype=np.float32).reshape(-1), vector), -1.0, 1.0))
            out[h.id] = VectorHit(
                id=h.id,
                score=round(sim, 6),
                uri=h.uri,
                parent_uri=h.parent_uri,
                owner_space=h.owner_space,
                context_type=h.context_type,
                category=h.category,
                level=h.level,
                doc_id=h.doc_id,
                chunk_index=h.chunk_index,
                text=h.text,
                breadcrumb=h.breadcrumb,
            )
        return out

    def _backends(self, mode: SemanticMode) -> list[VectorIndex]:
        if mode == "primary":
            return [self.primary]
        if mode == "fallback":
            return [self.fallback]
        return [self.primary] if self.fallback is self.primary else [self.primary, self.fallback]

    def _run(
        self,
        result: SemanticSearchResult,
        vector: np.ndarray,
        flt: VectorFilter,
        top_k: int,
        min_similarity: float,
        mode: SemanticMode,
        reason: Literal["initial", "filtered_unusable", "filtered_short"],
        domain: str | None,
        restriction: DomainRestriction | None,
    ) -> tuple[list[VectorHit], bool]:
        backends = self._backends(mode)
        if result.primary_failed and len(backends) > 1:
            backends = backends[1:]  # the primary already failed in this call: go straight to the exact path
        attempt_reason: Literal["initial", "primary_failed", "filtered_unusable", "filtered_short"] = reason
        for k, backend in enumerate(backends):
            start = time.perf_counter()
            attempt = SemanticAttempt(
                attempt=len(result.attempts) + 1,
                backend=backend.name,
                mode=mode,
                reason=attempt_reason,
                domain_filter=domain,
                filter_kind=restriction[0] if restriction else "none",
                filter_size=len(restriction[1]) if restriction else 0,
                ok=False,
            )
            try:
                hits = backend.search(vector, top_k, flt)
            except ContextEngineError as err:
                attempt.error_code, attempt.error = err.code.value, err.message[:300]
                attempt.duration_ms = _ms(start)
                result.attempts.append(attempt)
                result.error_code = err.code.value
                if k + 1 < len(backends):
                    result.primary_failed = True
                    result.fallback_reasons.append(
                        f"primary_failed: {backend.name} raised {err.code.value} ({err.message[:120]}); "
                        f"used {backends[k + 1].name}"
                    )
                    attempt_reason = "primary_failed"
                    continue
                result.failed = True
                result.backend = None
                return [], False
            attempt.ok = True
            attempt.hit_count = len(hits)
            attempt.usable_count = sum(1 for h in hits if self.scale(h.score) >= min_similarity)
            attempt.top_similarity = hits[0].score if hits else None
            attempt.duration_ms = _ms(start)
            result.attempts.append(attempt)
            result.backend = backend.name
            result.failed = False
            return hits, True
        return [], False


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


def _weight(ks: KeywordSettings) -> float:
    """``keyword.dense_weight`` (the service resolves ``None`` to the model's tuned weight before it gets here)."""
    return DEFAULT_DENSE_WEIGHT if ks.dense_weight is None else ks.dense_weight
