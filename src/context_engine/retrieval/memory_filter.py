"""MemoryFilter: a search_memory request's memory filters -> the set of memory URIs they select (issue 11).

``time_range`` (on ``occurred_at``, else ``created_at``), ``metadata_filter`` (equality / membership on top-level
metadata keys) and ``conversation_id`` are answered by the metadata store in one query over the caller's visible
memory roots: the user's own ``ctx://user/<space>/memories/`` (an admin without a user space: every user's memories,
and a conversation then matches on the ``session_id`` metadata key every message carries: the stored key keeps its
first name, schema/renames.py). The pipeline uses the set twice: as a
pre-filter of the first round (``doc_ids``: a selective filter still fills ``top_k``) and in the recheck
(``outside_memory_filter``), so nothing outside it is returned, expansion included.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.observability.trace import TraceRecorder
from context_engine.retrieval.dates import date_anchors
from context_engine.schema.context import RequestContext
from context_engine.schema.query import SearchMemoryRequest, TimeRange
from context_engine.schema.uri import ContextURI
from context_engine.storage.protocols import MetadataStore

__all__ = ["MemoryFilter"]

_MAX_KEYS = 16
#: A date named without a year ("Aug 15th") is looked for in this many past years, this year and the next.
YEARLESS_YEARS = 10
_MAX_VALUES = 100
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The integers a ``metadata_filter`` value may be: what SQLite's INTEGER and PostgreSQL's bigint hold."""


def _memory_root(ctx: RequestContext) -> ContextURI | None:
    """The caller's memory root ``ctx://user/<space>/memories/``; ``None`` without a user space (an admin then sees
    every user's memories under ``ctx://user/``, anyone else none)."""
    return ContextURI.parse(f"ctx://user/{ctx.user_space}/memories/") if ctx.user_space else None


def _invalid(field: str, message: str) -> ContextEngineError:
    return ContextEngineError(ErrorCode.QUERY_INVALID, f"{field}: {message}", {"field": field})


def _window_bounds(window: TimeRange | None) -> tuple[datetime | None, datetime | None]:
    """``time_range`` as aware UTC bounds ``(start, end)``; ``(None, None)`` without one.

    Raises:
        ContextEngineError: ``RET-4001`` (``details.field`` ``time_range``) for ``start >= end`` or a bound that
            cannot be represented in UTC (a range built without validation; the request model refuses it first).
    """
    if window is None:
        return None, None
    try:
        start, end = window.utc_bounds()
    except ValueError as err:
        raise _invalid("time_range", str(err)) from None
    if start is not None and end is not None and start >= end:
        raise _invalid("time_range", "start must be before end")
    return start, end


def _metadata_value_ok(value: Any) -> bool:
    """A ``metadata_filter`` value the stores can compare: a string without NUL, a boolean, a finite float or a
    signed 64-bit integer (SQLite and PostgreSQL hold no larger one; a bigger one used to fail inside the store, a
    500)."""
    if isinstance(value, bool):
        return True
    if isinstance(value, str):
        return "\x00" not in value  # PostgreSQL text holds no NUL: it failed there, a 500
    if isinstance(value, int):
        return INT64_MIN <= value <= INT64_MAX
    return isinstance(value, float) and math.isfinite(value)


class MemoryFilter:
    """Resolves memory filters against the metadata store.

    Args:
        metadata: answers :meth:`MetadataStore.query_files`.
    """

    def __init__(self, metadata: MetadataStore) -> None:
        self._metadata = metadata

    def select(
        self, request: SearchMemoryRequest, ctx: RequestContext, trace: TraceRecorder | None = None
    ) -> frozenset[str] | None:
        """The URIs of the caller's memories that match every filter of ``request``, or ``None`` when it has none.

        Raises:
            ContextEngineError: ``RET-4001`` for a malformed filter: a time range with ``start >= end`` (or a bound
                outside UTC's years 1..9999), metadata keys that are not printable strings of 1..64 characters (at
                most 16) or values that are not strings without NUL, finite numbers or booleans (at most 100 per key;
                integers within signed 64 bits), a conversation id that is not one path segment.
        """
        window, wanted, conversation = request.time_range, request.metadata_filter, request.conversation_id
        if window is None and not wanted and conversation is None:
            return None
        start, end = _window_bounds(window)
        equals = self._metadata_equals(wanted)
        root = _memory_root(ctx)
        if root is None and not ctx.is_admin:
            return frozenset()  # no user space: no memories are visible
        roots = [str(root)] if root is not None else ["ctx://user/"]
        conversation_dir = None
        if conversation is not None:
            if not isinstance(conversation, str) or not conversation.strip() or "/" in conversation:
                raise _invalid("conversation_id", "must be one path segment (no '/')")
            try:
                conversation_dir = ContextURI.parse("ctx://user/x/memories/sessions/").child(
                    conversation.strip(), is_dir=True
                )
            except ContextEngineError as err:
                raise _invalid("conversation_id", err.message) from err
        parent = None
        if conversation_dir is not None:
            if root is not None:  # one conversation's directory: its direct children, through the parent index
                parent, roots = str(root.child("sessions", is_dir=True).child(conversation_dir.name, is_dir=True)), []
            else:
                equals["session_id"] = conversation_dir.name  # the stored metadata key
        found = self._metadata.select_file_uris(
            ctx.account_id,
            uri_prefixes=roots,
            parent_uri=parent,
            context_type="memory",
            occurred_start=start,
            occurred_end=end,
            metadata_equals=equals or None,
        )
        selected = frozenset(uri for uri, space in found if ctx.can_see(space))
        if trace is not None:
            trace.event("planner", "memory_filter", selected=len(selected))
        return selected

    def dated(self, query: str, ctx: RequestContext, trace: TraceRecorder | None = None) -> frozenset[str] | None:
        """The URIs of the caller's memories that occurred on a date ``query`` names (:mod:`~context_engine.
        retrieval.dates`: its day, month or part of a month; ``coalesce(occurred_at, created_at)``), or ``None``
        when it names no date. A date without a year is looked for in each of the last
        :data:`YEARLESS_YEARS` years and the next. One metadata query."""
        anchors = date_anchors(query)
        if not anchors:
            return None
        root = _memory_root(ctx)
        if root is None and not ctx.is_admin:
            return frozenset()  # no user space: no memories are visible
        roots = [str(root)] if root is not None else ["ctx://user/"]
        now = datetime.now(UTC).year
        years = range(now - YEARLESS_YEARS, now + 2)
        windows = [w for a in anchors for w in a.windows(years)]
        if not windows:
            return frozenset()  # "31 April"
        found = self._metadata.select_file_uris(
            ctx.account_id, uri_prefixes=roots, context_type="memory", occurred_windows=windows
        )
        selected = frozenset(uri for uri, space in found if ctx.can_see(space))
        if trace is not None:
            trace.event("planner", "dated", dates=[a.text for a in anchors], selected=len(selected))
        return selected

    @staticmethod
    def _metadata_equals(wanted: dict[str, Any] | None) -> dict[str, Any]:
        if not wanted:
            return {}
        if not isinstance(wanted, dict) or len(wanted) > _MAX_KEYS:
            raise _invalid("metadata_filter", f"must be an object with at most {_MAX_KEYS} keys")
        out: dict[str, Any] = {}
        for key, value in wanted.items():
            # the keys a memory's metadata may have (ingest/memory.py): any printable characters, none other
            # matches (a NUL failed inside PostgreSQL, a 500); the store compares a key literally (dialects.py)
            if not isinstance(key, str) or not key or len(key) > 64 or not key.isprintable():
                raise _invalid("metadata_filter", "keys must be printable strings of 1..64 characters")
            values = value if isinstance(value, list) else [value]
            if not values or len(values) > _MAX_VALUES:
                raise _invalid("metadata_filter", f"{key!r}: give 1..{_MAX_VALUES} values")
            if not all(_metadata_value_ok(v) for v in values):
                raise _invalid(
                    "metadata_filter",
                    f"{key!r}: values must be strings (without NUL), finite numbers (integers within signed 64 bits)"
                    " or booleans",
                )
            out[key] = value
        return out
