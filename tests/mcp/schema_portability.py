"""MCP Inspector's tool-schema portability rules (``--strict``), in Python, for the tests.

A port of ``core/json/schemaLint.ts`` of ``@modelcontextprotocol/inspector`` 2.12.0 (the CLI's
``--method tools/list --strict``): every schema position of a tool's ``inputSchema`` and ``outputSchema`` is
walked (``properties``, ``patternProperties``, ``dependentSchemas``, ``dependencies``, ``$defs``,
``definitions``; ``allOf``, ``anyOf``, ``oneOf``, ``prefixItems``; ``items``, ``contains``, ``not``,
``propertyNames``, ``if``/``then``/``else``, ``additionalProperties``, ``unevaluatedProperties``,
``additionalItems``, ``unevaluatedItems``, ``contentSchema``; at most 64 deep) and four rules apply:

* ``boolean-schema`` (error): a bare ``true``/``false`` where a schema object is expected (allowed under
  ``additionalProperties``, ``unevaluatedProperties``, ``additionalItems``, ``unevaluatedItems``);
* ``type-union`` (warning): ``type`` is an array of distinct JSON Schema type names, e.g. ``["string", "null"]``;
* ``remote-ref`` (warning): a ``$ref`` not starting with ``#`` in a schema that embeds no ``$id``;
* ``untyped-schema`` (warning): a schema with no constraining keyword at all (except directly under ``not``).

tests/mcp/test_inspector_strict.py runs these on the tool list, and the real Inspector too where it is installed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

BOOLEAN_VALUED = {"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"}
SUBSCHEMA = [
    "items", "contains", "not", "propertyNames", "if", "then", "else", "additionalProperties",
    "unevaluatedProperties", "additionalItems", "unevaluatedItems", "contentSchema",
]  # fmt: skip
SUBSCHEMA_ARRAY = ["allOf", "anyOf", "oneOf", "prefixItems"]
SUBSCHEMA_MAP = ["properties", "patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions"]
CONSTRAINING = {
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "format", "contentMediaType", "contentEncoding", "contentSchema",
    "maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties",
    "required", "dependentRequired", "allOf", "anyOf", "oneOf", "not", "items", "prefixItems", "contains",
    "additionalItems", "unevaluatedItems", "properties", "patternProperties", "additionalProperties",
    "unevaluatedProperties", "propertyNames", "dependentSchemas", "dependencies", "$ref", "$dynamicRef",
    "$recursiveRef",
}  # fmt: skip
TYPES = {"null", "boolean", "object", "array", "number", "string", "integer"}
MAX_DEPTH = 64
_NAME = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


@dataclass(frozen=True)
class Finding:
    tool: str
    rule: str
    severity: str  # "error" or "warning"
    path: str  # e.g. "inputSchema.properties.session_id"


def _child(parent: str, key: str) -> str:
    if _NAME.match(key):
        return f"{parent}.{key}" if parent else key
    return f'{parent}["{key}"]'


def _subschemas(node: dict[str, Any], path: str) -> list[tuple[Any, str, str]]:
    out: list[tuple[Any, str, str]] = []
    for key in SUBSCHEMA_MAP:
        if isinstance(node.get(key), dict):
            out += [(sub, _child(_child(path, key), name), key) for name, sub in node[key].items()]
    for key in SUBSCHEMA_ARRAY:
        if isinstance(node.get(key), list):
            out += [(sub, f"{_child(path, key)}[{i}]", key) for i, sub in enumerate(node[key])]
    for key in SUBSCHEMA:
        if key not in node:
            continue
        if key == "items" and isinstance(node[key], list):
            out += [(sub, f"{_child(path, key)}[{i}]", key) for i, sub in enumerate(node[key])]
        else:
            out.append((node[key], _child(path, key), key))
    return out


def _declares_id(node: Any, depth: int = 0) -> bool:
    if depth > MAX_DEPTH or not isinstance(node, dict):
        return False
    if isinstance(node.get("$id"), str) and node["$id"]:
        return True
    return any(_declares_id(sub, depth + 1) for sub, _, _ in _subschemas(node, ""))


def _constrains(node: dict[str, Any]) -> bool:
    return any(k in CONSTRAINING for k in node) or ("if" in node and ("then" in node or "else" in node))


def _lint_node(node: dict[str, Any], path: str, keyword: str | None, has_ids: bool) -> list[tuple[str, str, str]]:
    found = []
    kind = node.get("type")
    portable_union = isinstance(kind, list) and kind and all(isinstance(t, str) and t in TYPES for t in kind)
    if portable_union and len(set(kind)) == len(kind):
        found.append(("type-union", "warning", path))
    ref = node.get("$ref")
    if isinstance(ref, str) and ref and not ref.startswith("#") and not has_ids:
        found.append(("remote-ref", "warning", path))
    if not _constrains(node) and keyword != "not":
        found.append(("untyped-schema", "warning", path))
    return found


def _walk(node: Any, path: str, keyword: str | None, depth: int, has_ids: bool) -> list[tuple[str, str, str]]:
    if depth > MAX_DEPTH:
        return []
    if isinstance(node, bool):
        return [] if keyword in BOOLEAN_VALUED else [("boolean-schema", "error", path)]
    if not isinstance(node, dict):
        return []
    found = _lint_node(node, path, keyword, has_ids)
    for sub, sub_path, sub_keyword in _subschemas(node, path):
        found += _walk(sub, sub_path, sub_keyword, depth + 1, has_ids)
    return found


def lint_tools(tools: list[dict[str, Any]]) -> list[Finding]:
    """The findings of ``--strict`` for a ``tools/list`` result's ``tools`` (as sent: camelCase keys)."""
    out = []
    for tool in tools:
        for kind in ("inputSchema", "outputSchema"):
            schema = tool.get(kind)
            if schema is None:
                continue
            for rule, severity, path in _walk(schema, "", None, 0, _declares_id(schema)):
                out.append(Finding(tool["name"], rule, severity, f"{kind}.{path}" if path else kind))
    return out


def inspector_command() -> list[str] | None:
    """The MCP Inspector launcher to run (``[path]``), or ``None`` where it is not installed: ``$MCP_INSPECTOR``
    (e.g. ``node_modules/.bin/mcp-inspector`` of ``npm install @modelcontextprotocol/inspector@2.12.0``) or
    ``mcp-inspector`` on the PATH, with ``node`` on the PATH. Nothing is downloaded at test time."""
    import os
    import shutil

    found = os.environ.get("MCP_INSPECTOR") or shutil.which("mcp-inspector")
    if not found or not shutil.which("node") or not os.path.exists(found):
        return None
    return [found]
