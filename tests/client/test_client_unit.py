"""Unit tests of the client around its transport (httpx.MockTransport stands in for the server): retries bounded and
only for requests the server did not act on, envelope mapping, local validation, the auth header; and the import
boundary (no engine modules)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys

import httpx
import pytest

from context_engine.client import ApiError, AsyncClient, Client
from context_engine.errors import ContextEngineError, ErrorCode

READY = {"status": "ready", "embedding_model": "m", "index_backend": "lancedb", "auth": "api_key", "pid": 4242}


def envelope(code: str, status: int) -> httpx.Response:
    body = {"code": code, "message": f"{code} happened", "details": {"k": 1}, "request_id": "r1"}
    return httpx.Response(status, json=body)


class Server:
    """Answers from a list, then repeats the last; records the requests."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def client(server: Server, **kw) -> Client:
    return Client("http://ce.test", "ce_k_s", transport=httpx.MockTransport(server), backoff_s=0, **kw)


def test_not_ready_is_retried_then_succeeds() -> None:
    server = Server(envelope("API-5031", 503), envelope("API-5031", 503), httpx.Response(200, json=READY))
    assert client(server, retries=2).ready().status == "ready"
    assert len(server.requests) == 3
    assert server.requests[0].headers["authorization"] == "Bearer ce_k_s"


def test_retries_are_bounded() -> None:
    server = Server(envelope("API-5031", 503))
    with pytest.raises(ApiError) as err:
        client(server, retries=3).ready()
    assert err.value.code is ErrorCode.NOT_READY and err.value.retryable
    assert len(server.requests) == 4


def test_a_write_that_did_not_get_its_turn_is_retried_then_lands() -> None:
    """``503 WRT-5032``: the home's other writers were ahead and nothing was written, so repeating it is safe."""
    report = {"nodes": 1, "uris": ["ctx://user/default/memories/events/m.md"]}
    server = Server(envelope("WRT-5032", 503), httpx.Response(200, json=report))
    assert client(server, retries=2).add_memory("The release ships on Friday.").nodes == 1
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("answer", "code", "status"),
    [
        (envelope("RET-4032", 403), ErrorCode.URI_FORBIDDEN, 403),
        (envelope("API-5001", 500), ErrorCode.INTERNAL, 500),
        (httpx.Response(502, text="<html>bad gateway</html>"), ErrorCode.UNREACHABLE, 502),
    ],
)
def test_other_errors_are_raised_at_once(answer: httpx.Response, code: ErrorCode, status: int) -> None:
    server = Server(answer)
    with pytest.raises(ApiError) as err:
        client(server).read_memory("ctx://resources/x.md")
    assert (err.value.code, err.value.status_code, err.value.retryable) == (code, status, False)
    assert isinstance(err.value, ContextEngineError)
    assert len(server.requests) == 1


def test_envelope_fields_and_unknown_codes() -> None:
    with pytest.raises(ApiError) as err:
        client(Server(envelope("RET-4032", 403))).get_memory("ctx://user/a/memories/x.md")
    assert (err.value.message, err.value.details, err.value.request_id) == ("RET-4032 happened", {"k": 1}, "r1")
    with pytest.raises(ApiError) as err:
        client(Server(envelope("NEW-4009", 400))).search_memory("q")
    assert err.value.code is ErrorCode.REQUEST_INVALID and err.value.details["server_code"] == "NEW-4009"


def test_request_bodies_and_local_validation() -> None:
    ok = httpx.Response(200, json={"nodes": 1, "uris": ["ctx://user/a/memories/general/x.md"]})
    server = Server(ok)
    client(server).add_memory("hello", category="general")
    assert json.loads(server.requests[0].content) == {"text": "hello", "category": "general"}  # only what was set
    with pytest.raises(ApiError) as err:
        client(server).add_memory("hello", colour="blue")
    assert err.value.code is ErrorCode.REQUEST_INVALID and err.value.details["errors"][0]["loc"] == ["colour"]
    with pytest.raises(ApiError) as err:
        client(server).search_memory("q", top_k="many")
    assert err.value.code is ErrorCode.QUERY_INVALID
    assert len(server.requests) == 1  # the invalid calls sent nothing


def test_response_format_is_fixed_per_method() -> None:
    compact = {
        "request_id": "r1",
        "match_quality": "weak",
        "hits": [
            {"uri": "ctx://resources/x.md", "level": "L0", "score": 0.5, "abstract": "x", "read_recommendation": "none"}
        ],
    }
    server = Server(httpx.Response(200, json=compact))
    res = client(server).search_memory_compact("q", top_k=2)
    assert res.hits[0].uri == "ctx://resources/x.md" and res.warnings == [] and res.debug is None
    assert res.match_quality == "weak"
    assert json.loads(server.requests[0].content) == {"query": "q", "top_k": 2, "response_format": "compact"}
    lookup = {"invocation_id": "i1", "session_id": None, "evidence_status": "no_evidence", "evidence": []}
    server = Server(httpx.Response(200, json=lookup))
    assert client(server).lookup_knowledge_compact("q", include_debug=True).invocation_id == "i1"
    # LookupRequest leaves these two out of its dumps (the audit row); the request still carries them
    assert json.loads(server.requests[0].content) == {"query": "q", "response_format": "compact", "include_debug": True}
    with pytest.raises(ApiError) as err:
        client(server).lookup_knowledge("q", response_format="compact")
    assert err.value.code is ErrorCode.QUERY_INVALID and err.value.details["errors"][0]["loc"] == ["response_format"]
    with pytest.raises(ApiError) as err:  # a full answer where the compact one was asked for
        client(
            Server(httpx.Response(200, json={"request_id": "r1", "hits": [], "typed_queries": []}))
        ).search_memory_compact("q")
    assert err.value.code is ErrorCode.UNREACHABLE and "SearchMemoryCompact" in err.value.message
    assert len(server.requests) == 1


def test_path_parameters() -> None:
    server = Server(envelope("RET-4041", 404))
    with pytest.raises(ApiError) as err:
        client(server).get_tool_invocation("a/b c")
    assert err.value.code is ErrorCode.TARGET_NOT_FOUND and err.value.status_code == 404
    assert server.requests[0].url.raw_path == b"/api/v1/tool_invocations/a%2Fb%20c"
    with pytest.raises(ApiError) as err:
        client(server).get_tool_invocation("")
    assert err.value.code is ErrorCode.QUERY_INVALID and len(server.requests) == 1


def test_query_parameters() -> None:
    page = {"items": [], "total": 0, "offset": 0, "limit": 5, "next_offset": None}
    server = Server(httpx.Response(200, json=page))
    client(server).list_memories(conversation_id="s1", limit=5)
    assert dict(server.requests[0].url.params) == {"conversation_id": "s1", "limit": "5", "offset": "0"}


def test_a_body_that_does_not_match_the_model() -> None:
    with pytest.raises(ApiError) as err:
        client(Server(httpx.Response(200, json={"status": "ready"}))).ready()
    assert err.value.code is ErrorCode.UNREACHABLE and "ReadyResponse" in err.value.message


def test_connection_refused_is_retried_and_bounded() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Client(f"http://127.0.0.1:{port}", retries=1, backoff_s=0) as c, pytest.raises(ApiError) as err:
        c.health()
    assert err.value.code is ErrorCode.UNREACHABLE and err.value.retryable and err.value.status_code is None


def test_settings_are_checked() -> None:
    with pytest.raises(ContextEngineError) as err:
        Client(retries=11)
    assert err.value.code is ErrorCode.CONFIG_INVALID
    assert "ce_secret" not in repr(Client(api_key="ce_secret"))


def test_async_retry_and_errors() -> None:
    server = Server(envelope("API-5031", 503), httpx.Response(200, json=READY), envelope("RET-4002", 400))

    async def run() -> None:
        async with AsyncClient("http://ce.test", "k", transport=httpx.MockTransport(server), backoff_s=0) as c:
            assert (await c.ready()).status == "ready"
            with pytest.raises(ApiError) as err:
                await c.search_memory("q", top_k=0)
            assert err.value.code is ErrorCode.TOP_K_OUT_OF_RANGE

    asyncio.run(run())
    assert len(server.requests) == 3


def test_import_loads_no_engine_modules() -> None:
    code = (
        "import sys, context_engine.client\n"
        "heavy = ('fastapi', 'starlette', 'uvicorn', 'torch', 'lancedb', 'pyarrow', 'sqlalchemy', "
        "'sentence_transformers', 'mcp', 'onnxruntime')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
