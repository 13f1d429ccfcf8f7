"""lookup_knowledge models (DESIGN.md §7; seed 001). Pure data, no I/O.

Field names follow seed 001 where it names them (``matches``, ``matched_keywords``, ``domains``,
``single_domain_or_null``; ``evidence_blocks``, ``context_pack``, ``traces``; ``score``, ``raw_score``,
``score_label``; the ``tool_invocation`` columns ``retrieval_layer``, ``l0_match_count``, ``l1_match_count``,
``retrieval_details``, ``relevance_level``, ``dedup_reason``, ``output_preview``, ``duration_ms``, ``success``;
``evidence_refs`` with ``raw_path`` and ``text``). In seed 001 "L0"/"L1" are the *layers* of lookup_knowledge:
``l0_match_count`` counts hint-layer matches and ``l1_match_count`` semantic-layer matches (DESIGN naming note).

Scores: ``raw_score`` is what the vector backend returned, described by ``score_label`` (``similarity``: cosine
similarity in [-1, 1], higher is better). ``score`` is the compatible distance-like form, lower is better:
``1 - cosine similarity`` in [0, 2] (equal to half the squared L2 distance of the unit vectors).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from context_engine.schema.query import ResponseFormat

SemanticMode = Literal["auto", "primary", "fallback"]
ScoreLabel = Literal["similarity", "l2_distance"]
EvidenceStatus = Literal["found", "weak_evidence", "all_deduped", "no_evidence", "search_failed"]
StrongMatch = Literal["named", "identifier", "bm25_first"]
ThresholdPolicy = Literal["floor", "caller"]
HintStrength = Literal["strong", "weak"]

NO_EVIDENCE_PATH = "$.no_evidence"
"""``raw_path`` of the one evidence ref recorded when a lookup returned no evidence (seed 001 §7)."""


class RelevanceLevel(StrEnum):
    """Relevance of an evidence block (DESIGN §7.3), strongest first.

    ``PRECISE``: high similarity and the hint layer named the document; ``HIGHLY_RELEVANT``: high similarity;
    ``REFERENCE``: usable but weaker; ``DEDUPED``: already returned in this session, text withheld.
    """

    PRECISE = "PRECISE"
    HIGHLY_RELEVANT = "HIGHLY_RELEVANT"
    REFERENCE = "REFERENCE"
    DEDUPED = "DEDUPED"

    @property
    def rank(self) -> int:
        """0 for the strongest level; used to pick an invocation's overall level."""
        return _LEVEL_ORDER.index(self)


_LEVEL_ORDER = (
    RelevanceLevel.PRECISE,
    RelevanceLevel.HIGHLY_RELEVANT,
    RelevanceLevel.REFERENCE,
    RelevanceLevel.DEDUPED,
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---- request --------------------------------------------------------------------------------------------------------
class LookupRequest(_Model):
    """A lookup_knowledge call. ``None`` fields take the configured defaults (``Settings.knowledge``).

    Attributes:
        query: the alert, symptom or question (English or Chinese).
        session_id: the diagnosis session; documents already returned in it come back as ``DEDUPED``. ``None``
            disables session dedup for this call.
        top_k: evidence blocks (documents) wanted, 1..50 (``RET-4002``).
        mode: semantic-layer mode (``auto``, ``primary``, ``fallback``).
        min_similarity: an explicit similarity filter on the calibrated scale (``schema/similarity.py``), in
            [-1, 1] (``RET-4003``): candidates under it are dropped, except strong matches (named by the query,
            or first in BM25 by a clear margin). ``None`` (the default) drops nothing by similarity: the model's
            usual floor only labels the weaker candidates (``below_floor``, DESIGN §7.3).
        target_uri: restrict to this visible subtree (``RET-4031`` when not visible).
        context_token_budget: token budget of the context pack.
        response_format: ``full`` (the default here and over HTTP): :class:`LookupResult`; ``compact`` (the MCP
            default): :class:`~context_engine.schema.compact.LookupCompact` (issue 15).
        include_debug: with ``compact``, add the context pack, traces and hints (``debug``); no effect on ``full``.
    """

    query: str
    session_id: str | None = None
    top_k: int | None = None
    mode: SemanticMode | None = None
    min_similarity: float | None = None
    target_uri: str | None = None
    context_token_budget: int | None = Field(None, ge=1)
    # how the answer is shaped, not what is retrieved: left out of dumps (the audit row's input_params)
    response_format: ResponseFormat = Field("full", exclude=True)
    include_debug: bool = Field(False, exclude=True)


# ---- hint layer -----------------------------------------------------------------------------------------------------
class HintMatch(_Model):
    """A document the query names (hint only: never evidence text).

    ``strength``: ``strong`` when the query contains one of the document's identifiers (alert name, title, error
    code, metric, service name or a distinctive heading); ``weak`` when it contains most words of its title.
    """

    uri: str
    title: str
    domain: str | None
    strength: HintStrength
    keywords: list[str]
    kinds: list[str]


class HintResult(_Model):
    """``KnowledgeIndexService.analyze_query`` output (seed 001 §3).

    Attributes:
        matches: documents the query names, strong first, then by URI.
        matched_keywords: the query's keywords found in the index (strong, weak and broad ones), sorted.
        domains: domains named by the query's vocabulary and by its strong matches, sorted.
        single_domain_or_null: the domain when ``domains`` holds exactly one, else ``None`` (the filter candidate).
        domain_terms: for each domain, the query terms that named it.
        broad_keywords: keywords found in more documents than ``hint_max_doc_freq`` (hints, not matches).
        omitted_weak_matches: weak matches not listed in ``matches`` (a lookup lists at most
            ``knowledge.hint_max_weak_matches``: those among its evidence first, then by URI); they still boosted
            the ranking.
    """

    matches: list[HintMatch] = Field(default_factory=list)
    matched_keywords: list[str] = Field(default_factory=list)
    domains: list[str] = Field(default_factory=list)
    single_domain_or_null: str | None = None
    domain_terms: dict[str, list[str]] = Field(default_factory=dict)
    broad_keywords: list[str] = Field(default_factory=list)
    omitted_weak_matches: int = 0

    @property
    def strong_uris(self) -> set[str]:
        return {m.uri for m in self.matches if m.strength == "strong"}

    @property
    def weak_uris(self) -> set[str]:
        return {m.uri for m in self.matches if m.strength == "weak"}


# ---- semantic layer -------------------------------------------------------------------------------------------------
class SemanticAttempt(_Model):
    """One semantic-layer search (seed 001 §4): which backend, with which filter, why, and what came back.

    ``reason``: ``initial`` (first search), ``primary_failed`` (auto mode retried on the exact path after the
    vector index raised) or ``filtered_unusable`` (the domain-filtered result was empty or below the threshold, so
    the query was retried once without the domain filter) or ``filtered_short`` (the domain held fewer documents
    than wanted: an unfiltered search filled the rest, ranked after the domain's documents).
    """

    attempt: int
    backend: str
    mode: SemanticMode
    reason: Literal["initial", "primary_failed", "filtered_unusable", "filtered_short"]
    domain_filter: str | None = None
    filter_kind: Literal["none", "parent_uris", "doc_ids"] = "none"
    filter_size: int = 0
    ok: bool
    error_code: str | None = None
    error: str | None = None
    hit_count: int = 0
    usable_count: int = 0
    top_similarity: float | None = None
    duration_ms: float = 0.0


class ScoredChunk(_Model):
    """A level=2 candidate chunk after hydration, with its scores (see the module docstring)."""

    id: str
    doc_id: str
    chunk_index: int
    breadcrumb: str
    text: str
    category: str
    owner_space: str
    score: float
    raw_score: float
    similarity: float
    score_label: ScoreLabel = "similarity"
    hint_boost: float = 0.0
    fusion_score: float | None = None
    bm25_score: float | None = None
    rank_score: float
    backend: str


# ---- result ---------------------------------------------------------------------------------------------------------
class EvidenceBlock(_Model):
    """One document's evidence (DESIGN §7.4): its best chunk, expanded with neighbours of the same section.

    Attributes:
        doc_id: the document URI.
        title: the document title.
        breadcrumb: heading path of the best chunk (``" > "``-joined display form).
        text: the evidence text (markdown, chunks joined); ``""`` when ``DEDUPED``.
        score: distance-like, lower is better (``1 - raw_score``).
        raw_score: cosine similarity of the best chunk, higher is better.
        similarity: ``raw_score`` on the engine's calibrated scale (``schema/similarity.py``; equal to ``raw_score``
            with all-MiniLM-L6-v2): what the threshold and the relevance levels are decided on.
        score_label: ``similarity``.
        rank_score: ``similarity + hint_boost``, or with hybrid on ``fusion_score + hint_boost``; the block order.
        hint_boost: the hint layer's ranking boost (0 without a hint match).
        fusion_score: hybrid only: the best chunk's fused dense + BM25 score (``keyword.fusion``), else ``None``.
        bm25_score: hybrid only: the best chunk's BM25 score when BM25 found it, else ``None``.
        relevance_level: see :class:`RelevanceLevel`.
        strong_match: why the document is exempt from similarity thresholds (``named``: the query names its alert
            or title; ``identifier``: another exact identifier of it; ``bm25_first``: BM25 ranks it first by a clear
            margin), else ``None``.
        below_floor: its similarity is under the usual floor (returned because the defaults never drop by
            similarity; weak evidence unless ``strong_match`` says otherwise).
        chunk_indexes: the chunks joined in ``text``, ascending; ``anchor_chunk_index`` is the best one.
        matched_chunk_indexes: chunks of this document the semantic layer returned above the threshold.
        hint_keywords: the query keywords that named this document in the hint layer.
        token_estimate: CJK-aware token estimate of ``text``.
        dedup_reason: why the text is withheld (``DEDUPED`` only).
        first_invocation_id: the invocation that first returned this document in the session (``DEDUPED`` only).
    """

    doc_id: str
    title: str
    breadcrumb: str
    text: str
    score: float
    raw_score: float
    similarity: float
    score_label: ScoreLabel = "similarity"
    rank_score: float
    hint_boost: float = 0.0
    fusion_score: float | None = None
    bm25_score: float | None = None
    relevance_level: RelevanceLevel
    strong_match: StrongMatch | None = None
    below_floor: bool = False
    category: str = ""
    domain: str | None = None
    anchor_chunk_index: int
    chunk_indexes: list[int]
    matched_chunk_indexes: list[int]
    hint_keywords: list[str] = Field(default_factory=list)
    token_estimate: int = 0
    dedup_reason: str | None = None
    first_invocation_id: str | None = None


class ContextPackEntry(_Model):
    """A block in the context pack: ``index`` into ``evidence_blocks``; ``truncated`` when cut to fit."""

    index: int
    doc_id: str
    tokens: int
    truncated: bool = False


class ContextPackOmission(_Model):
    index: int
    doc_id: str
    reason: Literal["budget", "deduped"]


class ContextPack(_Model):
    """The evidence formatted for an agent's context under a token budget (DESIGN §7.4).

    ``text`` is markdown: one section per packed block, strongest first, each headed by its number, title,
    breadcrumb, relevance level and similarity. ``token_estimate`` uses ``ingest.parse.estimate_tokens``.
    """

    text: str = ""
    token_estimate: int = 0
    budget_tokens: int
    entries: list[ContextPackEntry] = Field(default_factory=list)
    omitted: list[ContextPackOmission] = Field(default_factory=list)


class LookupTraces(_Model):
    """Stage timings (milliseconds) and decisions of one lookup.

    ``threshold``: ``floor`` (the defaults: the usual ``floor`` labels, nothing is dropped by similarity) or
    ``caller`` (the request's ``min_similarity``, here ``floor``, dropped weaker candidates, counted in
    ``dropped['below_threshold']``). ``below_floor``: returned blocks under the floor.
    """

    request_id: str
    hint_ms: float = 0.0
    embed_ms: float = 0.0
    semantic_ms: float = 0.0
    hydrate_ms: float = 0.0
    post_ms: float = 0.0
    dedup_ms: float = 0.0
    pack_ms: float = 0.0
    record_ms: float = 0.0
    total_ms: float = 0.0
    mode: SemanticMode
    attempts: list[SemanticAttempt] = Field(default_factory=list)
    fallback_reason: str | None = None
    domain_filter: str | None = None
    candidate_count: int = 0
    fusion: str | None = None
    keyword_hits: int = 0
    keyword_ms: float = 0.0
    dropped: dict[str, int] = Field(default_factory=dict)
    threshold: ThresholdPolicy = "floor"
    floor: float | None = None
    below_floor: int = 0
    warnings: list[str] = Field(default_factory=list)


class LookupResult(_Model):
    """``LookupResult {evidence_blocks, context_pack, traces}`` (seed 001 §2), plus the audit handle.

    Attributes:
        invocation_id: the ``tool_invocation`` row recorded for this call (for ``verify_evidence``).
        evidence_status: ``found`` (fresh evidence that reached the usual floor, or a document the query names),
            ``weak_evidence`` (fresh blocks, but none reached the usual floor and the query names none of them:
            the nearest documents, not an answer), ``all_deduped`` (only documents the session already has),
            ``no_evidence`` (no candidate at all, or a caller's ``min_similarity`` dropped every one) or
            ``search_failed`` (every semantic attempt failed).
        relevance_level: the strongest level among the blocks, ``None`` without blocks.
        dedup_reason: set when at least one block was withheld as already retrieved in the session.
    """

    invocation_id: str
    session_id: str | None
    evidence_blocks: list[EvidenceBlock]
    context_pack: ContextPack
    traces: LookupTraces
    hints: HintResult
    evidence_status: EvidenceStatus
    relevance_level: RelevanceLevel | None = None
    dedup_reason: str | None = None


# ---- audit ----------------------------------------------------------------------------------------------------------
class EvidenceRef(_Model):
    """A precise citation source (seed 001 §7): ``raw_path`` into the LookupResult and the text found there.

    ``status``: ``evidence`` (text returned by this call), ``deduped`` (withheld; the text was returned by
    ``first_invocation_id``), ``no_evidence`` (``raw_path = $.no_evidence``: this search found nothing; it proves
    nothing about the problem itself).
    """

    raw_path: str
    text: str
    status: Literal["evidence", "deduped", "no_evidence"] = "evidence"
    doc_id: str | None = None
    first_invocation_id: str | None = None


class RetrievalDetails(BaseModel):
    """``tool_invocation.retrieval_details`` (seed 001 §7). Unknown keys of older rows are ignored on read."""

    model_config = ConfigDict(extra="ignore")

    hint: dict[str, Any] = Field(default_factory=dict)
    attempts: list[SemanticAttempt] = Field(default_factory=list)
    fallback_reason: str | None = None
    scores: list[dict[str, Any]] = Field(default_factory=list)
    domains: list[str] = Field(default_factory=list)
    evidence_status: EvidenceStatus | None = None
    dedup_reason: str | None = None
    threshold: dict[str, Any] = Field(default_factory=dict)
    deduped: list[dict[str, Any]] = Field(default_factory=list)
    evidence_blocks: list[dict[str, Any]] = Field(default_factory=list)
    context_pack: dict[str, Any] = Field(default_factory=dict)
    rerank: dict[str, Any] = Field(default_factory=lambda: {"applied": False, "trace": []})
    evidence_refs: list[EvidenceRef] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class ToolInvocation(_Model):
    """One ``tool_invocation`` row (seed 001 §7; DESIGN §7.6, §9).

    Attributes:
        invocation_id: a UUID (hex).
        retrieval_layer: ``hint+semantic`` when the hint layer matched something, else ``semantic``.
        l0_match_count: hint-layer document matches (seed 001's L0 is our hint layer).
        l1_match_count: semantic-layer candidates above the threshold (seed 001's L1 is our semantic layer).
        relevance_level: the strongest block level, or ``NONE`` without blocks.
        input_params: the request (the query text only when ``knowledge.audit_query_text``; always its hash).
        caller: role and spaces of the RequestContext.
    """

    invocation_id: str
    account_id: str
    session_id: str | None
    tool_name: str
    request_id: str
    created_at: datetime
    caller: dict[str, Any]
    input_params: dict[str, Any]
    retrieval_layer: str
    l0_match_count: int
    l1_match_count: int
    retrieval_details: RetrievalDetails
    relevance_level: str
    dedup_reason: str | None
    output_preview: str
    duration_ms: float
    success: bool
    error_code: str | None = None
    error_message: str | None = None


class InvocationSummary(_Model):
    """One line of a session trace summary."""

    invocation_id: str
    created_at: datetime
    tool_name: str
    query_preview: str
    retrieval_layer: str
    relevance_level: str
    evidence_status: str | None
    l0_match_count: int
    l1_match_count: int
    doc_ids: list[str]
    deduped_doc_ids: list[str]
    fallback_reason: str | None
    duration_ms: float
    success: bool


class SessionTraceSummary(_Model):
    """What a session's tool calls did, for a verifier (seed 001 §7 ``tool_trace_summary``)."""

    session_id: str
    invocation_count: int
    success_count: int
    failure_count: int
    tools: dict[str, int]
    relevance_levels: dict[str, int]
    evidence_statuses: dict[str, int]
    documents: list[str]
    dedup_count: int
    fallback_count: int
    total_duration_ms: float
    first_at: datetime | None
    last_at: datetime | None
    invocations: list[InvocationSummary]


class EvidenceVerification(_Model):
    """Whether a quoted excerpt is backed by a recorded evidence ref.

    Attributes:
        verified: ``True`` when the excerpt occurs in a ref's text.
        match: ``exact`` (a substring as is) or ``normalized_whitespace`` (after NFC and collapsing whitespace).
        raw_path: the ref that backs it, e.g. ``$.evidence_blocks[0]``.
        matched_invocation_id: the invocation whose ref matched (the one asked, or the earlier invocation of the
            same session that first returned a ``DEDUPED`` document).
        reason: why not, when ``verified`` is ``False`` (``invocation_not_found``, ``no_evidence``,
            ``excerpt_too_short``, ``not_found``).
    """

    invocation_id: str
    verified: bool
    match: Literal["exact", "normalized_whitespace"] | None = None
    raw_path: str | None = None
    doc_id: str | None = None
    matched_invocation_id: str | None = None
    reason: str | None = None
