"""The client checked against the real server's OpenAPI schema: every client method's path and method exist, and
its request and response models have the same fields, nested models included, as the server declares. A route whose
answer is a union (``anyOf`` of models: full or compact) is answered by one client method per member, each member
by one. A route or a field changed on one side only fails here."""

from __future__ import annotations

import inspect
import typing
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from context_engine.api import models as http_models
from context_engine.client import AsyncClient, Client
from context_engine.client.endpoints import ENDPOINTS
from context_engine.schema import compact, knowledge, memory, memory_events, nodes, query

pytestmark = pytest.mark.slow

#: API routes the client leaves out on purpose (multipart upload, live evaluation, rarely scripted writes).
NOT_IN_CLIENT = {
    ("post", "/api/search/similar"),
    ("post", "/api/v1/resources/upload"),
    ("post", "/api/v1/skills"),
    ("post", "/api/v1/move"),
}


def shape(schema: dict[str, Any], defs: dict[str, Any], seen: frozenset[str] = frozenset()) -> Any:
    """The field names of a JSON schema, nested: ``{field: shape}`` for objects, ``[shape]`` for arrays, a sorted
    tuple for unions; leaves (scalars, free-form objects) are ``None``. A model met again inside itself is its name."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        base = name.removesuffix("-Input").removesuffix("-Output")
        return f"<{base}>" if base in seen else shape(defs[name], defs, seen | {base})
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            parts = [shape(s, defs, seen) for s in schema[key] if s.get("type") != "null"]
            return parts[0] if len(parts) == 1 else tuple(sorted(map(repr, parts)))
    if "properties" in schema:
        return {k: shape(v, defs, seen) for k, v in schema["properties"].items()}
    if schema.get("type") == "array" and "items" in schema:
        return [shape(schema["items"], defs, seen)]
    return None


def model_shape(model: type[BaseModel], mode: typing.Literal["validation", "serialization"]) -> Any:
    schema = model.model_json_schema(mode=mode)
    return shape(schema, schema.get("$defs", {}), frozenset({model.__name__}))


def server_shape(schema: dict[str, Any], components: dict[str, Any]) -> Any:
    name = schema["$ref"].rsplit("/", 1)[-1]
    return shape(components[name], components, frozenset({name.removesuffix("-Input").removesuffix("-Output")}))


def response_shapes(op: dict[str, Any], components: dict[str, Any]) -> list[Any]:
    """The shapes of a route's 200 body: one model, or each model of a union (``anyOf``/``oneOf`` of ``$ref``)."""
    schema = op["responses"]["200"]["content"]["application/json"]["schema"]
    members = schema.get("anyOf") or schema.get("oneOf") or [schema]
    assert all("$ref" in m for m in members), schema
    return [server_shape(m, components) for m in members]


@pytest.fixture(scope="module")
def openapi(world) -> dict[str, Any]:
    return httpx.get(f"{world.url}/openapi.json", timeout=30).raise_for_status().json()


@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_endpoint_matches_server(openapi: dict[str, Any], name: str) -> None:
    ep = ENDPOINTS[name]
    components = openapi["components"]["schemas"]
    op = openapi["paths"].get(ep.path, {}).get(ep.method.lower())
    assert op is not None, f"{ep.method} {ep.path} is not in the server's OpenAPI schema"
    assert model_shape(ep.response, "serialization") in response_shapes(op, components)
    params = {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
    in_path = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
    assert in_path == set(ep.path_params)
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if ep.request is None:
        assert not params and body is None
    elif ep.method == "GET":
        assert body is None and params | in_path == set(ep.request.model_fields)
    else:
        assert not params and server_shape(body, components) == model_shape(ep.request, "validation")
    assert set(ep.fixed) <= set(ep.request.model_fields if ep.request else ())


def test_every_union_member_has_one_method(openapi: dict[str, Any]) -> None:
    components = openapi["components"]["schemas"]
    routes = {(ep.method, ep.path) for ep in ENDPOINTS.values()}
    unions = 0
    for method, path in sorted(routes):
        eps = [ep for ep in ENDPOINTS.values() if (ep.method, ep.path) == (method, path)]
        members = response_shapes(openapi["paths"][path][method.lower()], components)
        ours = [model_shape(ep.response, "serialization") for ep in eps]
        assert sorted(map(repr, ours)) == sorted(map(repr, members)), (method, path)
        if len(eps) > 1:  # the methods of one route differ by what their fixed fields select
            unions += 1
            assert len({tuple(sorted(ep.fixed.items())) for ep in eps}) == len(eps) and all(ep.fixed for ep in eps)
    assert unions == 2  # search_memory and lookup_knowledge: full or compact


def test_every_api_route_is_covered_or_listed(openapi: dict[str, Any]) -> None:
    routes = {(m, p) for p, ops in openapi["paths"].items() if p.startswith("/api/") for m in ops}
    covered = {(ep.method.lower(), ep.path) for ep in ENDPOINTS.values()}
    assert routes - covered == NOT_IN_CLIENT
    assert {("get", "/healthz"), ("get", "/readyz")} <= covered


def test_client_methods_match_the_table() -> None:
    # the client modules import their models for type checking only (each is imported when its route is first used)
    models = {
        k: v for m in (http_models, compact, knowledge, memory, memory_events, nodes, query) for k, v in vars(m).items()
    }
    for cls in (Client, AsyncClient):
        public = {n for n, f in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")} - {"close"}
        assert public == set(ENDPOINTS), cls
        for name, ep in ENDPOINTS.items():
            assert typing.get_type_hints(getattr(cls, name), localns=models)["return"] is ep.response, (cls, name)
    for name in ENDPOINTS:
        sync_sig, async_sig = inspect.signature(getattr(Client, name)), inspect.signature(getattr(AsyncClient, name))
        assert sync_sig == async_sig, name
        assert inspect.iscoroutinefunction(getattr(AsyncClient, name))
