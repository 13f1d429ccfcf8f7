"""Query and path parameter models of the routes whose parameters the server declares one by one (the request
models of their :data:`~context_engine.client.endpoints.ENDPOINTS` entries, imported when one of them is first
called)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


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


class MemoryEventsQuery(_Params):
    """Query parameters of ``GET /api/v1/memories/events``."""

    user_space: str | None = Field(None, max_length=255)
    uri: str | None = Field(None, max_length=4096)
    limit: int = Field(50, ge=1, le=200)
    offset: int = Field(0, ge=0, le=1_000_000_000)
