"""Pure data models (no I/O)."""

from context_engine.schema.context import DEFAULT_CONTEXT, RequestContext
from context_engine.schema.nodes import (
    Chunk,
    IngestReport,
    Level,
    NodeRecord,
    Relation,
    VectorFilter,
    VectorHit,
    VectorRecord,
)
from context_engine.schema.uri import ContextURI, parse_uri

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
