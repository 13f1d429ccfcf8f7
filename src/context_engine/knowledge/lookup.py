"""lookup_knowledge, the orchestration (DESIGN.md §7; seed 001 §2). Reads top to bottom; every stage is timed.

``validate -> hint layer -> embed (once) -> semantic layer (filter, fallback, retry) -> hydrate (metadata, ACL,
strong matches, caller threshold, hint boost) -> dedup by document, strong matches first, top_k -> expand
(neighbour / same-section chunks) -> relevance levels -> redact secrets -> session dedup -> context pack -> audit row
(+ ledger marks, one transaction) -> LookupResult``.

Evidence excerpts are redacted at read time (both layers of :mod:`context_engine.redaction`; titles and breadcrumbs
by the patterns) before anything is built from them, so the context pack, the evidence refs that ``verify_evidence``
checks and the audit row all hold the redacted text the caller received.

Threshold policy (DESIGN §7.3; docs/lookup_knowledge.md "Threshold policy"): at the defaults nothing is dropped by
similarity, so a call returns ``min(top_k, visible candidate documents)`` blocks; the model's usual floor
(``relevance.floors_for``) only labels: a block under it is ``REFERENCE`` with ``below_floor``, and a result whose
fresh blocks all sit under it (none named by the query) is ``weak_evidence``. The floor still decides whether the
domain-filtered attempt was usable. A request's own ``min_similarity`` filters, except strong matches
(``relevance.strong_match``: named by the query, or BM25's clear first), which no threshold drops; named and
identifier matches rank before the other candidates.

Degradations never raise: a failing hint layer leaves the hints empty (a warning), a failing vector index falls back
to the exact search in ``auto`` mode, and a semantic layer that fails entirely (or an embedder that fails) gives an
empty result with ``evidence_status = search_failed`` and a ``RET-5001`` warning. Invalid requests raise
``RET-4001``/``RET-4002``/``RET-4003``/``RET-4031`` after recording a failed invocation row.
"""

from __future__ import annotations

import hashlib
import math
import time
import unicodedata
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.knowledge.context_pack import ChunkText, ContextPacker
from context_engine.knowledge.hint_index import HintAnalysis, HintSnapshot, KnowledgeIndexService
from context_engine.knowledge.relevance import (
    RANKED_FIRST,
    RelevanceClassifier,
    StrongMatch,
    distance_score,
    floors_for,
    strong_match,
)
from context_engine.knowledge.retrieved_doc_tracker import RetrievedDocTracker
from context_engine.knowledge.semantic_search import SemanticSearchResult, VectorSearchService
from context_engine.knowledge.tool_invocation_recorder import ToolInvocationRecorder
from context_engine.observability.metrics import Metrics
from context_engine.redaction import Redactor, redact_patterns
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import (
    NO_EVIDENCE_PATH,
    ContextPack,
    EvidenceBlock,
    EvidenceRef,
    EvidenceStatus,
    LookupRequest,
    LookupResult,
    LookupTraces,
    RelevanceLevel,
    RetrievalDetails,
    ScoredChunk,
    SemanticMode,
    ToolInvocation,
)
from context_engine.schema.nodes import NodeRecord, VectorFilter
from context_engine.schema.text import QUERY_MAX_CHARS, check_query_text
from context_engine.schema.uri import parse_read_target
from context_engine.settings import KnowledgeSettings
from context_engine.storage.protocols import Embedder, MetadataStore

TOOL_NAME = "lookup_knowledge"
MAX_QUERY_CHARS = QUERY_MAX_CHARS  # the same bound as every read tool (schema/text.py)
MAX_SESSION_ID_CHARS = 256
CHUNKS_PER_BLOCK = 4
"""Chunks fetched per wanted evidence block: enough distinct documents after dedup by document."""


@dataclass
class _Call:
    """State of one call, filled stage by stage."""

    request: LookupRequest
    ctx: RequestContext
    started: float
    created_at: datetime
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    invocation_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    floor: float = 0.0  # the caller's min_similarity, else the model's usual floor
    caller_threshold: bool = False  # the request set min_similarity: it filters (strong matches excepted)

    def lap(self, stage: str, since: float) -> float:
        now = time.perf_counter()
        self.timings[stage] = round((now - since) * 1000.0, 3)
        return now


class LookupKnowledgeService:
    """The lookup_knowledge pipeline over its stages (each a small class with one job).

    Args:
        settings: the ``knowledge`` section.
        hints: the hint layer.
        search: the semantic layer.
        metadata: node metadata (hydration, ACL) and the chunk texts for expansion.
        embedder: embeds the query once per call.
        tracker: session dedup.
        recorder: the audit trail.
        metrics: the service's Prometheus metrics.
        redactor: redacts evidence excerpts (``None``: a default redactor).
    """

    def __init__(
        self,
        settings: KnowledgeSettings,
        *,
        hints: KnowledgeIndexService,
        search: VectorSearchService,
        metadata: MetadataStore,
        embedder: Embedder,
        tracker: RetrievedDocTracker,
        recorder: ToolInvocationRecorder,
        metrics: Metrics,
        redactor: Redactor | None = None,
    ) -> None:
        self._s = settings
        self.hints = hints
        self.search = search
        self._metadata = metadata
        self._embedder = embedder
        self.tracker = tracker
        self.recorder = recorder
        self._metrics = metrics
        if redactor is None:
            from context_engine.settings import RedactionSettings

            redactor = Redactor(RedactionSettings(), metrics)
        self._redactor = redactor
        self.floors = floors_for(settings, getattr(embedder, "model_name", None))
        self.relevance = RelevanceClassifier(settings, self.floors)
        self.packer = ContextPacker(settings)

    # ------------------------------------------------------------------------------------------------ the call
    def lookup(self, request: LookupRequest, ctx: RequestContext) -> LookupResult:
        """Run lookup_knowledge for ``request`` as ``ctx`` (DESIGN §7) and record its ``tool_invocation`` row.

        Returns:
            ``LookupResult`` with evidence blocks in rank order (``rank_score`` descending, ties by doc id), the
            context pack, traces, the hints and the invocation id.

        Raises:
            ContextEngineError: ``RET-4001`` empty/over-long query or invalid session id, ``RET-4002`` top_k
                outside 1..50, ``RET-4003`` invalid ``min_similarity``, ``RET-4031`` target not visible,
                ``WRT-4001`` malformed target URI; ``WRT-5001`` when the audit row cannot be written.
        """
        call = _Call(request, ctx, time.perf_counter(), datetime.now(UTC))
        self._metrics.lookup_requests.inc()
        try:
            top_k, mode, floor, prefix = self._validate(request, ctx)
        except ContextEngineError as err:
            self._record_failure(call, err)
            raise
        call.floor, call.caller_threshold = floor, request.min_similarity is not None
        t = time.perf_counter()

        hints = self._analyze(call, prefix)
        snapshot = hints.snapshot
        t = call.lap("hint", t)

        flt = VectorFilter(
            account_id=ctx.account_id,
            owner_spaces=ctx.visible_owner_spaces(),
            levels=[2],
            context_types=list(self._s.context_types),
            uri_prefix=prefix,
        )
        semantic = SemanticSearchResult()
        try:
            vector = self._embedder.embed_query(request.query)
        except ContextEngineError as err:
            vector = None
            semantic.failed, semantic.error_code = True, err.code.value
            call.warnings.append(
                f"{ErrorCode.VECTOR_SEARCH_FAILED.value}: the query could not be embedded ({err.message})"
            )
        t = call.lap("embed", t)

        if vector is not None:
            domain = hints.result.single_domain_or_null if self._s.hint_filter else None
            restriction = snapshot.domain_filter(domain) if domain and snapshot is not None else None
            semantic = self.search.search_similar_documents(
                vector,
                flt,
                top_k=max(self._s.candidate_chunks, CHUNKS_PER_BLOCK * top_k),
                min_similarity=floor,
                mode=mode,
                domain=domain,
                restriction=restriction,
                query=request.query if self._s.hybrid else None,
                min_docs=top_k,
            )
            call.warnings.extend(semantic.warnings)
            if semantic.failed:
                call.warnings.append(
                    f"{ErrorCode.VECTOR_SEARCH_FAILED.value}: every semantic attempt failed "
                    f"(last error {semantic.error_code}); retry later"
                )
            for a in semantic.attempts[1:]:
                self._metrics.lookup_fallback.labels(reason=a.reason).inc()
        t = call.lap("semantic", t)

        strong = self._strong_matches(semantic, hints)
        chunks, nodes, dropped = self._hydrate(semantic, hints, ctx, call, strong)
        t = call.lap("hydrate", t)

        blocks, beyond = self._blocks(chunks, nodes, snapshot, hints, ctx, top_k, strong, semantic.domain_docs)
        if beyond:
            dropped["beyond_top_k"] = beyond
        self._redact(blocks)
        t = call.lap("post", t)

        deduped = self._dedup(call, blocks)
        t = call.lap("dedup", t)

        pack = self.packer.pack(blocks, request.context_token_budget)
        t = call.lap("pack", t)

        status = _evidence_status(semantic, blocks)
        level = min((b.relevance_level for b in blocks), key=lambda lv: lv.rank, default=None)
        dedup_reason = _dedup_summary(blocks)
        traces = LookupTraces(
            request_id=call.request_id,
            hint_ms=call.timings.get("hint", 0.0),
            embed_ms=call.timings.get("embed", 0.0),
            semantic_ms=call.timings.get("semantic", 0.0),
            hydrate_ms=call.timings.get("hydrate", 0.0),
            post_ms=call.timings.get("post", 0.0),
            dedup_ms=call.timings.get("dedup", 0.0),
            pack_ms=call.timings.get("pack", 0.0),
            mode=mode,
            attempts=semantic.attempts,
            fallback_reason=semantic.fallback_reason,
            domain_filter=hints.result.single_domain_or_null if semantic.domain_filter_used else None,
            candidate_count=len(semantic.hits),
            fusion=self.search.keyword_settings.fusion if semantic.fusion is not None else None,
            keyword_hits=semantic.keyword_hits,
            keyword_ms=semantic.keyword_ms,
            dropped=dropped,
            threshold="caller" if call.caller_threshold else "floor",
            floor=round(floor, 6),
            below_floor=sum(1 for b in blocks if b.below_floor),
            warnings=call.warnings,
        )
        result = LookupResult(
            invocation_id=call.invocation_id,
            session_id=request.session_id,
            evidence_blocks=blocks,
            context_pack=pack,
            traces=traces,
            hints=hints.listed((b.doc_id for b in blocks), self._s.hint_max_weak_matches),
            evidence_status=status,
            relevance_level=level,
            dedup_reason=dedup_reason,
        )
        l1_docs = len({c.doc_id for c in chunks})
        invocation = self._invocation(call, result, chunks, l1_docs, strong, success=not semantic.failed)
        fresh = [self.tracker.doc_key(b.doc_id) for b in blocks if b.relevance_level != RelevanceLevel.DEDUPED]
        raced = self.recorder.record(
            invocation, ledger_doc_keys=fresh if request.session_id else (), ledger_ttl_s=self.tracker.ttl_s
        )
        self.tracker.maybe_purge(call.created_at)
        if raced:
            traces.warnings.append(
                f"{len(raced)} document(s) were returned concurrently by another call of this session"
            )
        call.lap("record", t)
        traces.record_ms = call.timings["record"]
        traces.total_ms = round((time.perf_counter() - call.started) * 1000.0, 3)

        self._metrics.lookup_duration.observe(traces.total_ms / 1000.0)
        for b in blocks:
            self._metrics.lookup_relevance.labels(level=b.relevance_level.value).inc()
        if deduped:
            self._metrics.lookup_dedup.inc(deduped)
        return result

    # ------------------------------------------------------------------------------------------------ stages
    def _validate(
        self, request: LookupRequest, ctx: RequestContext
    ) -> tuple[int, SemanticMode, float, str | None]:
        # the one query check of every entry point (full and compact answers, Python API, HTTP, MCP, CLI); the other
        # fields' Unicode is checked by the service before this runs (service.lookup_knowledge)
        check_query_text(request.query, max_chars=MAX_QUERY_CHARS)
        sid = request.session_id
        if sid is not None and (
            not sid.strip()
            or len(sid) > MAX_SESSION_ID_CHARS
            or any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in sid)
        ):
            raise ContextEngineError(
                ErrorCode.QUERY_INVALID,
                f"session_id must be 1-{MAX_SESSION_ID_CHARS} printable characters",
                {"field": "session_id"},
            )
        top_k = self._s.top_k if request.top_k is None else request.top_k
        if not 1 <= top_k <= 50:
            raise ContextEngineError(ErrorCode.TOP_K_OUT_OF_RANGE, f"top_k must be in 1..50, got {top_k}")
        floor = self.floors.reference if request.min_similarity is None else request.min_similarity
        if not math.isfinite(floor) or not -1.0 <= floor <= 1.0:
            raise ContextEngineError(
                ErrorCode.SCORE_THRESHOLD_INVALID,
                f"min_similarity must be a similarity in [-1, 1] (on the model's calibrated scale), got {floor}",
            )
        prefix = None
        target = parse_read_target(request.target_uri)  # RET-4001 when malformed; None for ctx:// (all visible)
        if target is not None:
            if not ctx.can_see_uri(target):
                raise ContextEngineError(ErrorCode.TARGET_FORBIDDEN, "target_uri is not visible to this caller")
            prefix = str(target.as_dir()) if target.segments else target.root
        return top_k, request.mode or self._s.mode, floor, prefix

    def _analyze(self, call: _Call, prefix: str | None) -> HintAnalysis:
        try:
            snapshot = self.hints.snapshot(call.ctx.account_id)
            return self.hints.analyze(call.request.query, call.ctx, uri_prefix=prefix, snapshot=snapshot)
        except ContextEngineError as err:
            # Hints only explain and steer; the semantic layer runs without them.
            call.warnings.append(f"hint layer unavailable ({err.code.value}: {err.message}); semantic layer only")
            return HintAnalysis()

    def _strong_matches(self, semantic: SemanticSearchResult, hints: HintAnalysis) -> dict[str, StrongMatch]:
        """Documents no similarity threshold may drop (``relevance.strong_match``), by URI.

        ``named``/``identifier``: the hint layer's strong (exact) matches. ``bm25_first``: with hybrid on, the
        document of BM25's best chunk when that chunk's score is at least ``bm25_first_ratio`` times the best score
        of any other document and its coverage at least ``bm25_first_min_coverage`` (so one incidental shared word
        is not a clear margin).
        """
        out: dict[str, StrongMatch] = {}
        for m in hints.strong:  # a weak match is never a strong one (relevance.strong_match)
            kind = strong_match(m)
            if kind is not None:
                out[m.uri] = kind
        ranked = list(semantic.bm25_docs.items())  # best first
        if ranked:
            doc, (score, coverage) = ranked[0]
            runner_up = ranked[1][1][0] if len(ranked) > 1 else 0.0
            if coverage >= self._s.bm25_first_min_coverage and score >= self._s.bm25_first_ratio * runner_up:
                out.setdefault(doc, "bm25_first")
        return out

    def _hydrate(
        self,
        semantic: SemanticSearchResult,
        hints: HintAnalysis,
        ctx: RequestContext,
        call: _Call,
        strong: dict[str, StrongMatch],
    ) -> tuple[list[ScoredChunk], dict[str, NodeRecord], dict[str, int]]:
        """Hits -> scored chunks of indexed, visible nodes, best first (ties by id). Only a caller's own
        ``min_similarity`` drops by similarity, and never a strong match's chunk (module docstring)."""
        dropped: dict[str, int] = {}
        if not semantic.hits:
            return [], {}, dropped
        nodes = self._metadata.get_nodes(ctx.account_id, {h.uri for h in semantic.hits})
        scale = self.search.scale
        out: list[ScoredChunk] = []
        for h in semantic.hits:
            node = nodes.get(h.uri)
            similarity = round(scale(h.score), 6)
            reason = None
            if node is None or node.index_status != "indexed":
                reason = "not_indexed"
            elif not ctx.can_see(node.owner_space):
                reason = "not_visible"
            elif call.caller_threshold and similarity < call.floor and h.doc_id not in strong:
                reason = "below_threshold"
            if reason:
                dropped[reason] = dropped.get(reason, 0) + 1
                continue
            boost = self.relevance.boost(hints.match(h.doc_id))
            fused = None if semantic.fusion is None else round(semantic.fusion.get(h.id, 0.0), 6)
            out.append(
                ScoredChunk(
                    id=h.id,
                    doc_id=h.doc_id,
                    chunk_index=h.chunk_index,
                    breadcrumb=h.breadcrumb,
                    text=h.text,
                    category=h.category,
                    owner_space=h.owner_space,
                    score=distance_score(h.score),
                    raw_score=h.score,
                    similarity=similarity,
                    score_label=h.score_label,
                    hint_boost=boost,
                    fusion_score=fused,
                    bm25_score=semantic.bm25.get(h.id) if semantic.fusion is not None else None,
                    rank_score=(similarity if fused is None else fused) + boost,
                    backend=semantic.backend or "",
                )
            )
        out.sort(key=lambda c: (-c.rank_score, c.id))
        return out, nodes, dropped

    def _blocks(
        self,
        chunks: list[ScoredChunk],
        nodes: dict[str, NodeRecord],
        snapshot: HintSnapshot | None,
        hints: HintAnalysis,
        ctx: RequestContext,
        top_k: int,
        strong: dict[str, StrongMatch],
        domain_docs: set[str],
    ) -> tuple[list[EvidenceBlock], int]:
        """Dedup by document (best chunk first); documents the query names (``named``/``identifier`` strong
        matches) first, then the domain filter's documents when an unfiltered fill followed them, then the rest,
        each group by ``rank_score`` (ties by doc id); keep ``top_k`` documents and expand each into a block."""
        by_doc: dict[str, list[ScoredChunk]] = {}
        for c in chunks:
            by_doc.setdefault(c.doc_id, []).append(c)
        filled = bool(domain_docs) and any(d not in domain_docs for d in by_doc)
        ranked = sorted(
            by_doc,
            key=lambda d: (
                strong.get(d) not in RANKED_FIRST,
                filled and d not in domain_docs,
                -by_doc[d][0].rank_score,
                d,
            ),
        )
        kept, beyond = ranked[:top_k], len(ranked) - min(len(ranked), top_k)
        if not kept:
            return [], beyond
        texts: dict[str, list[ChunkText]] = {}
        for v in self._metadata.get_vectors(ctx.account_id, kept):
            if v.level == 2:
                texts.setdefault(v.doc_id, []).append(ChunkText(v.chunk_index, v.breadcrumb, v.text))
        blocks: list[EvidenceBlock] = []
        for doc_id in kept:
            doc_chunks = by_doc[doc_id]
            best = doc_chunks[0]
            matched = {c.chunk_index for c in doc_chunks}
            available = texts.get(doc_id) or [ChunkText(best.chunk_index, best.breadcrumb, best.text)]
            expansion = self.packer.expand(available, best.chunk_index, matched)
            match = hints.match(doc_id)
            level = self.relevance.level(best.similarity, match)
            node = nodes.get(doc_id)
            blocks.append(
                EvidenceBlock(
                    doc_id=doc_id,
                    title=node.title if node else doc_id.rsplit("/", 1)[-1],
                    breadcrumb=best.breadcrumb,
                    text=expansion.text,
                    score=best.score,
                    raw_score=best.raw_score,
                    similarity=best.similarity,
                    score_label=best.score_label,
                    rank_score=best.rank_score,
                    hint_boost=best.hint_boost,
                    fusion_score=best.fusion_score,
                    bm25_score=best.bm25_score,
                    relevance_level=level,
                    strong_match=strong.get(doc_id),
                    below_floor=best.similarity < self.floors.reference,
                    category=best.category,
                    domain=_domain(snapshot, doc_id),
                    anchor_chunk_index=best.chunk_index,
                    chunk_indexes=expansion.chunk_indexes,
                    matched_chunk_indexes=sorted(matched),
                    hint_keywords=match.keywords if match else [],
                    token_estimate=expansion.token_estimate,
                )
            )
        return blocks, beyond

    def _redact(self, blocks: list[EvidenceBlock]) -> None:
        """Secrets out of every excerpt (both layers), title and breadcrumb (patterns), in place."""
        for b in blocks:
            b.text = self._redactor.redact(b.text).text
            b.title = redact_patterns(b.title)
            b.breadcrumb = redact_patterns(b.breadcrumb)

    def _dedup(self, call: _Call, blocks: list[EvidenceBlock]) -> int:
        """Withhold documents the session already received: ``DEDUPED`` with a reason, text emptied."""
        sid = call.request.session_id
        seen = self.tracker.already_retrieved(
            call.ctx.account_id, call.ctx.principal, sid, [b.doc_id for b in blocks], call.created_at
        )
        for b in blocks:
            entry = seen.get(b.doc_id)
            if entry is None or sid is None:
                continue
            b.relevance_level = RelevanceLevel.DEDUPED
            b.dedup_reason = self.tracker.dedup_reason(sid, entry)
            b.first_invocation_id = entry.invocation_id
            b.text = ""
            b.token_estimate = 0
        return len(seen)

    # ------------------------------------------------------------------------------------------------ audit
    def _invocation(
        self,
        call: _Call,
        result: LookupResult,
        chunks: list[ScoredChunk],
        l1_docs: int,
        strong: dict[str, StrongMatch],
        *,
        success: bool,
    ) -> ToolInvocation:
        hints = result.hints
        details = RetrievalDetails(
            hint={
                "matches": [m.model_dump() for m in hints.matches],
                "matched_keywords": hints.matched_keywords,
                "domains": hints.domains,
                "single_domain_or_null": hints.single_domain_or_null,
                "domain_terms": hints.domain_terms,
                "broad_keywords": hints.broad_keywords,
                "omitted_weak_matches": hints.omitted_weak_matches,
            },
            attempts=result.traces.attempts,
            fallback_reason=result.traces.fallback_reason,
            scores=[
                {
                    "doc_id": c.doc_id,
                    "chunk_index": c.chunk_index,
                    "score": round(c.score, 6),
                    "raw_score": round(c.raw_score, 6),
                    "similarity": c.similarity,
                    "score_label": c.score_label,
                    "hint_boost": c.hint_boost,
                    "fusion_score": c.fusion_score,
                    "bm25_score": None if c.bm25_score is None else round(c.bm25_score, 6),
                    "rank_score": round(c.rank_score, 6),
                }
                for c in chunks[: max(10, len(result.evidence_blocks))]
            ],
            domains=sorted({b.domain for b in result.evidence_blocks if b.domain}),
            evidence_status=result.evidence_status,
            dedup_reason=result.dedup_reason,
            threshold={
                "policy": result.traces.threshold,
                "floor": result.traces.floor,
                "floors": {
                    "reference": self.floors.reference,
                    "highly_relevant": self.floors.highly_relevant,
                    "precise": self.floors.precise,
                },
                "below_floor": result.traces.below_floor,
                "dropped_below_threshold": result.traces.dropped.get("below_threshold", 0),
                "strong_matches": dict(sorted(strong.items())),
            },
            deduped=[
                {"doc_id": b.doc_id, "first_invocation_id": b.first_invocation_id, "dedup_reason": b.dedup_reason}
                for b in result.evidence_blocks
                if b.relevance_level == RelevanceLevel.DEDUPED
            ],
            evidence_blocks=[
                {
                    "index": i,
                    "doc_id": b.doc_id,
                    "title": b.title,
                    "breadcrumb": b.breadcrumb,
                    "relevance_level": b.relevance_level.value,
                    "strong_match": b.strong_match,
                    "below_floor": b.below_floor,
                    "raw_score": round(b.raw_score, 6),
                    "similarity": b.similarity,
                    "score": round(b.score, 6),
                    "hint_boost": b.hint_boost,
                    "fusion_score": b.fusion_score,
                    "chunk_indexes": b.chunk_indexes,
                    "token_estimate": b.token_estimate,
                    "domain": b.domain,
                }
                for i, b in enumerate(result.evidence_blocks)
            ],
            context_pack=_pack_summary(result.context_pack),
            evidence_refs=_evidence_refs(result, call),
            warnings=list(result.traces.warnings),
        )
        query = call.request.query
        params = call.request.model_dump(exclude_none=True)
        params["query_sha256"] = hashlib.sha256(query.encode()).hexdigest()
        if not self._s.audit_query_text:
            params.pop("query", None)
        return ToolInvocation(
            invocation_id=call.invocation_id,
            account_id=call.ctx.account_id,
            session_id=call.request.session_id,
            tool_name=TOOL_NAME,
            request_id=call.request_id,
            created_at=call.created_at,
            caller={"role": call.ctx.role, "user_space": call.ctx.user_space, "agent_space": call.ctx.agent_space},
            input_params=params,
            retrieval_layer="hint+semantic" if (hints.matches or hints.domains) else "semantic",
            l0_match_count=len(hints.matches),
            l1_match_count=l1_docs,
            retrieval_details=details,
            relevance_level=result.relevance_level.value if result.relevance_level else "NONE",
            dedup_reason=result.dedup_reason,
            output_preview=_preview(result, self._s.output_preview_chars),
            duration_ms=round((time.perf_counter() - call.started) * 1000.0, 3),
            success=success,
        )

    def _record_failure(self, call: _Call, err: ContextEngineError) -> None:
        """A rejected request still leaves its audit row (success=false, the error code)."""
        request = call.request
        params = request.model_dump(exclude_none=True)
        params["query_sha256"] = hashlib.sha256((request.query or "").encode("utf-8", "surrogatepass")).hexdigest()
        if not self._s.audit_query_text:
            params.pop("query", None)
        # an invalid session id is kept in input_params only, never as the row's session
        session = None if err.details.get("field") == "session_id" else request.session_id
        invocation = ToolInvocation(
            invocation_id=call.invocation_id,
            account_id=call.ctx.account_id,
            session_id=session,
            tool_name=TOOL_NAME,
            request_id=call.request_id,
            created_at=call.created_at,
            caller={"role": call.ctx.role, "user_space": call.ctx.user_space, "agent_space": call.ctx.agent_space},
            input_params=params,
            retrieval_layer="none",
            l0_match_count=0,
            l1_match_count=0,
            retrieval_details=RetrievalDetails(
                evidence_status="no_evidence",
                evidence_refs=[
                    EvidenceRef(
                        raw_path=NO_EVIDENCE_PATH,
                        text=f"request rejected ({err.code.value}): {err.message}",
                        status="no_evidence",
                    )
                ],
            ),
            relevance_level="NONE",
            dedup_reason=None,
            output_preview=f"error {err.code.value}: {err.message}"[: self._s.output_preview_chars],
            duration_ms=round((time.perf_counter() - call.started) * 1000.0, 3),
            success=False,
            error_code=err.code.value,
            error_message=err.message[:1000],
        )
        self.recorder.record(invocation)


# ---- helpers ------------------------------------------------------------------------------------------------------
def _evidence_refs(result: LookupResult, call: _Call) -> list[EvidenceRef]:
    refs: list[EvidenceRef] = []
    for i, b in enumerate(result.evidence_blocks):
        if b.relevance_level == RelevanceLevel.DEDUPED:
            refs.append(
                EvidenceRef(
                    raw_path=f"$.evidence_blocks[{i}]",
                    text=b.dedup_reason or "",
                    status="deduped",
                    doc_id=b.doc_id,
                    first_invocation_id=b.first_invocation_id,
                )
            )
        else:
            refs.append(EvidenceRef(raw_path=f"$.evidence_blocks[{i}]", text=b.text, doc_id=b.doc_id))
    if not refs:
        why = {
            "search_failed": "the semantic search failed; this proves nothing about the knowledge base",
            "no_evidence": (
                f"every candidate was under the requested min_similarity {call.floor:.2f} for this query"
                if call.caller_threshold and result.traces.dropped.get("below_threshold")
                else "no visible document chunk was a candidate for this query"
            ),
        }.get(result.evidence_status, "no evidence")
        refs.append(EvidenceRef(raw_path=NO_EVIDENCE_PATH, text=why, status="no_evidence"))
    return refs


def _domain(snapshot: HintSnapshot | None, doc_id: str) -> str | None:
    doc = snapshot.docs.get(doc_id) if snapshot is not None else None
    return doc.domain if doc is not None else None


def _pack_summary(pack: ContextPack) -> dict[str, object]:
    return {
        "token_estimate": pack.token_estimate,
        "budget_tokens": pack.budget_tokens,
        "entries": [e.model_dump() for e in pack.entries],
        "omitted": [o.model_dump() for o in pack.omitted],
        "truncated": any(e.truncated for e in pack.entries),
    }


def _evidence_status(semantic: SemanticSearchResult, blocks: list[EvidenceBlock]) -> EvidenceStatus:
    """``search_failed``, ``no_evidence``, ``all_deduped``, ``weak_evidence`` (no fresh block reached the usual
    floor or is a strong match) or ``found``."""
    if semantic.failed:
        return "search_failed"
    if not blocks:
        return "no_evidence"
    if all(b.relevance_level == RelevanceLevel.DEDUPED for b in blocks):
        return "all_deduped"
    if all(
        b.below_floor and b.strong_match not in RANKED_FIRST
        for b in blocks
        if b.relevance_level != RelevanceLevel.DEDUPED
    ):
        return "weak_evidence"  # the nearest documents, not an answer: nothing reached the usual floor
    return "found"


def _dedup_summary(blocks: list[EvidenceBlock]) -> str | None:
    deduped = [b for b in blocks if b.relevance_level == RelevanceLevel.DEDUPED]
    if not deduped:
        return None
    if len(deduped) == 1:
        return f"{deduped[0].doc_id}: {deduped[0].dedup_reason}"
    return f"{len(deduped)} documents already returned in this session: " + ", ".join(b.doc_id for b in deduped)


def _preview(result: LookupResult, limit: int) -> str:
    if result.context_pack.text:
        text = result.context_pack.text
    elif result.evidence_status == "all_deduped":
        text = "all documents already returned in this session: " + ", ".join(b.doc_id for b in result.evidence_blocks)
    else:
        text = f"{result.evidence_status}: no evidence"
    return text[:limit]


def lookup_request(query: str, **fields: Any) -> LookupRequest:
    """A :class:`LookupRequest` from the query and keyword options (``session_id``, ``top_k``, ``mode``, ...; ``None``
    takes the configured default), as ``ContextEngineService.lookup_knowledge`` takes them.

    Raises:
        ContextEngineError: ``RET-4001`` naming the fields that do not validate.
    """
    try:
        return LookupRequest(query=query, **fields)
    except ValidationError as err:
        names = [".".join(map(str, e["loc"])) for e in err.errors()]
        raise ContextEngineError(
            ErrorCode.QUERY_INVALID, f"invalid lookup_knowledge request: {', '.join(names)}", {"fields": names}
        ) from err
