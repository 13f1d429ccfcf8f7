"""The compact ``search_memory`` answer (issue 15; models in :mod:`context_engine.schema.compact`, imported by
:func:`compact_search`: the CLI's ``search`` table needs only :func:`is_informational`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from context_engine.errors import ErrorCode

if TYPE_CHECKING:
    from context_engine.schema.compact import SearchMemoryCompact
    from context_engine.schema.query import SearchMemoryResponse

INFORMATIONAL_CODES: frozenset[str] = frozenset({ErrorCode.PLANNER_UNCLASSIFIED.value})
"""Trace warnings that report a decision, not a degradation (``RET-4221``: every context type searched alike)."""


def is_informational(warning: str) -> bool:
    """Whether a ``"<code>: <message>"`` trace warning is an informational note rather than a degradation."""
    return warning.split(":", 1)[0].strip() in INFORMATIONAL_CODES


def shorten(text: str, max_chars: int) -> str:
    """``text`` when it has at most ``max_chars`` characters, else its longest prefix that ends at a word (or, for
    text without spaces such as Chinese, at a character) followed by ``…``, ``max_chars`` characters at most."""
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    space = cut.rfind(" ")
    if space > max_chars // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def compact_search(
    response: SearchMemoryResponse, include_debug: bool = False, abstract_max_chars: int | None = None
) -> SearchMemoryCompact:
    """The compact form of a full ``search_memory`` response: hits in the same order with the same scores.

    Args:
        response: the full response.
        include_debug: add ``typed_queries``, ``seed_hits``, ``next_actions``, the trace and the thinking trace.
        abstract_max_chars: cut each hit's L0 text to this many characters (:func:`shorten`); ``None`` keeps it.

    Returns:
        A :class:`SearchMemoryCompact` with the response's ``match_quality``; its ``warnings`` are the trace
        warnings less the informational notes.
    """
    from context_engine.schema.compact import SCORE_DECIMALS, CompactHit, SearchMemoryCompact, SearchMemoryDebug

    hits = [
        CompactHit(
            uri=h.uri,
            level=h.level_hit,
            score=round(h.score, SCORE_DECIMALS),
            abstract=shorten(h.abstract or "", abstract_max_chars) if abstract_max_chars else (h.abstract or ""),
            read_recommendation=h.read_recommendation,
            occurred_at=h.occurred_at,
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
        match_quality=response.match_quality,
        hits=hits,
        warnings=[w for w in response.trace.warnings if not is_informational(w)],
        retryable=response.retryable,
        debug=debug,
    )
