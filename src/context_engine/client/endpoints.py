"""The HTTP routes the client calls: one :class:`Endpoint` per client method, with the server's own models.

Request and response models are the ones the server declares for the route (``context_engine.schema`` and the
transport-neutral API models of ``context_engine.api.models``, which import pydantic only). Routes whose query
parameters the server declares one by one get a small parameter model (:mod:`context_engine.client.params`). A route
whose answer is a union (the ``response_format`` of ``search_memory`` and ``lookup_knowledge``: full or compact) has
one entry per member, each fixing the request field that selects it, so every client method has one return type.
``tests/client/test_openapi_drift.py`` checks every entry against the running server's ``/openapi.json`` (path,
method, field names, union members), so drift fails a test.

The table names its models; each is imported when its route is first used (:attr:`Endpoint.response`,
:attr:`Endpoint.request`): building every model of the API would take a good part of the half second a
``context-engine --url search`` may take (issue 29), which needs the two of ``search_memory``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import import_module
from typing import Any, Literal

from pydantic import BaseModel

from context_engine.errors import ErrorCode

#: The models the table names, by module (:func:`model` imports one on first use).
_MODULES: dict[str, tuple[str, ...]] = {
    "context_engine.api.models": (
        "AddMemoriesRequest",
        "AddMemoryRequest",
        "AddMessagesRequest",
        "AddResourcePathRequest",
        "AddResourceTextRequest",
        "DeleteRequest",
        "HealthResponse",
        "ListMemoriesRequest",
        "LsResponse",
        "MemoryUriRequest",
        "ReadyResponse",
        "StatsResponse",
        "ToolInvocationList",
        "TreeResponse",
        "UpdateMemoryRequest",
        "VerifyEvidenceRequest",
    ),
    "context_engine.schema.compact": ("LookupCompact", "SearchMemoryCompact"),
    "context_engine.schema.knowledge": (
        "EvidenceVerification",
        "LookupRequest",
        "LookupResult",
        "SessionTraceSummary",
        "ToolInvocation",
    ),
    "context_engine.schema.memory": ("AddMemoryResult", "MemoryDetail", "MemoryListPage", "MemoryWriteResult"),
    "context_engine.schema.memory_events": ("MemoryEventPage",),
    "context_engine.schema.nodes": ("IngestReport",),
    "context_engine.schema.query": (
        "ReadMemoryRequest",
        "ReadMemoryResponse",
        "SearchMemoryRequest",
        "SearchMemoryResponse",
    ),
    "context_engine.client.params": (
        "LsQuery",
        "MemoryEventsQuery",
        "SessionSummaryQuery",
        "ToolInvocationPath",
        "ToolInvocationQuery",
        "TreeQuery",
    ),
}
#: Model name -> the module that defines it.
MODEL_HOMES: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}


@cache
def model(name: str) -> type[BaseModel]:
    """The model class named ``name`` in :data:`MODEL_HOMES`, its module imported on first use."""
    found: type[BaseModel] = getattr(import_module(MODEL_HOMES[name]), name)
    return found


@dataclass(frozen=True)
class Endpoint:
    """One route: ``method`` and ``path``; ``request`` is the JSON body (POST) or the query parameters (GET), ``None``
    when the route takes neither (a GET's fields named ``{like_this}`` in ``path`` go into the path); ``response``
    the 200 body. ``invalid_code`` is what a request that fails local validation raises, the code the server would
    answer (``RET-4001`` on read routes, ``WRT-4002`` on write and memory routes). ``fixed``: request fields the
    method always sends with these values (``response_format``, which selects ``response`` among the members of the
    route's union answer); a caller's other value is refused locally. The models are given by name
    (:data:`MODEL_HOMES`): ``response_model`` and ``request_model``."""

    method: Literal["GET", "POST"]
    path: str
    response_model: str
    request_model: str | None = None
    invalid_code: ErrorCode = ErrorCode.QUERY_INVALID
    fixed: Mapping[str, Any] = field(default_factory=dict)

    @property
    def response(self) -> type[BaseModel]:
        """The model of the 200 body."""
        return model(self.response_model)

    @property
    def request(self) -> type[BaseModel] | None:
        """The model of the JSON body or of the query parameters; ``None`` when the route takes neither."""
        return None if self.request_model is None else model(self.request_model)

    @property
    def path_params(self) -> tuple[str, ...]:
        """The names of the ``{placeholders}`` of ``path``, in order."""
        return tuple(re.findall(r"\{(\w+)\}", self.path))


_WRITE = ErrorCode.REQUEST_INVALID
_FULL_FORMAT = {"response_format": "full"}
_COMPACT_FORMAT = {"response_format": "compact"}

#: Client method name -> its route. Routes the client leaves out are listed in the drift test.
ENDPOINTS: dict[str, Endpoint] = {
    "health": Endpoint("GET", "/healthz", "HealthResponse"),
    "ready": Endpoint("GET", "/readyz", "ReadyResponse"),
    "search_memory": Endpoint(
        "POST", "/api/v1/search_memory", "SearchMemoryResponse", "SearchMemoryRequest", fixed=_FULL_FORMAT
    ),
    "search_memory_compact": Endpoint(
        "POST", "/api/v1/search_memory", "SearchMemoryCompact", "SearchMemoryRequest", fixed=_COMPACT_FORMAT
    ),
    "read_memory": Endpoint("POST", "/api/v1/read_memory", "ReadMemoryResponse", "ReadMemoryRequest"),
    "lookup_knowledge": Endpoint(
        "POST", "/api/v1/lookup_knowledge", "LookupResult", "LookupRequest", fixed=_FULL_FORMAT
    ),
    "lookup_knowledge_compact": Endpoint(
        "POST", "/api/v1/lookup_knowledge", "LookupCompact", "LookupRequest", fixed=_COMPACT_FORMAT
    ),
    "verify_evidence": Endpoint("POST", "/api/v1/verify_evidence", "EvidenceVerification", "VerifyEvidenceRequest"),
    "list_tool_invocations": Endpoint("GET", "/api/v1/tool_invocations", "ToolInvocationList", "ToolInvocationQuery"),
    "session_trace_summary": Endpoint(
        "GET", "/api/v1/tool_invocations/summary", "SessionTraceSummary", "SessionSummaryQuery"
    ),
    "get_tool_invocation": Endpoint(
        "GET", "/api/v1/tool_invocations/{invocation_id}", "ToolInvocation", "ToolInvocationPath"
    ),
    "ls": Endpoint("GET", "/api/v1/ls", "LsResponse", "LsQuery"),
    "tree": Endpoint("GET", "/api/v1/tree", "TreeResponse", "TreeQuery"),
    "stats": Endpoint("GET", "/api/v1/stats", "StatsResponse"),
    "add_resource_text": Endpoint("POST", "/api/v1/resources/text", "IngestReport", "AddResourceTextRequest", _WRITE),
    "add_resource_path": Endpoint("POST", "/api/v1/resources", "IngestReport", "AddResourcePathRequest", _WRITE),
    "delete": Endpoint("POST", "/api/v1/delete", "IngestReport", "DeleteRequest", _WRITE),
    "add_memory": Endpoint("POST", "/api/v1/memories", "AddMemoryResult", "AddMemoryRequest", _WRITE),
    "add_memories": Endpoint("POST", "/api/v1/memories/batch", "MemoryWriteResult", "AddMemoriesRequest", _WRITE),
    "add_messages": Endpoint("POST", "/api/v1/memories/messages", "MemoryWriteResult", "AddMessagesRequest", _WRITE),
    "list_memories": Endpoint("GET", "/api/v1/memories", "MemoryListPage", "ListMemoriesRequest", _WRITE),
    "get_memory": Endpoint("GET", "/api/v1/memories/item", "MemoryDetail", "MemoryUriRequest", _WRITE),
    "update_memory": Endpoint("POST", "/api/v1/memories/update", "MemoryWriteResult", "UpdateMemoryRequest", _WRITE),
    "delete_memory": Endpoint("POST", "/api/v1/memories/delete", "IngestReport", "MemoryUriRequest", _WRITE),
    "list_memory_events": Endpoint("GET", "/api/v1/memories/events", "MemoryEventPage", "MemoryEventsQuery", _WRITE),
}
