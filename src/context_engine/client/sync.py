"""The synchronous HTTP client (:class:`Client`). Its methods mirror :class:`~context_engine.client.aio.AsyncClient`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Self

import httpx
from pydantic import BaseModel
from tenacity import Retrying

from context_engine.client.core import (
    DEFAULT_BASE_URL,
    build_payload,
    check_settings,
    client_headers,
    decode,
    messages_first,
    request_args,
    retry_policy,
    transport_error,
)
from context_engine.client.endpoints import ENDPOINTS

if TYPE_CHECKING:
    from context_engine.api.models import (
        HealthResponse,
        LsResponse,
        MemoryItemIn,
        MessageIn,
        ReadyResponse,
        StatsResponse,
        ToolInvocationList,
        TreeResponse,
    )
    from context_engine.schema.compact import LookupCompact, SearchMemoryCompact
    from context_engine.schema.knowledge import EvidenceVerification, LookupResult, SessionTraceSummary, ToolInvocation
    from context_engine.schema.memory import AddMemoryResult, MemoryDetail, MemoryListPage, MemoryWriteResult
    from context_engine.schema.memory_events import MemoryEventPage
    from context_engine.schema.nodes import IngestReport
    from context_engine.schema.query import ReadMemoryResponse, SearchMemoryResponse


class Client:
    """A typed client of the ContextEngine HTTP API (``context-engine serve``), on ``httpx``.

    Every method sends one request (repeated only as :mod:`context_engine.client.core` describes) and returns the
    server's own response model; an error answer raises :class:`~context_engine.client.ApiError` (a
    :class:`~context_engine.errors.ContextEngineError`) with the server's code, message, details and request id.
    Keyword arguments named ``**fields`` are the other fields of the route's request model, validated locally
    (an unknown field raises ``RET-4001`` or ``WRT-4002`` before anything is sent).

    Args:
        base_url: the server, e.g. ``http://127.0.0.1:8420``.
        api_key: a key from ``context-engine keys create``, sent as ``Authorization: Bearer <key>``; ``None`` only
            works where the server allows anonymous loopback access.
        timeout_s: per-request timeout, seconds.
        retries: repeats of a request the server did not act on (connection refused, ``503 API-5031``), 0..10.
        backoff_s: first wait between repeats, seconds (exponential with jitter).
        transport: an ``httpx`` transport to use instead of the default (proxies, tests).

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        *,
        timeout_s: float = 30.0,
        retries: int = 2,
        backoff_s: float = 0.2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        check_settings(retries, timeout_s, backoff_s)
        self.base_url = base_url
        self._retry = retry_policy(retries, backoff_s)
        self._http = httpx.Client(
            base_url=base_url, headers=client_headers(api_key), timeout=timeout_s, transport=transport
        )

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"  # never the key

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _call(self, name: str, data: dict[str, Any] | BaseModel | None) -> Any:
        """The answer of route ``name`` as its response model (``ENDPOINTS[name].response``, imported on first use;
        the calling method's return type, which ``tests/client/test_openapi_drift.py`` checks against the table)."""
        endpoint = ENDPOINTS[name]
        args = request_args(endpoint, build_payload(name, data or {}))
        model = endpoint.response

        def once() -> BaseModel:
            try:
                response = self._http.request(**args)
            except httpx.HTTPError as err:
                raise transport_error(endpoint, err) from err
            return decode(endpoint, response, model)

        return Retrying(**self._retry)(once)

    # ---- operations -------------------------------------------------------------------------------------------------
    def health(self) -> HealthResponse:
        """``GET /healthz``: the process answers."""
        return self._call("health", None)

    def ready(self) -> ReadyResponse:
        """``GET /readyz``: the engine is open (``503 API-5031`` while starting, retried)."""
        return self._call("ready", None)

    # ---- retrieval --------------------------------------------------------------------------------------------------
    def search_memory(self, query: str, **fields: Any) -> SearchMemoryResponse:
        """``POST /api/v1/search_memory``: ranked L0 hits (``hits``, best first, ``score`` in 0..1) and the URIs worth
        reading (``next_actions``). ``fields``: ``top_k`` (1..50, else ``RET-4002``), ``target_uri``, ``categories``,
        ``score_threshold``, ``conversation_id``, ``time_range``, ``metadata_filter``... (``SearchMemoryRequest``;
        ``session_id``, the deprecated name of ``conversation_id``, warns).
        Always the full answer (``response_format="full"``; ``"compact"`` raises ``RET-4001``, nothing sent):
        :meth:`search_memory_compact` answers the compact form."""
        return self._call("search_memory", {"query": query, **fields})

    def search_memory_compact(self, query: str, **fields: Any) -> SearchMemoryCompact:
        """``POST /api/v1/search_memory`` with ``response_format="compact"``: the same search, answered for agents:
        per hit ``uri``, ``level``, ``score`` (3 decimals), ``abstract`` and ``read_recommendation``, best first;
        ``warnings`` and ``retryable``; with ``include_debug=True`` what the compact form leaves out (``debug``:
        ``typed_queries``, ``seed_hits``, ``next_actions``, ``trace``). ``fields``: as :meth:`search_memory`."""
        return self._call("search_memory_compact", {"query": query, **fields})

    def read_memory(
        self,
        uri: str,
        level: Literal["L1", "L2"] = "L1",
        *,
        offset: int = 0,
        max_chars: int | None = None,
        **fields: Any,
    ) -> ReadMemoryResponse:
        """``POST /api/v1/read_memory``: the L1 overview (``block.overview``) or one page of the redacted L2 content
        (``block.content_excerpt``) of one URI. L2 pages: ``offset`` (the previous answer's ``next_offset``) and
        ``max_chars`` (1..12,000; ``None``: 12,000); the answer's ``next_offset`` is ``None`` on the last page.
        A URI the caller cannot see, or that does not exist: ``RET-4032``. ``fields``: ``expand_relations``,
        ``max_relations``."""
        data: dict[str, Any] = {"uri": uri, "level": level, **fields}
        if offset:  # only what differs from the server's defaults is sent
            data["offset"] = offset
        if max_chars is not None:
            data["max_chars"] = max_chars
        return self._call("read_memory", data)

    def lookup_knowledge(self, query: str, **fields: Any) -> LookupResult:
        """``POST /api/v1/lookup_knowledge``: evidence blocks (best first, with ``relevance_level``), the context
        pack and the ``invocation_id`` of the audit row. ``fields``: ``session_id``, ``top_k``, ``min_similarity``,
        ``target_uri``, ``context_token_budget``, ``mode`` (``LookupRequest``). Always the full answer
        (``response_format="full"``): :meth:`lookup_knowledge_compact` answers the compact form."""
        return self._call("lookup_knowledge", {"query": query, **fields})

    def lookup_knowledge_compact(self, query: str, **fields: Any) -> LookupCompact:
        """``POST /api/v1/lookup_knowledge`` with ``response_format="compact"``: the same lookup (and audit row),
        answered for agents: ``invocation_id``, ``evidence_status``, per block ``uri``, ``title``, ``section``,
        ``relevance_level``, ``similarity`` (3 decimals), the packed ``excerpt`` and its ``evidence_ref``; with
        ``include_debug=True`` the context pack, traces and hints (``debug``). ``fields``: as
        :meth:`lookup_knowledge`."""
        return self._call("lookup_knowledge_compact", {"query": query, **fields})

    def verify_evidence(self, invocation_id: str, excerpt: str) -> EvidenceVerification:
        """``POST /api/v1/verify_evidence``: whether ``excerpt`` is backed by an evidence ref of that invocation."""
        data = {"invocation_id": invocation_id, "excerpt": excerpt}
        return self._call("verify_evidence", data)

    def list_tool_invocations(self, **filters: Any) -> ToolInvocationList:
        """``GET /api/v1/tool_invocations``: audit rows of the caller's account, newest first. ``filters``:
        ``session_id``, ``tool_name``, ``since``, ``until``, ``limit`` (1..1000), ``offset``."""
        return self._call("list_tool_invocations", filters)

    def session_trace_summary(self, session_id: str) -> SessionTraceSummary:
        """``GET /api/v1/tool_invocations/summary``: what a session's tool calls did."""
        return self._call("session_trace_summary", {"session_id": session_id})

    def get_tool_invocation(self, invocation_id: str) -> ToolInvocation:
        """``GET /api/v1/tool_invocations/{invocation_id}``: one audit row of the caller (an admin: of its account),
        e.g. the ``invocation_id`` of a lookup. Another user's row, or no such row: ``404 RET-4041``."""
        return self._call("get_tool_invocation", {"invocation_id": invocation_id})

    def ls(self, uri: str = "ctx://resources/") -> LsResponse:
        """``GET /api/v1/ls``: the children of a directory with their L0 abstracts."""
        return self._call("ls", {"uri": uri})

    def tree(self, uri: str = "ctx://resources/", max_depth: int = 3) -> TreeResponse:
        """``GET /api/v1/tree``: a subtree (``max_depth`` levels below ``uri``) with L0 abstracts."""
        return self._call("tree", {"uri": uri, "max_depth": max_depth})

    def stats(self) -> StatsResponse:
        """``GET /api/v1/stats``: counts of the account's nodes and the index's state (an admin key; others get
        ``403 RET-4032``). What ``context-engine stats`` prints."""
        return self._call("stats", None)

    # ---- resources --------------------------------------------------------------------------------------------------
    def add_resource_text(self, text: str, uri: str) -> IngestReport:
        """``POST /api/v1/resources/text``: one document (markdown or plain text) at a file URI under
        ``ctx://resources/``; indexed before the call returns."""
        return self._call("add_resource_text", {"text": text, "uri": uri})

    def add_resource_path(self, path: str, target_uri: str = "ctx://resources/", strict: bool = False) -> IngestReport:
        """``POST /api/v1/resources``: a server-side file or directory below ``http.allowed_upload_roots``."""
        data = {"path": path, "target_uri": target_uri, "strict": strict}
        return self._call("add_resource_path", data)

    def delete(self, uri: str, recursive: bool = False) -> IngestReport:
        """``POST /api/v1/delete``: a node (a directory with ``recursive``)."""
        return self._call("delete", {"uri": uri, "recursive": recursive})

    # ---- memories ---------------------------------------------------------------------------------------------------
    def add_memory(self, text: str, **fields: Any) -> AddMemoryResult:
        """``POST /api/v1/memories``: a memory in the caller's user space (``uris`` names it; ``items[0]`` is its
        outcome, as the batch calls answer). ``fields``: ``category``, ``uri``, ``metadata``, ``occurred_at``,
        ``policy`` (``AddMemoryRequest``)."""
        return self._call("add_memory", {"text": text, **fields})

    def add_memories(
        self, items: list[MemoryItemIn] | list[dict[str, Any]], policy: str | None = None
    ) -> MemoryWriteResult:
        """``POST /api/v1/memories/batch``: one all-or-nothing write; one outcome per item, in input order."""
        data: dict[str, Any] = {"items": items} if policy is None else {"items": items, "policy": policy}
        return self._call("add_memories", data)

    def add_messages(
        self,
        messages: Sequence[MessageIn | dict[str, Any]] | str,
        conversation_id: str | Sequence[MessageIn | dict[str, Any]] | None = None,
        *,
        session_id: str | Sequence[MessageIn | dict[str, Any]] | None = None,
    ) -> MemoryWriteResult:
        """``POST /api/v1/memories/messages``: the messages of one conversation as memories (``items[i].uri``), in the
        Python API's order ``add_messages(messages, conversation_id)``. Deprecated, still working with a
        ``DeprecationWarning``: ``session_id=`` (the first name of ``conversation_id``) and the earlier order
        ``(conversation_id, messages)``."""
        return self._call("add_messages", messages_first(messages, conversation_id, session_id))

    def list_memories(self, **fields: Any) -> MemoryListPage:
        """``GET /api/v1/memories``: one page of the caller's memories, newest first. ``fields``: ``category``,
        ``conversation_id`` (``session_id``: its deprecated name, with a ``DeprecationWarning``), ``limit``
        (1..200), ``offset``, ``user_space``; ``next_offset`` is ``None`` on the last page."""
        return self._call("list_memories", fields)

    def get_memory(self, uri: str) -> MemoryDetail:
        """``GET /api/v1/memories/item``: a memory's text (redacted) and earlier versions; ``RET-4032`` if absent."""
        return self._call("get_memory", {"uri": uri})

    def list_memory_events(self, **fields: Any) -> MemoryEventPage:
        """``GET /api/v1/memories/events``: one page of memory events (ADD, UPDATE, DELETE), newest first.
        ``fields``: ``user_space`` (an admin key: that user's), ``uri`` (one memory's, deleted or not), ``limit``
        (1..200, default 50), ``offset``; ``next_offset`` is ``None`` on the last page."""
        return self._call("list_memory_events", fields)

    def update_memory(self, uri: str, text: str, **fields: Any) -> MemoryWriteResult:
        """``POST /api/v1/memories/update``: replace a memory's text (``version`` + 1). ``fields``: ``metadata``,
        ``occurred_at``."""
        return self._call("update_memory", {"uri": uri, "text": text, **fields})

    def delete_memory(self, uri: str) -> IngestReport:
        """``POST /api/v1/memories/delete``: one memory and its versions; ``RET-4032`` if absent or not writable."""
        return self._call("delete_memory", {"uri": uri})
