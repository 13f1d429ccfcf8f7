"""The compact ``search_memory`` answer (issue 15; models in :mod:`context_engine.schema.compact`)."""

from __future__ import annotations

from context_engine.errors import ErrorCode
from context_engine.schema.compact import CompactHit, SearchMemoryCompact, SearchMemoryDebug
from context_engine.schema.query import SearchMemoryResponse

INFORMATIONAL_CODES: frozenset[str] = frozenset({ErrorCode.PLANNER_UNCLASSIFIED.value})
"""Trace warnings that report a decision, not a degradation (``RET-4221``: every context type searched alike)."""


def is_informational(warning: str) -> bool:
    """Whether a ``"<code>: <message>"`` trace warning is an informational note rather than a degradation."""
    return warning.split(":", 1)[0].strip() in INFORMATIONAL_CODES


def compact_search(response: SearchMemoryResponse, include_debug: bool = False) -> SearchMemoryCompact:
    """The compact form of a full ``search_memory`` response: hits in the same order with the same scores.

    Args:
        response: the full response.
        include_debug: add ``typed_queries``, ``seed_hits``, ``next_actions``, the trace and the thinking trace.

    Returns:
        A :class:`SearchMemoryCompact`; its ``warnings`` are the trace warnings less the informational notes.
    """
    hits = [
        CompactHit(
            uri=h.uri,
            level=h.level_hit,
            score=h.score,
            abstract=h.abstract or "",
            read_recommendation=h.read_recommendation,
        )
        for h in response.hits
    ]
    debug = (
        SearchMemoryDebug(
            typed_queries=response.typed_queries,
            seed_hits=response.seed_hits,
            next_actions=response.next_actions,
            trace=response.trace,
            thinking_trace=response.thinking_trace,
        )
        if include_debug
        else None
    )
    return SearchMemoryCompact(
        request_id=response.request_id,
        hits=hits,
        warnings=[w for w in response.trace.warnings if not is_informational(w)],
        retryable=response.retryable,
        debug=debug,
    )
