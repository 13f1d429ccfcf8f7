"""Request, response and query models of ``search_memory`` and ``read_memory`` (seed 000 §3.1, §4.1; DESIGN.md §5-6).

Field names and types follow seed 000 exactly. Three additions, each documented where it is defined:
``SearchMemoryResponse.retryable`` (the "retryable" flag that seed 000 §7 asks for on ``RET-5001``),
``SearchMemoryResponse.match_quality`` (how confident the best hit is) and the typed shapes of
``filters.time_range``, ``session_archive`` and ``planner_hints``, which the seed leaves as "object".

Range checks that have an error code of their own (``top_k`` -> ``RET-4002``, ``score_threshold`` -> ``RET-4003``,
empty query -> ``RET-4001``) are made by the search pipeline, not by pydantic, so callers get the documented code.
Pure data: no I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.hits import RetrievedBlock, SeedHit
from context_engine.schema.renames import CONVERSATION, RenamedFields

ContextTypeName = Literal["memory", "skill", "resource"]
TraceLevel = Literal["basic", "detailed"]
ReadLevel = Literal["L1", "L2"]
ResponseFormat = Literal["compact", "full"]
"""``compact``: the fields an agent acts on (``schema/compact.py``); ``full``: the whole response model."""
MatchQuality = Literal["strong", "weak", "none"]
"""How well the best hit of a ``search_memory`` answer matches the query (``retrieval/match_quality.py``):
``strong`` (close in meaning and in words: read it), ``weak`` (related, the answer may not be there), ``none``
(nothing returned is about the query: the store most likely does not hold the answer). A label, never a filter."""

#: Planner order when several intents match (seed 000 §4.2: memory > skill > resource).
CONTEXT_TYPE_ORDER: tuple[ContextTypeName, ...] = ("memory", "skill", "resource")

TOP_K_MIN, TOP_K_MAX, TOP_K_DEFAULT = 1, 50, 10

MAX_JSON_DEPTH = 32
"""The deepest nesting of a read request's free-form JSON objects (``session_archive``, ``planner_hints``,
``metadata_filter``): each object or list is one level, so ``{"messages": [{"content": "x"}]}`` is 3. Deeper is
refused before anything runs (``RET-4001``); the documented shapes need at most 3, and a value nested a few hundred
levels deep could not even be written to the audit row."""


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """How deeply ``value`` nests objects (dicts) and lists: 0 for a scalar, 1 for ``{"a": 1}`` or ``[1]``.

    Iterative, so any depth is measured without recursion; it stops looking once the depth passes ``limit`` (the
    answer is then ``limit + 1``, enough to refuse it).
    """
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= limit:
        item, depth = stack.pop()
        if not isinstance(item, dict | list | tuple):
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return min(deepest, limit + 1)


def utc_instant(value: datetime | None) -> datetime | None:
    """``value`` as an aware UTC datetime (no offset: taken as UTC); ``None`` stays ``None``.

    Raises:
        ValueError: the instant lies outside what a UTC datetime can hold (years 1..9999), e.g.
            ``9999-12-31T23:59:59-14:00`` or ``0001-01-01T00:00:00+14:00``.
    """
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{value.isoformat()} cannot be represented in UTC (years 1..9999)") from None


def utc_bound(value: datetime | None, field: str) -> datetime | None:
    """:func:`utc_instant` of a read's time bound (``since``, ``until``...), refused with the read code.

    Raises:
        ContextEngineError: ``RET-4001`` with ``details.field`` when the instant cannot be represented in UTC.
    """
    try:
        return utc_instant(value)
    except ValueError as err:
        raise ContextEngineError(ErrorCode.QUERY_INVALID, f"{field}: {err}", {"field": field}) from None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TimeRange(_Model):
    """A half-open interval ``[start, end)`` (UTC when no offset is given); either bound may be absent.

    In ``QueryFilters`` / ``planner_hints`` it applies to a node's ``updated_at``, exactly, in the candidate rechecker;
    as ``SearchMemoryRequest.time_range`` to a memory's ``occurred_at`` (else ``created_at``), as a pre-filter. A
    bound that cannot be represented in UTC (``9999-12-31T23:59:59-14:00``) is a validation error. ``start < end``
    is checked where the range is used (``RET-4001``): by the memory filter, and by :class:`PlannerHints`.
    """

    start: datetime | None = None
    end: datetime | None = None

    @field_validator("start", "end")
    @classmethod
    def _representable_in_utc(cls, value: datetime | None) -> datetime | None:
        utc_instant(value)  # ValueError -> a validation error naming the bound
        return value

    def utc_bounds(self) -> tuple[datetime | None, datetime | None]:
        """``(start, end)`` as aware UTC datetimes (a bound without an offset is UTC).

        Raises:
            ValueError: a bound cannot be represented in UTC (only for a range built without validation).
        """
        return utc_instant(self.start), utc_instant(self.end)

    def is_ordered(self) -> bool:
        """Whether ``start < end`` as instants; always true when a bound is missing."""
        start, end = self.utc_bounds()
        return start is None or end is None or start < end


class QueryFilters(_Model):
    """``TypedQuery.filters`` (seed 000 §3.1).

    Attributes:
        account_id: always the caller's account, injected by the server from the RequestContext; a caller's value is
            never read (DESIGN §1).
        owner_space: an optional narrowing to one owner space (``shared``, ``user:<s>``, ``agent:<s>``); ANDed with
            the caller's visible spaces, so it can only narrow.
        time_range: optional narrowing on ``updated_at``.
    """

    account_id: str | None = None
    owner_space: str | None = None
    time_range: TimeRange | None = None


class QueryHints(_Model):
    """``TypedQuery.hints`` (seed 000 §3.1).

    Attributes:
        intent: what the planner decided and why, e.g. ``"memory"``, ``"fallback"``, ``"session:skill"``,
            ``"hint:resource"``.
        must_have_terms: every term must occur (case-insensitively) in a candidate's abstract or URI.
        exclude_terms: a candidate whose abstract or URI contains any of these is dropped.
    """

    intent: str | None = None
    must_have_terms: list[str] = Field(default_factory=list)
    exclude_terms: list[str] = Field(default_factory=list)


class TypedQuery(_Model):
    """One typed query produced by the planner (seed 000 §3.1).

    Attributes:
        text: the text that is embedded (the user's query, possibly with follow-up context from the session).
        context_type: ``memory``, ``skill`` or ``resource``; the retriever restricts to it (and to ``level == 0``).
        categories: a narrowing filter on the node category (the caller's ``categories``, or the configured default
            categories of the type when the caller gave none). Empty means no restriction.
        target_uri: a visible, existing directory (or file) whose subtree the search is restricted to, or ``None``.
        top_k: results wanted from this typed query, 1..50.
        filters: see :class:`QueryFilters`.
        hints: see :class:`QueryHints`.
    """

    text: str
    context_type: ContextTypeName
    categories: list[str] = Field(default_factory=list)
    target_uri: str | None = None
    top_k: int = TOP_K_DEFAULT
    filters: QueryFilters = Field(default_factory=QueryFilters)
    hints: QueryHints = Field(default_factory=QueryHints)


class SessionMessage(BaseModel):
    """One recent message of a session archive. Unknown keys are ignored (archives come from many clients)."""

    model_config = ConfigDict(extra="ignore")

    role: str = "user"
    content: str = ""


class SessionArchive(BaseModel):
    """The typed view of ``search_memory.session_archive`` (recent messages of the conversation).

    Accepts ``{"messages": [{"role": ..., "content": ...} | "text", ...], "summary": "..."}``; unknown keys are
    ignored. The planner reads the most recent user messages to classify a follow-up query that names no intent.
    """

    model_config = ConfigDict(extra="ignore")

    messages: list[SessionMessage] = Field(default_factory=list)
    summary: str | None = None

    @field_validator("messages", mode="before")
    @classmethod
    def _strings_are_user_messages(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"role": "user", "content": v} if isinstance(v, str) else v for v in value]
        return value


class PlannerHints(_Model):
    """The typed view of ``search_memory.planner_hints``. Unknown keys are rejected (``RET-4001``).

    Attributes:
        intent: force one context type (``memory``, ``skill``, ``resource``).
        context_types: force several context types (kept in the planner order memory > skill > resource).
        terms: extra terms appended to the embedded query text.
        must_have_terms: copied into every typed query's hints.
        exclude_terms: copied into every typed query's hints.
        time_range: copied into every typed query's ``filters.time_range`` (a narrowing on ``updated_at``).
    """

    intent: ContextTypeName | None = None
    context_types: list[ContextTypeName] = Field(default_factory=list)
    terms: list[str] = Field(default_factory=list)
    must_have_terms: list[str] = Field(default_factory=list)
    exclude_terms: list[str] = Field(default_factory=list)
    time_range: TimeRange | None = None

    @field_validator("time_range")
    @classmethod
    def _ordered(cls, value: TimeRange | None) -> TimeRange | None:
        if value is not None and not value.is_ordered():
            raise ValueError("start must be before end")
        return value


class SearchMemoryRequest(_Model, RenamedFields):
    """``search_memory`` request (seed 000 §4.1.1).

    ``top_k`` (1..50), ``score_threshold`` (finite, 0..1, compared with the final score) and ``query`` (non-empty)
    are validated by the pipeline with their own error codes. ``score_threshold=None`` uses the configured default;
    ``score_gte`` switches the comparison from ``>`` to ``>=``. ``owner_space``, ``target_uri`` and ``categories``
    only narrow what the caller may see.

    Memory filters (issue 11; any of them restricts the search to the caller's memories and pre-filters the first
    round, so a selective filter still fills ``top_k``):

    * ``time_range``: ``[start, end)`` on a memory's ``occurred_at``, or its ``created_at`` when it has none;
    * ``metadata_filter``: ``{key: value}`` (equality) or ``{key: [v1, v2]}`` (membership) on the top-level keys of
      a memory's metadata, every key must match; values are strings, numbers or booleans;
    * ``conversation_id``: only the messages of that conversation (``add_messages``; stored under
      ``.../memories/sessions/<conversation_id>/``). ``session_id`` is its deprecated name (issue 29): accepted,
      mapped, never in dumps; both with different values is a validation error.

    ``response_format`` (issue 15): ``full`` (the default here and over HTTP) answers :class:`SearchMemoryResponse`,
    ``compact`` (the MCP default) :class:`~context_engine.schema.compact.SearchMemoryCompact`; ``include_debug``
    adds the debug part to either.

    ``session_archive``, ``planner_hints`` and ``metadata_filter`` nest at most :data:`MAX_JSON_DEPTH` (32) levels;
    deeper is a validation error (``RET-4001`` over HTTP, MCP and the CLI), before the search runs.

    ``user_space`` (issue 29) narrows an admin caller to one user for this call: it searches as that user would (the
    shared resources and that user's space); a non-admin may only name its own user space (else ``RET-4031``).
    """

    renamed = CONVERSATION

    query: str
    top_k: int = TOP_K_DEFAULT
    score_threshold: float | None = None
    score_gte: bool = False
    categories: list[str] = Field(default_factory=list)
    target_uri: str | None = None
    owner_space: str | None = None
    session_archive: dict[str, Any] | None = None
    planner_hints: dict[str, Any] | None = None
    include_debug: bool = False
    trace_level: TraceLevel = "basic"
    time_range: TimeRange | None = None
    metadata_filter: dict[str, Any] | None = None
    conversation_id: str | None = None
    response_format: ResponseFormat = "full"
    user_space: str | None = None
    session_id: str | None = Field(
        None,
        deprecated="use conversation_id (the same value)",
        exclude=True,
        description="Deprecated: the same as conversation_id.",
    )

    @field_validator("session_archive", "planner_hints", "metadata_filter")
    @classmethod
    def _not_too_deep(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and json_depth(value) > MAX_JSON_DEPTH:
            raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep")
        return value


class NextActions(_Model):
    """Suggested explicit drill-downs (seed 000 §4.1.1). Never executed by ``search_memory``."""

    recommended_read_l1_uris: list[str] = Field(default_factory=list)
    recommended_read_l2_uris: list[str] = Field(default_factory=list)


class SearchTrace(_Model):
    """Per-request trace of ``search_memory`` (seed 000 §4.1.1; DESIGN §5). Milliseconds, rounded to integers.

    ``hierarchical_ms`` includes scoring; ``assemble_ms`` includes merging, deduplication and the threshold.
    ``warnings`` holds one ``"<code>: <message>"`` string per degradation; ``event_count`` counts trace events.
    """

    planner_ms: int = 0
    seed_ms: int = 0
    recheck_ms: int = 0
    hierarchical_ms: int = 0
    assemble_ms: int = 0
    warnings: list[str] = Field(default_factory=list)
    event_count: int = 0


class SearchMemoryResponse(_Model):
    """``search_memory`` response (seed 000 §4.1.1).

    Attributes:
        request_id: unique per call; echoed in logs and error envelopes.
        typed_queries: what the planner produced, in planner order.
        seed_hits: the first-round L0 hits of every typed query that passed the recheck, deduplicated by URI (best
            first). Their ``score`` is the raw cosine similarity (see :class:`SeedHit`).
        hits: the ranked result blocks (L0 data only; ``score`` is the final score in 0..1).
        next_actions: URIs recommended for an explicit ``read_memory`` at L1 or L2.
        trace: stage timings, warnings, event count.
        thinking_trace: the stage-by-stage decisions; only with ``include_debug=true`` and ``trace_level=detailed``.
        retryable: ``True`` when a degradation (``RET-5001``) means the same request may give more later. An
            addition to seed 000 §4.1.1 that seed 000 §7 asks for ("empty hits + retryable flag").
        match_quality: how confident the best hit is, ``strong`` | ``weak`` | ``none`` (:data:`MatchQuality`; the
            rule in ``retrieval/match_quality.py``); ``none`` when there are no hits. It labels, it never removes a
            hit. An addition to seed 000 §4.1.1.
    """

    request_id: str
    typed_queries: list[TypedQuery]
    seed_hits: list[SeedHit]
    hits: list[RetrievedBlock]
    next_actions: NextActions
    trace: SearchTrace
    thinking_trace: dict[str, Any] | None = None
    retryable: bool = False
    match_quality: MatchQuality = "none"


class ReadMemoryRequest(_Model):
    """``read_memory`` request (seed 000 §4.1.2).

    ``max_relations`` is validated by the reader (0..``retrieval.read.max_relations``, else ``RET-4001``) and only
    used with ``expand_relations``. ``include_debug`` is accepted as the seed defines it; a read has no thinking
    trace, so it changes nothing today.

    L2 is read one page at a time (issue 29): ``offset`` (characters of the redacted text, 0 for L1) and
    ``max_chars`` (1..``retrieval.read.l2_excerpt_max_chars``, 12,000; ``None``: that ceiling), both validated by
    the reader (``RET-4001``); the answer's ``next_offset`` is the next page's ``offset``, ``None`` at the end.
    """

    uri: str
    level: ReadLevel = "L1"
    expand_relations: bool = False
    max_relations: int = 0
    include_debug: bool = False
    offset: int = 0
    max_chars: int | None = None


class ReadTrace(_Model):
    """``read_memory`` trace (seed 000 §4.1.2), milliseconds."""

    read_ms: int = 0
    relations_ms: int = 0


class ReadMemoryResponse(_Model):
    """``read_memory`` response (seed 000 §4.1.2).

    Paging of L2 (issue 29): ``block.content_excerpt`` holds the characters ``offset`` .. ``next_offset`` of the
    redacted text, ``total_chars`` long; ``next_offset`` is ``None`` on the last page and for L1. Reading with
    ``offset=next_offset`` until it is ``None`` and joining the pages gives the whole text.
    """

    request_id: str
    block: RetrievedBlock
    trace: ReadTrace
    offset: int = 0
    next_offset: int | None = None
    total_chars: int | None = None
