"""The lean tool schemas (issue 15) accept exactly what the SDK's generated ones accept: only bytes go, never a
constraint. Checked per tool with jsonschema on many argument values, and on small schemas by hand.

One documented difference (issue 29, MCP Inspector ``--strict``): an optional argument whose default is ``null``
does not advertise ``null``: it is left out to mean the default (the tools still accept an explicit null). And one
more (issue 29, one word per concept): an argument kept under its old name (``session_id`` for ``conversation_id``,
marked ``deprecated``) is still accepted but not advertised, and the new name is listed as required where the old
one was (``REQUIRED_ARGS``)."""

from __future__ import annotations

import itertools

import anyio
import jsonschema
import pytest
from mcp.server.mcpserver import MCPServer

from context_engine.interfaces.mcp.server import REQUIRED_ARGS, EngineMCPServer, build_mcp_server, lean_schema
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
    required = lean.get("required", [])  # the generated list, and REQUIRED_ARGS
    assert set(generated.get("required", [])) <= set(required) and set(required) - set(
        generated.get("required", [])
    ) == set(REQUIRED_ARGS.get(tool, ()))
    base = {}
    for name in required:  # a valid value for each required property, by its own subschema
        alone = [{"$defs": schema.get("$defs", {}), **schema["properties"][name]} for schema in (generated, lean)]
        base[name] = next(v for v in CANDIDATES if all(_valid(a, v) for a in alone))
    assert _valid(generated, base) and _valid(lean, base)
    checked = 0
    for name, value in itertools.product(generated["properties"], CANDIDATES):
        instance = {**base, name: value}
        prop = generated["properties"][name]
        if prop.get("deprecated") is True:  # an old name: accepted by the tool, not advertised
            assert name not in lean["properties"], (tool, name)
            continue
        if value is None and "default" in prop and prop["default"] is None:  # null means "not given": leave it out
            assert _valid(generated, instance) and not _valid(lean, instance) and _valid(lean, base), (tool, name)
        else:
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
            "k": {"type": "integer"},  # default null: the null branch goes, absent means the default
            "mode": {"enum": ["a", "b"], "type": "string"},
            "meta": {"anyOf": [{"type": "object"}, {"type": "null"}]},  # no default: null stays, as a branch
            "when": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},  # never a type array
            "top_k": {"default": 10, "maximum": 50, "minimum": 1, "type": "integer"},
        },
        "required": ["title"],
    }


def test_lean_schema_keeps_a_union_that_is_more_than_null():
    generated = {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/X"}, {"type": "null"}], "default": None}
    assert lean_schema(generated) == {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/X"}]}
    assert lean_schema({"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}], "default": None}) == {"$ref": "#/$defs/X"}
