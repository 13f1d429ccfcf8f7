"""The HTTP routes the client calls: one :class:`Endpoint` per client method, with the server's own models.

Request and response models are the ones the server declares for the route (``context_engine.schema`` and the HTTP
boundary models of ``context_engine.interfaces.http.models``, which import pydantic only). Routes whose query
parameters the server declares one by one get a small parameter model here. ``tests/client/test_openapi_drift.py``
checks every entry against the running server's ``/openapi.json`` (path, method, field names), so drift fails a test.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

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
    ToolInvocationList,
    TreeResponse,
    UpdateMemoryRequest,
    VerifyEvidenceRequest,
)
from context_engine.schema.knowledge import EvidenceVerification, LookupRequest, LookupResult, SessionTraceSummary
from context_engine.schema.memory import MemoryDetail, MemoryListPage, MemoryWriteResult
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
    when the route takes neither; ``response`` the 200 body. ``invalid_code`` is what a request that fails local
    validation raises, the code the server would answer (``RET-4001`` on read routes, ``WRT-4002`` on write and
    memory routes)."""

    method: Literal["GET", "POST"]
    path: str
    response: type[BaseModel]
    request: type[BaseModel] | None = None
    invalid_code: ErrorCode = ErrorCode.QUERY_INVALID


_WRITE = ErrorCode.REQUEST_INVALID

#: Client method name -> its route. Routes the client leaves out are listed in the drift test.
ENDPOINTS: dict[str, Endpoint] = {
    "health": Endpoint("GET", "/healthz", HealthResponse),
    "ready": Endpoint("GET", "/readyz", ReadyResponse),
    "search_memory": Endpoint("POST", "/api/v1/search_memory", SearchMemoryResponse, SearchMemoryRequest),
    "read_memory": Endpoint("POST", "/api/v1/read_memory", ReadMemoryResponse, ReadMemoryRequest),
    "lookup_knowledge": Endpoint("POST", "/api/v1/lookup_knowledge", LookupResult, LookupRequest),
    "verify_evidence": Endpoint("POST", "/api/v1/verify_evidence", EvidenceVerification, VerifyEvidenceRequest),
    "list_tool_invocations": Endpoint("GET", "/api/v1/tool_invocations", ToolInvocationList, ToolInvocationQuery),
    "session_trace_summary": Endpoint(
        "GET", "/api/v1/tool_invocations/summary", SessionTraceSummary, SessionSummaryQuery
    ),
    "ls": Endpoint("GET", "/api/v1/ls", LsResponse, LsQuery),
    "tree": Endpoint("GET", "/api/v1/tree", TreeResponse, TreeQuery),
    "add_resource_text": Endpoint("POST", "/api/v1/resources/text", IngestReport, AddResourceTextRequest, _WRITE),
    "add_resource_path": Endpoint("POST", "/api/v1/resources", IngestReport, AddResourcePathRequest, _WRITE),
    "delete": Endpoint("POST", "/api/v1/delete", IngestReport, DeleteRequest, _WRITE),
    "add_memory": Endpoint("POST", "/api/v1/memories", IngestReport, AddMemoryRequest, _WRITE),
    "add_memories": Endpoint("POST", "/api/v1/memories/batch", MemoryWriteResult, AddMemoriesRequest, _WRITE),
    "add_messages": Endpoint("POST", "/api/v1/memories/messages", MemoryWriteResult, AddMessagesRequest, _WRITE),
    "list_memories": Endpoint("GET", "/api/v1/memories", MemoryListPage, ListMemoriesRequest, _WRITE),
    "get_memory": Endpoint("GET", "/api/v1/memories/item", MemoryDetail, MemoryUriRequest, _WRITE),
    "update_memory": Endpoint("POST", "/api/v1/memories/update", MemoryWriteResult, UpdateMemoryRequest, _WRITE),
    "delete_memory": Endpoint("POST", "/api/v1/memories/delete", IngestReport, MemoryUriRequest, _WRITE),
}
