"""How ``/mcp`` answers a request it refuses before the MCP server sees it (no valid API key, engine not ready).

MCP clients read an HTTP ``401`` as the start of the MCP authorization flow (OAuth 2.1: the ``WWW-Authenticate``
challenge, then protected-resource metadata, RFC 9728): the SDKs raise their ``UnauthorizedError`` and the MCP
Inspector starts an interactive OAuth login, so the body, our envelope, never reaches the user. This server
authenticates with API keys and has no authorization server, so ``/mcp`` answers a missing, malformed, unknown or
revoked key the way the streamable HTTP transport answers input it cannot accept: ``400`` with a JSON-RPC error
response in the body (MCP 2025-06-18, basic/transports: "the server MUST return an HTTP error status code (e.g.,
400 Bad Request). The HTTP response body MAY comprise a JSON-RPC error response"). The error is
``{"code": -32001, "message": "AUTH-4011: <message>", "data": <the envelope>}``, with the request's ``id`` when
the body is a JSON-RPC request (``null`` otherwise), no ``WWW-Authenticate`` header and no OAuth metadata
(``/.well-known/oauth-protected-resource`` is ``404``). The other routes keep ``401`` and the envelope.

Every other refusal (``API-5031`` while the engine starts) keeps the envelope and its status.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Receive, Scope, Send

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.http.errors import envelope_response
from context_engine.interfaces.http.responses import RedactedJSONResponse

MCP_UNAUTHENTICATED = -32001
"""The JSON-RPC error code of an MCP request without a valid API key (implementation-defined server error range,
-32000..-32099, of JSON-RPC 2.0)."""

MCP_UNAUTHENTICATED_STATUS = 400
"""The HTTP status of that answer: an error status that is not ``401``/``403`` (read as OAuth challenges)."""


async def _body(receive: Receive) -> bytes:
    # bounded: RequestMiddleware refuses a body over http.max_request_bytes before it gets here
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def request_id_of_jsonrpc(body: bytes) -> str | int | None:
    """The ``id`` of ``body`` when it is one JSON-RPC request (a string or integer id), else ``None``."""
    try:
        message: Any = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    rid = message.get("id")
    return rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


def jsonrpc_error_body(err: ContextEngineError, request_id: str | None, rpc_id: str | int | None) -> dict[str, Any]:
    """The JSON-RPC error response for ``err``: the code and message first (what clients print), the envelope as
    ``data``."""
    return {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "error": {
            "code": MCP_UNAUTHENTICATED,
            "message": f"{err.code.value}: {err.message}",
            "data": err.envelope(request_id),
        },
    }


async def refuse_mcp_request(
    err: ContextEngineError, request_id: str | None, scope: Scope, receive: Receive, send: Send
) -> None:
    """Answer a refused ``/mcp`` request: ``AUTH-4011`` as a JSON-RPC error at ``400`` (see the module docstring),
    any other error as its envelope at its own status."""
    if err.code is not ErrorCode.UNAUTHENTICATED:
        await envelope_response(err, request_id)(scope, receive, send)
        return
    rpc_id = request_id_of_jsonrpc(await _body(receive)) if scope.get("method") == "POST" else None
    headers = {"X-Request-ID": request_id} if request_id else {}
    body = jsonrpc_error_body(err, request_id, rpc_id)
    await RedactedJSONResponse(body, status_code=MCP_UNAUTHENTICATED_STATUS, headers=headers)(scope, receive, send)
