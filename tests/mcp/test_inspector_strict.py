"""The tool list passes MCP Inspector's ``--strict`` portability rules with 0 errors and 0 warnings (issue 29).

Always: the rules, ported to Python (tests/mcp/schema_portability.py, from the Inspector 2.12.0 source), run on the
tool list as the server sends it. Where the Inspector is installed (``$MCP_INSPECTOR`` or ``mcp-inspector`` on the
PATH, and node; nothing is downloaded at test time), the real ``--cli --method tools/list --strict`` runs against
``context-engine mcp`` too. Before issue 29 both reported 35 warnings (nullable arguments written as type arrays)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from context_engine.interfaces.mcp.server import build_mcp_server
from context_engine.schema.context import RequestContext
from tests.mcp.schema_portability import Finding, inspector_command, lint_tools

EXE = Path(sys.executable).with_name("context-engine")


def _tools_as_sent() -> list[dict]:
    server = build_mcp_server(lambda: None, lambda _r: RequestContext(account_id="a", role="admin"))
    tools = anyio.run(server.list_tools)
    return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]


def test_the_tool_list_passes_the_strict_rules():
    tools = _tools_as_sent()
    assert {"ls", "tree", "add_messages", "search_memory"} <= {t["name"] for t in tools}
    assert lint_tools(tools) == []


def test_the_rules_find_each_kind_of_problem():
    schema = {
        "type": "object",
        "properties": {
            "nullable": {"type": ["string", "null"]},  # how lean_schema wrote optional arguments before
            "anything": {"description": "no constraint at all"},
            "remote": {"$ref": "https://example.com/s.json"},
            "local": {"$ref": "#/$defs/X"},
            "forbidden": False,
            "free": {"type": "object", "additionalProperties": True},  # a boolean here is fine
            "negated": {"not": {}},  # {} directly under not is fine
        },
        "$defs": {"X": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    }
    found = lint_tools([{"name": "t", "inputSchema": schema}])
    assert sorted(found, key=lambda f: f.path) == [
        Finding("t", "untyped-schema", "warning", "inputSchema.properties.anything"),
        Finding("t", "boolean-schema", "error", "inputSchema.properties.forbidden"),
        Finding("t", "type-union", "warning", "inputSchema.properties.nullable"),
        Finding("t", "remote-ref", "warning", "inputSchema.properties.remote"),
    ]


@pytest.mark.slow
def test_the_real_inspector_strict_reports_nothing(tmp_path):
    command = inspector_command()
    if command is None:
        pytest.skip("MCP Inspector not installed (set MCP_INSPECTOR or put mcp-inspector on the PATH)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CE_")}
    env.update(HOME=str(tmp_path), HF_HUB_OFFLINE="1", CE_EMBEDDING__BACKEND="sentence-transformers")
    run = subprocess.run(
        [*command, "--cli", "--method", "tools/list", "--strict", "--", str(EXE), "--home", str(tmp_path / "h"), "mcp"],
        capture_output=True, text=True, timeout=240, env=env, check=False,
    )  # fmt: skip
    report = [line for line in run.stderr.splitlines() if not line.startswith("{")]  # the server's log is JSON
    assert run.returncode == 0, run.stderr[-3000:]
    assert '"ls"' in run.stdout and '"tree"' in run.stdout
    # with findings the CLI prints "Warning: tool ..."/"Error: tool ..." blocks and "N errors, M warnings across ..."
    assert not [line for line in report if line.startswith(("Warning", "Error")) or "across" in line], report
