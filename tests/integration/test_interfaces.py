"""One scenario through every interface, on the real parts: the same question gets the same answer.

Scenario: ingest the sample corpus (server-side path below an allowed root), search_memory, read L1 then L2 of the
best hit, lookup_knowledge twice in one session (the second returns DEDUPED), verify an evidence excerpt.

Interfaces: the Python API (the service), HTTP against uvicorn on a free loopback port, MCP over streamable HTTP on
that same server, and MCP over stdio (the SDK's client launching ``context-engine mcp`` as a subprocess: one more
model load). Each runs in its own account, so every ingest starts from nothing; the normalised transcripts (ids,
timestamps and timings removed, floats rounded) must be identical.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from context_engine.interfaces.http import create_app
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import LookupRequest
from context_engine.schema.query import ReadMemoryRequest, SearchMemoryRequest
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.http.helpers import SAMPLE_CORPUS, LiveServer, bearer

pytestmark = pytest.mark.slow

SEARCH = {"query": "documentation: TLS certificate expiring soon", "top_k": 5}
LOOKUP = "TLS certificate expires soon on the ingress"
SESSION = "diag-1"
_HEX_ID = re.compile(r"\b[0-9a-f]{16,32}\b")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
_ACCOUNT = re.compile(r"\bvia_[a-z_]+\b")  # each interface runs in its own account
_VOLATILE = {
    "request_id",
    "invocation_id",
    "first_invocation_id",
    "matched_invocation_id",
    "created_at",
    "took_ms",
    "duration_ms",
    "traces",
    "event_count",
}


def normalise(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: normalise(v) for k, v in x.items() if k not in _VOLATILE and not k.endswith("_ms")}
    if isinstance(x, list):
        return [normalise(v) for v in x]
    if isinstance(x, float):
        return round(x, 5)
    if isinstance(x, str):
        return _ACCOUNT.sub("<account>", _TIME.sub("<time>", _HEX_ID.sub("<id>", x)))
    return x


@pytest.fixture(scope="module")
def world(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("allowed")
    shutil.copytree(SAMPLE_CORPUS, root / "corpus")
    home = tmp_path_factory.mktemp("home")
    settings = load_settings(home, http={"allowed_upload_roots": (root,)})
    service = ContextEngineService(settings, embedder=embedder)
    keys = ApiKeyStore(service.metadata)
    _, http_key = keys.create(RequestContext(account_id="via_http", role="admin"), "http")
    _, mcp_key = keys.create(RequestContext(account_id="via_mcp_http", role="admin"), "mcp-http")
    with LiveServer(create_app(service=service)) as server:
        yield {
            "service": service,
            "server": server,
            "root": root,
            "home": home,
            "http_key": http_key,
            "mcp_key": mcp_key,
        }
    service.close()


# ---- the scenario, once per interface -------------------------------------------------------------------------------
def scenario(call) -> dict[str, Any]:
    """``call(op, args) -> dict`` performs one operation; returns the normalised transcript."""
    out: dict[str, Any] = {}
    out["ingest"] = call("add_resource", {"path": "corpus", "target_uri": "ctx://resources/"})
    search = call("search_memory", SEARCH)
    out["search"] = search
    top = search["hits"][0]["uri"]
    out["read_l1"] = call("read_memory", {"uri": top, "level": "L1"})
    out["read_l2"] = call("read_memory", {"uri": top, "level": "L2"})
    first = call("lookup_knowledge", {"query": LOOKUP, "session_id": SESSION})
    second = call("lookup_knowledge", {"query": LOOKUP, "session_id": SESSION})
    out["lookup_1"], out["lookup_2"] = first, second
    excerpt = first["evidence_blocks"][0]["text"][:80]
    out["verify"] = call("verify_evidence", {"invocation_id": first["invocation_id"], "excerpt": excerpt})
    return normalise(out)


def python_call(service: ContextEngineService, root: Path, ctx: RequestContext):
    def call(op: str, args: dict[str, Any]) -> dict[str, Any]:
        if op == "add_resource":
            result = service.add_resource(root / args["path"], args["target_uri"], ctx)
        elif op == "search_memory":
            result = service.search_memory(SearchMemoryRequest(**args), ctx)
        elif op == "read_memory":
            result = service.read_memory(ReadMemoryRequest(**args), ctx)
        elif op == "lookup_knowledge":
            result = service.lookup_knowledge(LookupRequest(**args), ctx)
        else:
            result = service.verify_evidence(args["invocation_id"], args["excerpt"], ctx)
        return result.model_dump(mode="json")

    return call


HTTP_ROUTES = {
    "add_resource": "/api/v1/resources",
    "search_memory": "/api/v1/search_memory",
    "read_memory": "/api/v1/read_memory",
    "lookup_knowledge": "/api/v1/lookup_knowledge",
    "verify_evidence": "/api/v1/verify_evidence",
}


def http_call(client: httpx.Client):
    def call(op: str, args: dict[str, Any]) -> dict[str, Any]:
        r = client.post(HTTP_ROUTES[op], json=args)
        assert r.status_code == 200, r.text
        return r.json()

    return call


def mcp_args(op: str, args: dict[str, Any]) -> dict[str, Any]:
    if op == "add_resource":
        return {"path": args["path"], "uri": args["target_uri"]}
    if op in ("search_memory", "lookup_knowledge"):  # compact by default over MCP; the scenario compares full answers
        return {**args, "response_format": "full"}
    return args


def run_mcp(client_factory) -> dict[str, Any]:
    """Run the scenario with one MCP client session (the SDK's ``Client``), from a worker thread's event loop."""
    results: dict[str, Any] = {}

    async def go() -> None:
        async with client_factory() as client:

            async def acall(op: str, args: dict[str, Any]) -> dict[str, Any]:
                res = await client.call_tool(op, mcp_args(op, args))
                assert not res.is_error, res.content[0].text
                return res.structured_content

            pending: list[tuple[str, dict[str, Any]]] = []

            def call(op: str, args: dict[str, Any]) -> dict[str, Any]:
                pending.append((op, args))
                return anyio.from_thread.run(acall, op, args)

            results["transcript"] = await anyio.to_thread.run_sync(scenario, call)

    anyio.run(go)
    return results["transcript"]


# ---- the test -----------------------------------------------------------------------------------------------------
def test_same_answers_through_python_http_and_mcp(world):
    service, root, server = world["service"], world["root"], world["server"]
    expected = scenario(python_call(service, root, RequestContext(account_id="via_python", role="admin")))
    assert expected["ingest"]["nodes"] == 8 and expected["ingest"]["failed"] == 0
    assert expected["search"]["hits"][0]["uri"] == "ctx://resources/networking/CertificateExpiringSoon.md"
    assert expected["read_l1"]["block"]["overview"] and expected["read_l2"]["block"]["content_excerpt"]
    assert expected["lookup_1"]["evidence_status"] == "found"
    assert expected["lookup_2"]["evidence_blocks"][0]["relevance_level"] == "DEDUPED"
    assert expected["verify"]["verified"] is True

    with httpx.Client(base_url=server.url, headers=bearer(world["http_key"]), timeout=60) as client:
        via_http = scenario(http_call(client))
    assert via_http == expected

    def mcp_http_client():
        http = httpx2.AsyncClient(headers=bearer(world["mcp_key"]), timeout=60)
        return Client(streamable_http_client(f"{server.url}/mcp", http_client=http))

    assert run_mcp(mcp_http_client) == expected

    # MCP over stdio: the SDK's client launches `context-engine mcp` (a new process, its own model load). It runs
    # last: the in-process server has finished writing, so the two processes never write the index concurrently.
    exe = Path(sys.executable).with_name("context-engine")
    params = StdioServerParameters(
        command=str(exe),
        args=["--home", str(world["home"]), "--as", "via_mcp_stdio:admin", "mcp"],
        env={
            "CE_HTTP__ALLOWED_UPLOAD_ROOTS": f'["{root}"]',
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            **{
                k: v
                for k, v in os.environ.items()
                if k.startswith(("OMP_", "MKL_", "TORCH", "HF_HOME", "CE_EMBEDDING__", "PYTHONPATH"))
            },
        },
    )
    assert run_mcp(lambda: Client(params, read_timeout_seconds=120)) == expected

    # each interface wrote into the account its credentials name, and only there
    for account in ("via_python", "via_http", "via_mcp_http", "via_mcp_stdio"):
        nodes = service.ls("ctx://resources/", RequestContext(account_id=account, role="admin"))
        assert {n.uri for n in nodes} >= {"ctx://resources/kubernetes/"}, account
    assert service.ls("ctx://resources/", RequestContext(account_id="default", role="admin")) == []


def test_mcp_over_http_needs_a_key(world):
    # 400 with a JSON-RPC error carrying the envelope, not 401: MCP clients take a 401 for an OAuth challenge and
    # never show the body (tests/mcp/test_mcp_http_auth.py; docs/interfaces.md, MCP)
    server = world["server"]
    r = httpx.post(
        f"{server.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert r.status_code == 400 and r.json()["id"] == 1
    assert r.json()["error"]["data"]["code"] == "AUTH-4011"
