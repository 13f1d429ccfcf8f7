"""Bad input over MCP (issue 14): an unknown tool is a JSON-RPC error; invalid Unicode in any argument of any tool
is the envelope with ``WRT-4221`` (write and memory tools) or ``RET-4001`` (read tools), and nothing is written.

The SDK's client cannot send a lone surrogate (it encodes the request as UTF-8 first), so the walk over the tools'
input schemas calls the server object, and one raw JSON-RPC request goes over the real HTTP endpoint.
"""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from context_engine.interfaces.http import create_app
from context_engine.interfaces.mcp.server import EngineMCPServer, build_mcp_server
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.http.helpers import SAMPLE_CORPUS, LiveServer, bearer
from tests.http.test_bad_input import _string_paths, _with_surrogate

ADMIN = RequestContext(account_id="acme", role="admin")


@pytest.fixture(scope="module")
def service(tmp_path_factory, embedder):
    svc = ContextEngineService(load_settings(tmp_path_factory.mktemp("mcp-bad-home")), embedder=embedder)
    svc.add_resource(SAMPLE_CORPUS / "kubernetes", "ctx://resources/kubernetes/", ADMIN)
    yield svc
    svc.close()


def _nodes(service) -> list[str]:
    return sorted(n.uri for n in service.metadata.list_all_nodes("acme"))


def test_unknown_tool_is_a_json_rpc_error(service):
    async def go():
        async with Client(build_mcp_server(lambda: service, lambda _r: ADMIN)) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("drop_everything", {"x": 1})
            ok = await client.call_tool("search_memory", {"query": "pod restarts", "top_k": 1})
            return caught.value, ok

    err, ok = anyio.run(go)
    assert err.code == INVALID_PARAMS
    assert "drop_everything" in err.message
    assert "search_memory" in err.data["tools"]
    assert not ok.is_error  # the session goes on after the error


def test_invalid_unicode_in_every_tool_argument(service):
    server = build_mcp_server(lambda: service, lambda _r: ADMIN)
    assert isinstance(server, EngineMCPServer)

    async def go():
        tools = await server.list_tools()
        results = []
        for tool in tools:
            spec = {"components": {"schemas": tool.input_schema.get("$defs", {})}}
            schema = json.loads(json.dumps(tool.input_schema).replace("#/$defs/", "#/components/schemas/"))
            for path in _string_paths(spec, schema):
                args = _with_surrogate(spec, schema, path)
                results.append((tool.name, path, await server.call_tool(tool.name, args)))
        return results

    before = _nodes(service)
    results = anyio.run(go)
    assert len({(name, path) for name, path, _ in results}) >= 40
    bad = []
    for name, path, res in results:
        code = "WRT-4221" if name in EngineMCPServer.write_tools else "RET-4001"
        body = res.structured_content or {}
        if not (res.is_error and body.get("code") == code and body["details"].get("reason") == "invalid_unicode"):
            bad.append((name, path, body.get("code")))
    assert bad == []
    assert _nodes(service) == before


def test_raw_json_rpc_with_a_surrogate_over_http(service):
    _, token = ApiKeyStore(service.metadata).create(ADMIN, "mcp-bad")
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "add_memory", "arguments": {"text": "note \ud800"}},
    }
    before = _nodes(service)
    with LiveServer(create_app(service=service)) as live:
        resp = httpx.post(
            f"{live.url}/mcp",
            content=json.dumps(request),
            headers={
                **bearer(token),
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-06-18",
            },
            timeout=60,
        )
    assert resp.status_code < 500, resp.text
    body = resp.json()
    if "error" in body:  # the transport refused the JSON itself (a JSON-RPC parse error)
        assert body["error"]["code"] < 0
    else:
        assert body["result"]["isError"] is True
        assert body["result"]["structuredContent"]["code"] == "WRT-4221"
    assert _nodes(service) == before
