"""The HTTP routes the client calls: one :class:`Endpoint` per client method, with the server's own models.

Request and response models are the ones the server declares for the route (``context_engine.schema`` and the HTTP
boundary models of ``context_engine.interfaces.http.models``, which import pydantic only). Routes whose query
parameters the server declares one by one get a small parameter model here. A route whose answer is a union (the
``response_format`` of ``search_memory`` and ``lookup_knowledge``: full or compact) has one entry per member, each
fixing the request field that selects it, so every client method has one return type.
``tests/client/test_openapi_drift.py`` checks every entry against the running server's ``/openapi.json`` (path,
method, field names, union members), so drift fails a test.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from context_engine.errors import ErrorCode
from context_engine.interfaces.http.models import (
    AddMemoriesRequest,
    AddMemoryRequest,
    AddMessagesRequest,
    AddResourcePathRequest,
    AddResourceTextRequest,
    DeleteRequest,
    HealthResponse,
    ListMemoriesRequest,
    LsResponse,
    MemoryUriRequest,
    ReadyResponse,
    StatsResponse,
    ToolInvocationList,
    TreeResponse,
    UpdateMemoryRequest,
    VerifyEvidenceRequest,
)
from context_engine.schema.compact import LookupCompact, SearchMemoryCompact
from context_engine.schema.knowledge import (
    EvidenceVerification,
    LookupRequest,
    LookupResult,
    SessionTraceSummary,
    ToolInvocation,
)
from context_engine.schema.memory import AddMemoryResult, MemoryDetail, MemoryListPage, MemoryWriteResult
from context_engine.schema.nodes import IngestReport
from context_engine.schema.query import ReadMemoryRequest, ReadMemoryResponse, SearchMemoryRequest, SearchMemoryResponse


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolInvocationQuery(_Params):
    """Query parameters of ``GET /api/v1/tool_invocations``."""

    session_id: str | None = None
    tool_name: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0)


class SessionSummaryQuery(_Params):
    """Query parameters of ``GET /api/v1/tool_invocations/summary``."""

    session_id: str


class ToolInvocationPath(_Params):
    """Path parameter of ``GET /api/v1/tool_invocations/{invocation_id}``."""

    invocation_id: str = Field(min_length=1, max_length=64)


class LsQuery(_Params):
    """Query parameters of ``GET /api/v1/ls``."""

    uri: str = "ctx://resources/"


class TreeQuery(_Params):
    """Query parameters of ``GET /api/v1/tree``."""

    uri: str = "ctx://resources/"
    max_depth: int = 3


@dataclass(frozen=True)
class Endpoint:
    """One route: ``method`` and ``path``; ``request`` is the JSON body (POST) or the query parameters (GET), ``None``
    when the route takes neither (a GET's fields named ``{like_this}`` in ``path`` go into the path); ``response``
    the 200 body. ``invalid_code`` is what a request that fails local validation raises, the code the server would
    answer (``RET-4001`` on read routes, ``WRT-4002`` on write and memory routes). ``fixed``: request fields the
    method always sends with these values (``response_format``, which selects ``response`` among the members of the
    route's union answer); a caller's other value is refused locally."""

    method: Literal["GET", "POST"]
    path: str
    response: type[BaseModel]
    request: type[BaseModel] | None = None
    invalid_code: ErrorCode = ErrorCode.QUERY_INVALID
    fixed: Mapping[str, Any] = field(default_factory=dict)

    @property
    def path_params(self) -> tuple[str, ...]:
        """The names of the ``{placeholders}`` of ``path``, in order."""
        return tuple(re.findall(r"\{(\w+)\}", self.path))


_WRITE = ErrorCode.REQUEST_INVALID
_FULL = {"response_format": "full"}
_COMPACT = {"response_format": "compact"}

#: Client method name -> its route. Routes the client leaves out are listed in the drift test.
ENDPOINTS: dict[str, Endpoint] = {
    "health": Endpoint("GET", "/healthz", HealthResponse),
    "ready": Endpoint("GET", "/readyz", ReadyResponse),
    "search_memory": Endpoint("POST", "/api/v1/search_memory", SearchMemoryResponse, SearchMemoryRequest, fixed=_FULL),
    "search_memory_compact": Endpoint(
        "POST", "/api/v1/search_memory", SearchMemoryCompact, SearchMemoryRequest, fixed=_COMPACT
    ),
    "read_memory": Endpoint("POST", "/api/v1/read_memory", ReadMemoryResponse, ReadMemoryRequest),
    "lookup_knowledge": Endpoint("POST", "/api/v1/lookup_knowledge", LookupResult, LookupRequest, fixed=_FULL),
    "lookup_knowledge_compact": Endpoint(
        "POST", "/api/v1/lookup_knowledge", LookupCompact, LookupRequest, fixed=_COMPACT
    ),
    "verify_evidence": Endpoint("POST", "/api/v1/verify_evidence", EvidenceVerification, VerifyEvidenceRequest),
    "list_tool_invocations": Endpoint("GET", "/api/v1/tool_invocations", ToolInvocationList, ToolInvocationQuery),
    "session_trace_summary": Endpoint(
        "GET", "/api/v1/tool_invocations/summary", SessionTraceSummary, SessionSummaryQuery
    ),
    "get_tool_invocation": Endpoint(
        "GET", "/api/v1/tool_invocations/{invocation_id}", ToolInvocation, ToolInvocationPath
    ),
    "ls": Endpoint("GET", "/api/v1/ls", LsResponse, LsQuery),
    "tree": Endpoint("GET", "/api/v1/tree", TreeResponse, TreeQuery),
    "stats": Endpoint("GET", "/api/v1/stats", StatsResponse),
    "add_resource_text": Endpoint("POST", "/api/v1/resources/text", IngestReport, AddResourceTextRequest, _WRITE),
    "add_resource_path": Endpoint("POST", "/api/v1/resources", IngestReport, AddResourcePathRequest, _WRITE),
    "delete": Endpoint("POST", "/api/v1/delete", IngestReport, DeleteRequest, _WRITE),
    "add_memory": Endpoint("POST", "/api/v1/memories", AddMemoryResult, AddMemoryRequest, _WRITE),
    "add_memories": Endpoint("POST", "/api/v1/memories/batch", MemoryWriteResult, AddMemoriesRequest, _WRITE),
    "add_messages": Endpoint("POST", "/api/v1/memories/messages", MemoryWriteResult, AddMessagesRequest, _WRITE),
    "list_memories": Endpoint("GET", "/api/v1/memories", MemoryListPage, ListMemoriesRequest, _WRITE),
    "get_memory": Endpoint("GET", "/api/v1/memories/item", MemoryDetail, MemoryUriRequest, _WRITE),
    "update_memory": Endpoint("POST", "/api/v1/memories/update", MemoryWriteResult, UpdateMemoryRequest, _WRITE),
    "delete_memory": Endpoint("POST", "/api/v1/memories/delete", IngestReport, MemoryUriRequest, _WRITE),
}
