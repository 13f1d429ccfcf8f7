"""The lean tool schemas (issue 15) accept exactly what the SDK's generated ones accept: only bytes go, never a
constraint. Checked per tool with jsonschema on many argument values, and on small schemas by hand."""

from __future__ import annotations

import itertools

import anyio
import jsonschema
import pytest
from mcp.server.mcpserver import MCPServer

from context_engine.interfaces.mcp.server import EngineMCPServer, build_mcp_server, lean_schema
from context_engine.schema.context import RequestContext

CANDIDATES = [None, 0, -1, 7, 51, 250, 0.5, 2.5, "x", "", "compact", "full", "L2", "skip", True, [], ["a"], [1], {}]
CANDIDATES += [{"a": 1}, {"start": "2024-01-01"}, [{"text": "t"}], [{"role": "user", "content": "c"}], [{"bad": 1}]]


def _tools() -> tuple[dict, dict]:
    server = build_mcp_server(lambda: None, lambda _r: RequestContext(account_id="a", role="admin"))
    assert isinstance(server, EngineMCPServer)

    async def go():
        return await MCPServer.list_tools(server), await server.list_tools()

    generated, lean = anyio.run(go)
    return {t.name: t.input_schema for t in generated}, {t.name: t.input_schema for t in lean}


GENERATED, LEAN = _tools()


def _valid(schema: dict, instance: object) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(instance)


@pytest.mark.parametrize("tool", sorted(GENERATED))
def test_lean_schema_accepts_exactly_what_the_generated_one_accepts(tool):
    generated, lean = GENERATED[tool], LEAN[tool]
    assert len(str(lean)) < len(str(generated))
    required = generated.get("required", [])
    base = {}
    for name in required:  # a valid value for each required property, by its own subschema
        alone = {"$defs": generated.get("$defs", {}), **generated["properties"][name]}
        base[name] = next(v for v in CANDIDATES if jsonschema.Draft202012Validator(alone).is_valid(v))
    assert _valid(generated, base) and _valid(lean, base)
    checked = 0
    for name, value in itertools.product(generated["properties"], CANDIDATES):
        instance = {**base, name: value}
        assert _valid(lean, instance) == _valid(generated, instance), (tool, name, value)
        checked += 1
    assert not _valid(lean, {**base, "no_such_argument": 1}) or _valid(generated, {**base, "no_such_argument": 1})
    assert checked >= len(CANDIDATES)


def test_lean_schema_by_hand():
    generated = {
        "title": "fArguments",
        "type": "object",
        "properties": {
            "title": {"title": "Title", "type": "string"},  # a property named "title" stays
            "k": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None, "title": "K"},
            "mode": {"anyOf": [{"enum": ["a", "b"], "type": "string"}, {"type": "null"}], "default": None},
            "meta": {"anyOf": [{"additionalProperties": True, "type": "object"}, {"type": "null"}]},
            "when": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
            "top_k": {"default": 10, "maximum": 50, "minimum": 1, "type": "integer"},
        },
        "required": ["title"],
    }
    assert lean_schema(generated) == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "k": {"type": ["integer", "null"]},
            "mode": {"anyOf": [{"enum": ["a", "b"], "type": "string"}, {"type": "null"}]},  # enum: kept as is
            "meta": {"type": ["object", "null"]},
            "when": {"type": ["string", "integer", "null"]},
            "top_k": {"default": 10, "maximum": 50, "minimum": 1, "type": "integer"},
        },
        "required": ["title"],
    }
