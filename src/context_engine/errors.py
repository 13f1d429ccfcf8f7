"""The one exception root and the error-code table (DESIGN.md §8).

Every failure the engine reports to a caller is a :class:`ContextEngineError` carrying one of the codes in
:class:`ErrorCode`. Interfaces translate it: HTTP uses :attr:`ErrorCode.http_status`, the CLI exits with
:attr:`ErrorCode.exit_code`, and both print the same envelope ``{code, message, details, request_id}``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """Error codes. ``RET-*`` come from DESIGN §8; ``WRT-*``, ``IDX-*``, ``AUTH-*``, ``API-*`` extend it in the same
    form."""

    # search_memory / read_memory (DESIGN §8, seed 000 §7)
    QUERY_INVALID = "RET-4001"
    TOP_K_OUT_OF_RANGE = "RET-4002"
    SCORE_THRESHOLD_INVALID = "RET-4003"
    LEVEL_NOT_AVAILABLE = "RET-4004"
    TARGET_FORBIDDEN = "RET-4031"
    URI_FORBIDDEN = "RET-4032"
    TARGET_NOT_FOUND = "RET-4041"
    PLANNER_UNCLASSIFIED = "RET-4221"
    VECTOR_SEARCH_FAILED = "RET-5001"
    RECHECK_FAILED = "RET-5002"
    ASSEMBLY_FAILED = "RET-5003"
    EXPANSION_TRUNCATED = "RET-5004"  # hierarchical expansion stopped by its time budget (warning)
    REDACTION_DEGRADED = "RET-5005"  # secret-detection library failed; our patterns alone redacted (warning)
    # write path
    URI_INVALID = "WRT-4001"
    REQUEST_INVALID = "WRT-4002"
    PATH_NOT_FOUND = "WRT-4041"
    NODE_NOT_FOUND = "WRT-4042"
    CONFLICT = "WRT-4091"
    PAYLOAD_TOO_LARGE = "WRT-4131"
    TOO_MANY_CHUNKS = "WRT-4132"  # a document would make more L2 chunks than ingest.max_chunks_per_document
    UNSUPPORTED_FORMAT = "WRT-4151"
    CONTENT_INVALID = "WRT-4221"
    WRITE_CANCELLED = "WRT-4991"  # the HTTP client went away before the write committed; nothing was written
    EMBEDDING_FAILED = "WRT-5031"
    WRITE_BUSY = "WRT-5032"  # no write turn within ingest.write_wait_s (other writers ahead); retryable
    STORAGE_FAILED = "WRT-5001"
    # index and configuration
    INDEX_MODEL_MISMATCH = "IDX-4091"
    INDEX_DAMAGED = "IDX-5031"  # a derived vector index whose files are missing, truncated or unreadable
    CONFIG_INVALID = "CFG-4001"
    # authentication
    UNAUTHENTICATED = "AUTH-4011"
    # service interfaces (HTTP, MCP): requests that reach no engine method, and failures not otherwise coded
    ORIGIN_NOT_ALLOWED = "API-4031"  # an Origin header naming a host outside http.allowed_hosts (cross-site request)
    ROUTE_NOT_FOUND = "API-4041"
    METHOD_NOT_ALLOWED = "API-4051"
    HOST_NOT_ALLOWED = "API-4211"  # a Host header outside http.allowed_hosts (DNS rebinding): 421 Misdirected Request
    INTERNAL = "API-5001"  # an unexpected server error: generic message to the client, details in the server log
    UNREACHABLE = "API-5021"  # client side (context_engine.client): no answer, or no envelope, from the server
    NOT_READY = "API-5031"  # the engine is still starting or is shutting down (retryable)
    ADDRESS_IN_USE = "API-4092"  # `serve`: the host:port is taken by another process (checked before the model loads)

    @property
    def http_status(self) -> int:
        """HTTP status for this code: the three digits after the prefix, e.g. ``RET-4031`` -> 403."""
        return int(self.value.split("-")[1][:3])

    @property
    def exit_code(self) -> int:
        """CLI exit code: 2 for caller errors (4xx), 3 for denials (401/403), 4 for server-side failures (5xx), 5 for
        ``serve`` on an address already in use (``API-4092``: start it on another port, or stop the other server)."""
        if self is ErrorCode.ADDRESS_IN_USE:
            return 5
        status = self.http_status
        if status in (401, 403):
            return 3
        return 2 if status < 500 else 4


class ContextEngineError(Exception):
    """The one root of every error the engine raises to callers (STYLE.md, Errors).

    Args:
        code: the error code; decides the HTTP status and the CLI exit code.
        message: one sentence saying what is wrong and how to fix it.
        details: JSON-serialisable context (never secrets, never another tenant's data).
        retryable: whether the same request may succeed later.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        retryable: bool = False,
    ) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.details = details or {}
        self.retryable = retryable

    def envelope(self, request_id: str | None = None) -> dict[str, Any]:
        """The error envelope of DESIGN §8: ``{code, message, details, request_id}``; a retryable error (a store that
        failed mid-request, a server not ready yet) says so in ``details.retryable``."""
        details = {**self.details, "retryable": True} if self.retryable else self.details
        return {
            "code": self.code.value,
            "message": self.message,
            "details": details,
            "request_id": request_id,
        }
