"""Compact answers of ``search_memory`` and ``lookup_knowledge`` for agents (issue 15). Pure data, no I/O.

An agent pays for every byte of a tool answer in tokens. ``response_format="compact"`` (the MCP default; HTTP and
the Python API default to ``"full"`` for compatibility) returns only what an agent acts on; the full response stays
available with ``response_format="full"``. What is dropped goes, with ``include_debug=true``, into ``debug``:

* search_memory: ``match_quality`` (how confident the best hit is; always present), per hit the URI, level,
  final score, L0 text and read recommendation (:class:`CompactHit`); the degradation warnings; ``typed_queries``,
  ``seed_hits``, ``next_actions``, the trace
  (with its informational notes such as ``RET-4221``) and the thinking trace only in ``debug``.
* lookup_knowledge: per evidence block the document URI, title, section, relevance level, calibrated similarity,
  the excerpt as packed under the token budget and the ``raw_path`` of its evidence ref
  (:class:`CompactEvidence`); the invocation id (for ``verify_evidence``); hints and traces only in ``debug``.

The conversions from the full responses are :func:`context_engine.retrieval.compact.compact_search` and
:func:`context_engine.knowledge.compact.compact_lookup`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from context_engine.schema.hits import SeedHit
from context_engine.schema.knowledge import (
    ContextPack,
    EvidenceStatus,
    HintResult,
    LookupTraces,
    RelevanceLevel,
)
from context_engine.schema.query import MatchQuality, NextActions, ResponseFormat, SearchTrace, TypedQuery

__all__ = [
    "BrowseLevel",
    "BrowseNode",
    "CompactEvidence",
    "CompactHit",
    "LookupCompact",
    "LookupDebug",
    "LsCompact",
    "ResponseFormat",
    "SCORE_DECIMALS",
    "SearchMemoryCompact",
    "SearchMemoryDebug",
    "TreeCompact",
]

SCORE_DECIMALS = 3
"""Compact scores are rounded: the rank is the list order, and more digits are tokens that change no decision."""

PackStatus = Literal["full", "truncated", "omitted", "deduped"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---- search_memory --------------------------------------------------------------------------------------------------
class CompactHit(_Model):
    """One ``search_memory`` hit, compact.

    Attributes:
        uri: the node URI (give it to ``read_memory``).
        level: the level the hit was found at (always ``L0`` for search).
        score: the final score in 0..1, higher is better (``RetrievedBlock.score`` rounded to 3 decimals; the hits
            are in rank order).
        abstract: the L0 text, cut at a word with ``…`` past ``retrieval.compact_abstract_max_chars`` (110).
        read_recommendation: ``read_l1``, ``read_l2`` or ``none`` (the explicit read worth its cost next).
        occurred_at: when a memory happened (``RetrievedBlock.occurred_at``, UTC); left out when it has none.
    """

    uri: str
    level: Literal["L0", "L1", "L2"]
    score: float
    abstract: str
    read_recommendation: Literal["none", "read_l1", "read_l2"]
    occurred_at: datetime | None = Field(None, exclude_if=lambda v: v is None)


class SearchMemoryDebug(_Model):
    """What the compact answer leaves out, returned only with ``include_debug=true`` (see
    :class:`~context_engine.schema.query.SearchMemoryResponse` for each field)."""

    typed_queries: list[TypedQuery]
    seed_hits: list[SeedHit]
    next_actions: NextActions
    trace: SearchTrace
    thinking_trace: dict[str, Any] | None = None


class SearchMemoryCompact(_Model):
    """``search_memory`` with ``response_format="compact"``.

    Attributes:
        request_id: unique per call.
        match_quality: ``strong``, ``weak`` or ``none``: how confident the best hit is (the full response's
            ``match_quality``). Always present, whatever its value: ``none`` tells the agent that the store most
            likely does not hold the answer.
        hits: the ranked hits, best first (the same order and scores as the full response's ``hits``).
        warnings: the degradations (``"<code>: <message>"``) of the trace; informational notes (``RET-4221``: no
            context type preferred) only in ``debug.trace.warnings``.
        retryable: ``True`` when a degradation (``RET-5001``) means the same request may give more later.
        debug: ``None`` unless the request had ``include_debug=true``.

    In JSON, ``warnings`` is left out when empty, ``retryable`` when false and ``debug`` when null (their
    defaults): every byte of an agent's answer is paid in tokens.
    """

    request_id: str
    match_quality: MatchQuality
    hits: list[CompactHit]
    warnings: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    retryable: bool = Field(False, exclude_if=lambda v: not v)
    debug: SearchMemoryDebug | None = Field(None, exclude_if=lambda v: v is None)


# ---- lookup_knowledge -----------------------------------------------------------------------------------------------
class CompactEvidence(_Model):
    """One evidence block of ``lookup_knowledge``, compact.

    Attributes:
        uri: the document URI (``EvidenceBlock.doc_id``).
        title: the document title.
        section: the heading path of the best chunk (``" > "``-joined).
        relevance_level: ``PRECISE``, ``HIGHLY_RELEVANT``, ``REFERENCE`` or ``DEDUPED``.
        similarity: the best chunk's similarity on the calibrated scale, higher is better (``EvidenceBlock.similarity``
            rounded to 3 decimals).
        excerpt: the block's text as it went into the context pack (cut at a line boundary when ``pack`` is
            ``truncated``); ``""`` when ``pack`` is ``omitted`` (over the token budget) or ``deduped`` (already
            returned in the session).
        pack: how the block went into the context pack.
        evidence_ref: the ``raw_path`` of its evidence ref (``$.evidence_blocks[i]``): ``verify_evidence`` checks a
            quote of the excerpt against it.
    """

    uri: str
    title: str
    section: str
    relevance_level: RelevanceLevel
    similarity: float
    excerpt: str
    pack: PackStatus
    evidence_ref: str


class LookupDebug(_Model):
    """What the compact lookup answer leaves out (see :class:`~context_engine.schema.knowledge.LookupResult`)."""

    context_pack: ContextPack
    traces: LookupTraces
    hints: HintResult


class LookupCompact(_Model):
    """``lookup_knowledge`` with ``response_format="compact"``.

    Attributes:
        invocation_id: the ``tool_invocation`` row of this call (for ``verify_evidence``).
        session_id: the diagnosis session, or ``None``.
        evidence_status: see :class:`~context_engine.schema.knowledge.LookupResult`.
        relevance_level: the strongest block level, ``None`` without blocks.
        dedup_reason: set when a block was withheld as already returned in the session.
        evidence: the blocks in rank order (the full response's ``evidence_blocks``).
        warnings: the lookup's degradation warnings (``traces.warnings``).
        debug: ``None`` unless the request had ``include_debug=true``.

    In JSON, ``warnings`` is left out when empty and ``debug`` when null.
    """

    invocation_id: str
    session_id: str | None
    evidence_status: EvidenceStatus
    relevance_level: RelevanceLevel | None = None
    dedup_reason: str | None = None
    evidence: list[CompactEvidence]
    warnings: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    debug: LookupDebug | None = Field(None, exclude_if=lambda v: v is None)


# ---- browsing: ls / tree over MCP -----------------------------------------------------------------------------------
BrowseLevel = Literal["L0", "L1"]


class BrowseNode(_Model):
    """One node of a compact ``ls`` or ``tree`` answer (issue 29: the hierarchy, walked by an agent).

    Attributes:
        uri: the node's URI (a directory's ends with ``/``); what ``read_memory`` and ``ls`` take.
        text: its L0 abstract (in ``tree`` cut at a word past ``retrieval.compact_abstract_max_chars``), or with
            ``ls(level="L1")`` its L1 overview, whole.
        level: ``"L1"`` when ``text`` is the overview; left out for L0 (also when L1 was asked and the node has none).
        levels: what ``read_memory`` can read of it beyond L0 (``L1``, ``L2``); left out when nothing.
        children: ``tree`` only: the nodes below, in URI order; left out for a node that was not expanded (a file,
            or a directory at ``max_depth``); ``[]`` for an empty directory.
        more: ``tree`` only: children left out because the answer reached ``max_nodes``; left out when 0.
    """

    uri: str
    text: str
    level: Literal["L1"] | None = Field(None, exclude_if=lambda v: v is None)
    levels: list[Literal["L1", "L2"]] = Field(default_factory=list, exclude_if=lambda v: not v)
    children: list[BrowseNode] | None = Field(None, exclude_if=lambda v: v is None)
    more: int = Field(0, exclude_if=lambda v: not v)


class LsCompact(_Model):
    """``ls`` over MCP: one page of a directory's children (of a file URI: that node alone), in URI order.

    Attributes:
        uri: the URI asked.
        nodes: the page's nodes.
        total: how many children the directory has (visible to the caller).
        next_offset: the next page's ``offset``; left out on the last page.
    """

    uri: str
    nodes: list[BrowseNode]
    total: int
    next_offset: int | None = Field(None, exclude_if=lambda v: v is None)


class TreeCompact(_Model):
    """``tree`` over MCP: the subtree at ``uri``, breadth-first up to ``max_nodes`` nodes.

    Attributes:
        uri: the URI asked.
        root: the subtree; ``null`` when the scope root is still empty.
        truncated: true when ``max_nodes`` left nodes out (each cut directory says how many in ``more``).
    """

    uri: str
    root: BrowseNode | None
    truncated: bool = Field(False, exclude_if=lambda v: not v)
