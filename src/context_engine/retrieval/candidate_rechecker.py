"""CandidateRechecker: exact, rule-based second check of the candidates (DESIGN.md §5, seed 000 §4.2
"CandidateRechecker").

It only removes candidates; it never adds one and never changes a score. Checks, in order (the first that fails is
the candidate's ``exclude_reason``):

1. ``not_visible``: the owner space is not visible to the caller (defence in depth: the tenant filter every search
   runs under already excludes it; this is the one stage that checks each candidate's visibility);
2. ``owner_space_mismatch``: the caller narrowed to one ``owner_space`` and this is another;
3. ``context_type_mismatch``: not the typed query's context type;
4. ``category_mismatch``: the typed query has categories and this category is not one of them;
5. ``outside_target_uri``: not in the ``target_uri`` subtree (segment-exact, unlike the index's string prefix);
6. ``outside_time_range``: ``updated_at`` outside ``filters.time_range`` (``[start, end)``; no timestamp fails);
7. ``missing_term:<t>``: a ``must_have_terms`` entry is absent from the abstract and the URI;
8. ``excluded_term:<t>``: an ``exclude_terms`` entry occurs in the abstract or the URI;
9. ``outside_memory_filter``: the request has memory filters (time range, metadata, session; issue 11) and this node
   is not one of the memories they select (``allowed``, resolved once per request from the metadata store).

Terms match case-insensitively after NFKC normalisation. If the rechecker itself fails it keeps every candidate the
caller may see, unchecked otherwise, and records ``RET-5002``: visibility is still checked, so the tenancy
guarantee never rests on the tenant filter alone.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime

from context_engine.errors import ErrorCode
from context_engine.observability.trace import TraceRecorder
from context_engine.retrieval.scope import within_target
from context_engine.schema.context import RequestContext
from context_engine.schema.hits import NodeHit
from context_engine.schema.query import TypedQuery

__all__ = ["CandidateRechecker"]


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _within_time_range(hit: NodeHit, tq: TypedQuery) -> bool:
    """Whether ``hit.updated_at`` is inside the query's ``time_range`` (``[start, end)``, UTC); a hit without a time
    is outside any range with a bound."""
    window = tq.filters.time_range
    if window is None or (window.start is None and window.end is None):
        return True
    if hit.updated_at is None:
        return False
    when = _utc(hit.updated_at)
    if window.start is not None and when < _utc(window.start):
        return False
    return not (window.end is not None and when >= _utc(window.end))


def _term_reason(hit: NodeHit, must: list[tuple[str, str]], never: list[tuple[str, str]]) -> str | None:
    """``missing_term:<raw>`` or ``excluded_term:<raw>`` for the first failing term over the hit's abstract and URI."""
    haystack = _norm(f"{hit.abstract}\n{hit.uri}")
    for raw, term in must:
        if term not in haystack:
            return f"missing_term:{raw}"
    for raw, term in never:
        if term in haystack:
            return f"excluded_term:{raw}"
    return None


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class CandidateRechecker:
    """Rule-based recheck; stateless, no collaborators."""

    def recheck(
        self,
        typed_query: TypedQuery,
        hits: Sequence[NodeHit],
        ctx: RequestContext,
        *,
        trace: TraceRecorder | None = None,
        allowed: frozenset[str] | None = None,
    ) -> list[NodeHit]:
        """The candidates that pass every check, in their input order, unchanged.

        ``allowed``, when given, is the set of URIs the request's memory filters select (check 9).

        Each dropped candidate is recorded in ``trace`` with its ``exclude_reason`` (``trace.drop``). Never raises:
        on an internal failure it returns the ``hits`` the caller may see, unchanged, and records ``RET-5002``.
        """
        trace = trace if trace is not None else TraceRecorder()
        try:
            kept: list[NodeHit] = []
            must = [(t, _norm(t)) for t in typed_query.hints.must_have_terms if t.strip()]
            never = [(t, _norm(t)) for t in typed_query.hints.exclude_terms if t.strip()]
            for hit in hits:
                reason = self._reason(typed_query, hit, ctx, must, never)
                if reason is None and allowed is not None and hit.uri not in allowed:
                    reason = "outside_memory_filter"
                if reason is None:
                    kept.append(hit)
                else:
                    dropped = hit.model_copy(update={"exclude_reason": reason})
                    trace.drop("recheck", dropped.uri, dropped.exclude_reason or reason)
            return kept
        except Exception as err:  # noqa: BLE001 - a degradation by design (seed 000 §7), recorded as RET-5002
            trace.warn(
                ErrorCode.RECHECK_FAILED,
                f"recheck failed ({type(err).__name__}); candidates kept unchecked",
                stage="recheck",
            )
            return [hit for hit in hits if ctx.can_see(hit.owner_space)]

    @staticmethod
    def _reason(
        tq: TypedQuery,
        hit: NodeHit,
        ctx: RequestContext,
        must: list[tuple[str, str]],
        never: list[tuple[str, str]],
    ) -> str | None:
        if not ctx.can_see(hit.owner_space):
            return "not_visible"
        if tq.filters.owner_space is not None and hit.owner_space != tq.filters.owner_space:
            return "owner_space_mismatch"
        if hit.context_type != tq.context_type:
            return "context_type_mismatch"
        if tq.categories and hit.category not in tq.categories:
            return "category_mismatch"
        if not within_target(hit.uri, tq.target_uri):
            return "outside_target_uri"
        if not _within_time_range(hit, tq):
            return "outside_time_range"
        if must or never:
            return _term_reason(hit, must, never)
        return None
