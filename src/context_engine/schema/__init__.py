"""Pure data models (no I/O).

The names below are imported on first access (PEP 562): ``context_engine.schema.levels`` or
``context_engine.schema.uri`` alone must not build every pydantic model (issue 12, cold start).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from context_engine.schema.context import DEFAULT_CONTEXT, RequestContext
    from context_engine.schema.nodes import (
        Chunk,
        IngestReport,
        Level,
        NodeRecord,
        Relation,
        VectorFilter,
        VectorHit,
    )
    from context_engine.schema.uri import ContextURI, parse_uri
    from context_engine.schema.vector_record import VectorRecord

__all__ = [
    "DEFAULT_CONTEXT",
    "Chunk",
    "ContextURI",
    "IngestReport",
    "Level",
    "NodeRecord",
    "Relation",
    "RequestContext",
    "VectorFilter",
    "VectorHit",
    "VectorRecord",
    "parse_uri",
]

_HOMES = {
    "DEFAULT_CONTEXT": "context",
    "RequestContext": "context",
    "Chunk": "nodes",
    "IngestReport": "nodes",
    "Level": "nodes",
    "NodeRecord": "nodes",
    "Relation": "nodes",
    "VectorFilter": "nodes",
    "VectorHit": "nodes",
    "VectorRecord": "vector_record",
    "ContextURI": "uri",
    "parse_uri": "uri",
}
# Submodules the package used to import eagerly, so ``context_engine.schema.nodes`` works after ``import`` of it.
_SUBMODULES = frozenset({"context", "nodes", "uri"})


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return import_module(f"{__name__}.{name}")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
