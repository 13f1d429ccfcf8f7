"""An engine opened for an interface names its caller on every call (issue 28: ``ctx`` required below the interfaces).

``build_engine`` (CLI, HTTP, MCP, eval) binds no default caller: a tenant-bound call without ``ctx`` is ``AUTH-4011``,
never a silent admin of account ``default``. The embedded Python API (``ContextEngineService(settings)``) keeps its
documented default, :data:`DEFAULT_CONTEXT`. HTTP and MCP on such an engine answer (their calls pass the caller's
context), and no call of a tenant-bound method in ``interfaces/``, ``api/``, ``eval/`` or ``warm_up.py`` leaves
``ctx`` out (read from the source with ``ast``).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import anyio
import pytest
from fastapi.testclient import TestClient

from context_engine.engine_factory import build_engine
from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.http import create_app
from context_engine.interfaces.mcp.server import build_mcp_server
from context_engine.schema.context import DEFAULT_CONTEXT, RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.http.helpers import LOOPBACK_URL, bearer
from tests.retrieval.conftest import HashEmbedder

SRC = Path(__file__).resolve().parents[1] / "src" / "context_engine"
ALICE = RequestContext(account_id="default", role="user", user_space="alice")
DOC = "# Disk pressure\n\nThe node is running out of disk space: delete old images.\n"


def _tenant_bound() -> dict[str, inspect.Signature]:
    """The service's public methods that take a ``ctx``, with their signatures."""
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(ContextEngineService, inspect.isfunction)
        if not name.startswith("_") and "ctx" in inspect.signature(member).parameters
    }


def _without_ctx(sig: inspect.Signature) -> list[str]:
    """Placeholder arguments for the parameters before ``ctx`` that have no default (the caller is checked first)."""
    out = []
    for name, param in list(sig.parameters.items())[1:]:
        if name == "ctx":
            break
        if param.default is inspect.Parameter.empty:
            out.append("x")
    return out


@pytest.fixture
def interface_engine(tmp_path):
    engine = build_engine(load_settings(tmp_path / "home"), embedder=HashEmbedder())
    engine.add_text(DOC, "ctx://resources/ops/disk.md", DEFAULT_CONTEXT)
    yield engine
    engine.close()


def test_an_interface_engine_refuses_every_tenant_bound_call_without_ctx(interface_engine):
    methods = _tenant_bound()
    assert {"search_memory", "read_memory", "lookup_knowledge", "add_memory", "ls", "stats"} <= set(methods)
    assert len(methods) >= 30
    assert interface_engine.default_context is None
    for name, sig in methods.items():
        with pytest.raises(ContextEngineError) as refused:
            getattr(interface_engine, name)(*_without_ctx(sig))
        assert refused.value.code is ErrorCode.UNAUTHENTICATED, name
        assert refused.value.code.value == "AUTH-4011"
        assert refused.value.details == {"field": "ctx"}, name
        assert "ctx=RequestContext" in refused.value.message


def test_an_interface_engine_answers_a_call_that_names_its_caller(interface_engine):
    found = interface_engine.search_memory("disk space", DEFAULT_CONTEXT, top_k=3)
    assert [h.uri for h in found.hits][:1] == ["ctx://resources/ops/disk.md"]
    assert interface_engine.ls("ctx://resources/ops/", ALICE)[0].uri == "ctx://resources/ops/disk.md"


def test_the_embedded_engine_acts_for_its_documented_default(tmp_path):
    with ContextEngineService(load_settings(tmp_path / "home"), embedder=HashEmbedder()) as engine:
        assert engine.default_context == DEFAULT_CONTEXT
        engine.add_text(DOC, "ctx://resources/ops/disk.md")
        assert engine.search_memory("disk space", top_k=3).hits
        assert engine.stats()["nodes"] == engine.stats(DEFAULT_CONTEXT)["nodes"]


def test_http_and_mcp_pass_the_callers_context_to_an_interface_engine(interface_engine):
    _, token = ApiKeyStore(interface_engine.metadata).create(ALICE, "alice")
    with TestClient(create_app(service=interface_engine), base_url=LOOPBACK_URL, client=("127.0.0.1", 40000)) as c:
        search = c.post("/api/v1/search_memory", json={"query": "disk space", "top_k": 3}, headers=bearer(token))
        assert search.status_code == 200, search.text
        assert search.json()["hits"][0]["uri"] == "ctx://resources/ops/disk.md"
        ls = c.get("/api/v1/ls", params={"uri": "ctx://resources/ops/"}, headers=bearer(token))
        assert ls.status_code == 200, ls.text
    server = build_mcp_server(lambda: interface_engine, lambda _request: ALICE)
    result = anyio.run(server.call_tool, "search_memory", {"query": "disk space", "top_k": 3})
    assert not result.is_error, result.structured_content


def _calls_without_ctx(path: Path, methods: dict[str, inspect.Signature]) -> list[str]:
    """``file:line method`` for each call ``<obj>.<method>(...)`` of a tenant-bound method that passes no ``ctx``
    (neither by keyword nor at its position, nor through ``*args``/``**kwargs``); calls on ``self`` and on the
    HTTP client are other methods of the same names."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in methods):
            continue
        owner = ast.unparse(node.func.value)
        if owner == "self" or owner.endswith("client") or owner.startswith(("calls", "os.", "Path", "sys.")):
            continue
        params = list(methods[node.func.attr].parameters)[1:]
        position = params.index("ctx")
        passed = (
            any(k.arg in ("ctx", None) for k in node.keywords)
            or len(node.args) > position
            or any(isinstance(a, ast.Starred) for a in node.args)
        )
        if not passed:
            out.append(f"{path.relative_to(SRC)}:{node.lineno} {owner}.{node.func.attr}")
    return out


def test_every_interface_call_of_a_tenant_bound_method_passes_ctx():
    methods = _tenant_bound()
    # `read`, `stat` and `delete` are also file and store verbs; only engine receivers are checked for them
    engine_names = ("engine", "service", "svc", "_engine", "self._engine", "state.service")
    files = [
        *sorted((SRC / "interfaces").rglob("*.py")),
        *sorted((SRC / "api").rglob("*.py")),
        *sorted((SRC / "eval").rglob("*.py")),
        SRC / "warm_up.py",
    ]
    missing = [
        call
        for path in files
        for call in _calls_without_ctx(path, methods)
        if call.split(" ")[1].rpartition(".")[0] in engine_names
        or call.split(".")[-1] not in ("read", "stat", "delete", "move")
    ]
    assert missing == []
