"""``/mcp`` without a valid API key (issue 29): MCP clients show our error, never an OAuth login.

MCP clients read a ``401`` as an OAuth challenge (the SDKs' ``UnauthorizedError``; the Inspector starts an
interactive OAuth login), so ``/mcp`` answers ``400`` with a JSON-RPC error whose ``message`` starts with the code
and whose ``data`` is the envelope, without ``WWW-Authenticate`` and without OAuth metadata
(docs/interfaces.md, MCP; ``interfaces/http/mcp_refusal.py``). The API routes keep ``401``. A live server, the
Python SDK's client, and the real MCP Inspector CLI where it is installed."""

from __future__ import annotations

import os
import subprocess

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from context_engine.interfaces.http import create_app
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.http.helpers import LiveServer, bearer
from tests.mcp.schema_portability import inspector_command

pytestmark = pytest.mark.slow

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    service = ContextEngineService(load_settings(tmp_path_factory.mktemp("mcp-auth-home")), embedder=embedder)
    _, key = ApiKeyStore(service.metadata).create(RequestContext(account_id="acme", role="admin"), "k")  # no anonymous
    with LiveServer(create_app(service=service)) as live:
        live.key = key  # type: ignore[attr-defined]
        yield live
    service.close()


def _refusal(r: httpx.Response, rpc_id: object, message: str) -> None:
    assert r.status_code == 400 and "www-authenticate" not in r.headers
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == rpc_id
    error = body["error"]
    assert error["code"] == -32001 and error["message"] == f"AUTH-4011: {message}"
    envelope = {"code": "AUTH-4011", "message": message, "details": {}, "request_id": r.headers["x-request-id"]}
    assert error["data"] == envelope


def test_a_request_without_a_key_gets_a_jsonrpc_error_with_the_envelope(server):
    r = httpx.post(f"{server.url}/mcp", json=INIT, headers=MCP_HEADERS)
    _refusal(r, 7, "no API key given; send the header 'Authorization: Bearer <key>' "
                   "(create one with `context-engine keys create`)")  # fmt: skip
    bad = httpx.post(f"{server.url}/mcp", json={**INIT, "id": "a"}, headers={**MCP_HEADERS, **bearer("ce_x_y")})
    _refusal(bad, "a", "invalid or revoked API key")


def test_what_is_not_a_request_gets_id_null(server):
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    for r in (
        httpx.post(f"{server.url}/mcp", json=note, headers=MCP_HEADERS),
        httpx.post(f"{server.url}/mcp", content=b"{not json", headers=MCP_HEADERS),
        httpx.get(f"{server.url}/mcp", headers=MCP_HEADERS),
    ):
        assert r.status_code == 400 and r.json()["id"] is None and r.json()["error"]["data"]["code"] == "AUTH-4011"


def test_no_oauth_is_advertised_and_the_api_keeps_401(server):
    for path in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
    ):
        assert httpx.get(f"{server.url}{path}").status_code == 404, path
    api = httpx.get(f"{server.url}/api/v1/ls")
    assert api.status_code == 401 and api.json()["code"] == "AUTH-4011"
    assert api.headers["www-authenticate"] == 'Bearer realm="context-engine"'  # no resource_metadata


def _find(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    if isinstance(exc, kind):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        if (found := _find(inner, kind)) is not None:
            return found
    return _find(exc.__cause__, kind) if exc.__cause__ is not None else None


def test_the_python_sdk_client_shows_our_error(server):
    async def go(headers):
        http = httpx2.AsyncClient(headers=headers, timeout=60)
        async with Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
            return await client.list_tools()

    with pytest.raises(Exception) as raised:  # the SDK's task group may wrap it in an ExceptionGroup
        anyio.run(go, {})
    err = _find(raised.value, MCPError)
    assert err is not None, repr(raised.value)
    assert err.error.code == -32001 and err.error.message.startswith("AUTH-4011: no API key given")
    assert err.error.data["code"] == "AUTH-4011"
    assert {"ls", "tree"} <= {t.name for t in anyio.run(go, bearer(server.key)).tools}


def test_the_real_inspector_shows_our_error(server, tmp_path):
    command = inspector_command()
    if command is None:
        pytest.skip("MCP Inspector not installed (set MCP_INSPECTOR or put mcp-inspector on the PATH)")
    env = {**os.environ, "HOME": str(tmp_path)}
    run = subprocess.run(
        [*command, "--cli", f"{server.url}/mcp", "--method", "tools/list"],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "AUTH-4011" in out and "no API key given" in out, out[-2000:]
    assert "auth_required" not in out and "OAuth" not in out, out[-2000:]
    ok = subprocess.run(
        [*command, "--cli", f"{server.url}/mcp", "--method", "tools/list", "--header",
         f"Authorization: Bearer {server.key}"],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert ok.returncode == 0 and '"ls"' in ok.stdout, (ok.stdout + ok.stderr)[-2000:]
