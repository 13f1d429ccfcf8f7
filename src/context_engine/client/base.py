"""The client's methods, written once for both faces (issue 28): :class:`BaseClient` holds every method of the API,
and each method's body turns its arguments into a :class:`~context_engine.client.core.Call` (the route, the request
fields checked locally, the answer's model). A face supplies the transport only, ``_send(call)``:
:class:`~context_engine.client.sync.Client` sends it and returns the answer, and
:class:`~context_engine.client.aio.AsyncClient` awaits it, so that each of its methods is a coroutine function.

How a method reaches its face: :func:`route` makes it a descriptor (:class:`Route`) that, looked up on a face, gives a
function calling ``self._send(body(self, ...))``, plain or ``async`` as the face's ``_send`` is. The function keeps the
body's name, docstring and signature, with the answer's model as its return annotation (``SearchMemoryResponse``, not
``Call[...]``), which ``tests/client/test_openapi_drift.py`` checks against the route table. For type checkers the
descriptor's ``__get__`` is overloaded on the face, the class parameter :class:`Sync` or :class:`Async`: a method of
``Client`` returns ``SearchMemoryResponse``, one of ``AsyncClient`` a coroutine of it, with the body's parameters.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Sequence
from functools import update_wrapper
from types import MethodType
from typing import TYPE_CHECKING, Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, overload

from pydantic import BaseModel

from context_engine.client.core import Call, call, messages_first

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

P = ParamSpec("P")
M = TypeVar("M", bound=BaseModel)
Face = TypeVar("Face", "Sync", "Async")


class Sync:
    """The blocking face (:class:`~context_engine.client.sync.Client`): a method returns the route's model."""


class Async:
    """The asyncio face (:class:`~context_engine.client.aio.AsyncClient`): a method returns a coroutine of it."""


def _blocking(body: Callable[..., Call[Any]]) -> Callable[..., Any]:
    def method(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        return self._send(body(self, *args, **kwargs))

    return method


def _awaitable(body: Callable[..., Call[Any]]) -> Callable[..., Any]:
    async def method(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        return await self._send(body(self, *args, **kwargs))

    return method


class Route(Generic[P, M]):
    """A client method: ``body`` turns the arguments into the :class:`Call` the face sends (see the module's
    docstring). Looked up on a face class it is a function; on an instance, that function bound.

    Raises:
        TypeError: when the class is built, if ``body``'s return annotation is not ``Call[<the answer's model>]``.
    """

    def __init__(self, body: Callable[Concatenate[Any, P], Call[M]]) -> None:
        returns = str(body.__annotations__.get("return"))  # a string, as this module imports annotations
        if not (returns.startswith("Call[") and returns.endswith("]")):
            raise TypeError(f"{body.__qualname__} must be annotated -> Call[<model>], not {returns}")
        self._body = body
        self._answer = returns.removeprefix("Call[").removesuffix("]")  # "SearchMemoryResponse"
        self._faces: dict[type, Callable[..., Any]] = {}

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Callable[..., Any]: ...
    @overload
    def __get__(self, obj: BaseClient[Sync], owner: type[Any]) -> Callable[P, M]: ...
    @overload
    def __get__(self, obj: BaseClient[Async], owner: type[Any]) -> Callable[P, Coroutine[Any, Any, M]]: ...
    def __get__(self, obj: BaseClient[Any] | None, owner: type[Any]) -> Callable[..., Any]:
        method = self._faces.get(owner)
        if method is None:
            method = self._faces[owner] = self._face(inspect.iscoroutinefunction(owner._send))
        return method if obj is None else MethodType(method, obj)

    def _face(self, awaits: bool) -> Callable[..., Any]:
        """The method of a face: ``self._send(body(self, ...))``, a coroutine function when ``awaits``, with the
        body's name, docstring and parameters, and the answer's model as its return annotation."""
        method = (_awaitable if awaits else _blocking)(self._body)
        update_wrapper(method, self._body)
        method.__annotations__ = {**self._body.__annotations__, "return": self._answer}
        method.__dict__["__signature__"] = inspect.signature(self._body).replace(return_annotation=self._answer)
        return method


def route(body: Callable[Concatenate[Any, P], Call[M]]) -> Route[P, M]:
    """Make ``body``, which returns the :class:`Call` of one route, a method of both faces (:class:`Route`)."""
    return Route(body)


class BaseClient(Generic[Face]):
    """The methods of :class:`~context_engine.client.sync.Client` and :class:`~context_engine.client.aio.AsyncClient`,
    written once; ``Face`` (:class:`Sync` or :class:`Async`) says what a method returns. A face supplies ``_send``."""

    def _send(self, call: Call[Any], /) -> Any:
        """Send ``call`` and return its answer (the face's transport: blocking, or a coroutine)."""
        raise NotImplementedError

    # ---- operations -------------------------------------------------------------------------------------------------
    @route
    def health(self) -> Call[HealthResponse]:
        """``GET /healthz``: the process answers."""
        return call("health")

    @route
    def ready(self) -> Call[ReadyResponse]:
        """``GET /readyz``: the engine is open (``503 API-5031`` while starting, retried)."""
        return call("ready")

    # ---- retrieval --------------------------------------------------------------------------------------------------
    @route
    def search_memory(self, query: str, **fields: Any) -> Call[SearchMemoryResponse]:
        """``POST /api/v1/search_memory``: ranked L0 hits (``hits``, best first, ``score`` in 0..1) and the URIs worth
        reading (``next_actions``). ``fields``: ``top_k`` (1..50, else ``RET-4002``), ``target_uri``, ``categories``,
        ``score_threshold``, ``conversation_id``, ``time_range``, ``metadata_filter``... (``SearchMemoryRequest``;
        ``session_id``, the deprecated name of ``conversation_id``, warns).
        Always the full answer (``response_format="full"``; ``"compact"`` raises ``RET-4001``, nothing sent):
        :meth:`search_memory_compact` answers the compact form."""
        return call("search_memory", {"query": query, **fields})

    @route
    def search_memory_compact(self, query: str, **fields: Any) -> Call[SearchMemoryCompact]:
        """``POST /api/v1/search_memory`` with ``response_format="compact"``: the same search, answered for agents:
        per hit ``uri``, ``level``, ``score`` (3 decimals), ``abstract`` and ``read_recommendation``, best first;
        ``warnings`` and ``retryable``; with ``include_debug=True`` what the compact form leaves out (``debug``:
        ``typed_queries``, ``seed_hits``, ``next_actions``, ``trace``). ``fields``: as :meth:`search_memory`."""
        return call("search_memory_compact", {"query": query, **fields})

    @route
    def read_memory(
        self,
        uri: str,
        level: Literal["L1", "L2"] = "L1",
        *,
        offset: int = 0,
        max_chars: int | None = None,
        **fields: Any,
    ) -> Call[ReadMemoryResponse]:
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
        return call("read_memory", data)

    @route
    def lookup_knowledge(self, query: str, **fields: Any) -> Call[LookupResult]:
        """``POST /api/v1/lookup_knowledge``: evidence blocks (best first, with ``relevance_level``), the context
        pack and the ``invocation_id`` of the audit row. ``fields``: ``session_id``, ``top_k``, ``min_similarity``,
        ``target_uri``, ``context_token_budget``, ``mode`` (``LookupRequest``). Always the full answer
        (``response_format="full"``): :meth:`lookup_knowledge_compact` answers the compact form."""
        return call("lookup_knowledge", {"query": query, **fields})

    @route
    def lookup_knowledge_compact(self, query: str, **fields: Any) -> Call[LookupCompact]:
        """``POST /api/v1/lookup_knowledge`` with ``response_format="compact"``: the same lookup (and audit row),
        answered for agents: ``invocation_id``, ``evidence_status``, per block ``uri``, ``title``, ``section``,
        ``relevance_level``, ``similarity`` (3 decimals), the packed ``excerpt`` and its ``evidence_ref``; with
        ``include_debug=True`` the context pack, traces and hints (``debug``). ``fields``: as
        :meth:`lookup_knowledge`."""
        return call("lookup_knowledge_compact", {"query": query, **fields})

    @route
    def verify_evidence(self, invocation_id: str, excerpt: str) -> Call[EvidenceVerification]:
        """``POST /api/v1/verify_evidence``: whether ``excerpt`` is backed by an evidence ref of that invocation."""
        data = {"invocation_id": invocation_id, "excerpt": excerpt}
        return call("verify_evidence", data)

    @route
    def list_tool_invocations(self, **filters: Any) -> Call[ToolInvocationList]:
        """``GET /api/v1/tool_invocations``: audit rows of the caller's account, newest first. ``filters``:
        ``session_id``, ``tool_name``, ``since``, ``until``, ``limit`` (1..1000), ``offset``."""
        return call("list_tool_invocations", filters)

    @route
    def session_trace_summary(self, session_id: str) -> Call[SessionTraceSummary]:
        """``GET /api/v1/tool_invocations/summary``: what a session's tool calls did."""
        return call("session_trace_summary", {"session_id": session_id})

    @route
    def get_tool_invocation(self, invocation_id: str) -> Call[ToolInvocation]:
        """``GET /api/v1/tool_invocations/{invocation_id}``: one audit row of the caller (an admin: of its account),
        e.g. the ``invocation_id`` of a lookup. Another user's row, or no such row: ``404 RET-4041``."""
        return call("get_tool_invocation", {"invocation_id": invocation_id})

    @route
    def ls(self, uri: str = "ctx://resources/") -> Call[LsResponse]:
        """``GET /api/v1/ls``: the children of a directory with their L0 abstracts."""
        return call("ls", {"uri": uri})

    @route
    def tree(self, uri: str = "ctx://resources/", max_depth: int = 3) -> Call[TreeResponse]:
        """``GET /api/v1/tree``: a subtree (``max_depth`` levels below ``uri``) with L0 abstracts."""
        return call("tree", {"uri": uri, "max_depth": max_depth})

    @route
    def stats(self) -> Call[StatsResponse]:
        """``GET /api/v1/stats``: counts of the account's nodes and vector records (``index_records``: the account's
        only) and the index's state (an admin key; others get ``403 RET-4032``). What ``context-engine stats``
        prints."""
        return call("stats")

    # ---- resources --------------------------------------------------------------------------------------------------
    @route
    def add_resource_text(self, text: str, uri: str) -> Call[IngestReport]:
        """``POST /api/v1/resources/text``: one document (markdown or plain text) at a file URI under
        ``ctx://resources/``; indexed before the call returns."""
        return call("add_resource_text", {"text": text, "uri": uri})

    @route
    def add_resource_path(
        self, path: str, target_uri: str = "ctx://resources/", strict: bool = False
    ) -> Call[IngestReport]:
        """``POST /api/v1/resources``: a server-side file or directory below ``http.allowed_upload_roots``."""
        data = {"path": path, "target_uri": target_uri, "strict": strict}
        return call("add_resource_path", data)

    @route
    def delete(self, uri: str, recursive: bool = False) -> Call[IngestReport]:
        """``POST /api/v1/delete``: a node (a directory with ``recursive``)."""
        return call("delete", {"uri": uri, "recursive": recursive})

    # ---- memories ---------------------------------------------------------------------------------------------------
    @route
    def add_memory(self, text: str, **fields: Any) -> Call[AddMemoryResult]:
        """``POST /api/v1/memories``: a memory in the caller's user space (``uris`` names it; ``items[0]`` is its
        outcome, as the batch calls answer). ``fields``: ``category``, ``uri``, ``metadata``, ``occurred_at``,
        ``policy`` (``AddMemoryRequest``)."""
        return call("add_memory", {"text": text, **fields})

    @route
    def add_memories(
        self, items: list[MemoryItemIn] | list[dict[str, Any]], policy: str | None = None
    ) -> Call[MemoryWriteResult]:
        """``POST /api/v1/memories/batch``: one all-or-nothing write; one outcome per item, in input order."""
        data: dict[str, Any] = {"items": items} if policy is None else {"items": items, "policy": policy}
        return call("add_memories", data)

    @route
    def add_messages(
        self,
        messages: Sequence[MessageIn | dict[str, Any]] | str,
        conversation_id: str | Sequence[MessageIn | dict[str, Any]] | None = None,
        *,
        session_id: str | Sequence[MessageIn | dict[str, Any]] | None = None,
    ) -> Call[MemoryWriteResult]:
        """``POST /api/v1/memories/messages``: the messages of one conversation as memories (``items[i].uri``), in the
        Python API's order ``add_messages(messages, conversation_id)``. Deprecated, still working with a
        ``DeprecationWarning``: ``session_id=`` (the first name of ``conversation_id``) and the earlier order
        ``(conversation_id, messages)``."""
        return call("add_messages", messages_first(messages, conversation_id, session_id))

    @route
    def list_memories(self, **fields: Any) -> Call[MemoryListPage]:
        """``GET /api/v1/memories``: one page of the caller's memories, newest first. ``fields``: ``category``,
        ``conversation_id`` (``session_id``: its deprecated name, with a ``DeprecationWarning``), ``limit``
        (1..200), ``offset``, ``user_space``; ``next_offset`` is ``None`` on the last page."""
        return call("list_memories", fields)

    @route
    def get_memory(self, uri: str) -> Call[MemoryDetail]:
        """``GET /api/v1/memories/item``: a memory's text (redacted) and earlier versions; ``RET-4032`` if absent."""
        return call("get_memory", {"uri": uri})

    @route
    def list_memory_events(self, **fields: Any) -> Call[MemoryEventPage]:
        """``GET /api/v1/memories/events``: one page of memory events (ADD, UPDATE, DELETE), newest first.
        ``fields``: ``user_space`` (an admin key: that user's), ``uri`` (one memory's, deleted or not), ``limit``
        (1..200, default 50), ``offset``; ``next_offset`` is ``None`` on the last page."""
        return call("list_memory_events", fields)

    @route
    def update_memory(self, uri: str, text: str, **fields: Any) -> Call[MemoryWriteResult]:
        """``POST /api/v1/memories/update``: replace a memory's text (``version`` + 1). ``fields``: ``metadata``,
        ``occurred_at``."""
        return call("update_memory", {"uri": uri, "text": text, **fields})

    @route
    def delete_memory(self, uri: str) -> Call[IngestReport]:
        """``POST /api/v1/memories/delete``: one memory and its versions; ``RET-4032`` if absent or not writable."""
        return call("delete_memory", {"uri": uri})
