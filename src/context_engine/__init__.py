"""ContextEngine: the right context at the right depth for AI agents (see docs/architecture.md).

The public names are imported on first access (PEP 562), not with the package: every ``context_engine.*`` import
runs this file first, and the schema and settings models cost about a third of a second to build, which a
``context-engine --help`` or an MCP handshake should not pay (issue 12, cold start).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from context_engine.errors import ContextEngineError, ErrorCode
    from context_engine.schema import ContextURI, Level, RequestContext
    from context_engine.service import ContextEngine
    from context_engine.settings import Settings, load_settings

__all__ = [
    "ContextEngine",
    "ContextEngineError",
    "ContextURI",
    "ErrorCode",
    "Level",
    "RequestContext",
    "Settings",
    "load_settings",
]

_HOMES = {
    "ContextEngine": "context_engine.service",  # the engine (its module imports the stores and models: ~1 s)
    "ContextEngineError": "context_engine.errors",
    "ErrorCode": "context_engine.errors",
    "ContextURI": "context_engine.schema",
    "Level": "context_engine.schema",
    "RequestContext": "context_engine.schema",
    "Settings": "context_engine.settings",
    "load_settings": "context_engine.settings",
}
# Submodules the package used to import eagerly, so ``import context_engine; context_engine.settings`` still works.
_SUBMODULES = frozenset({"errors", "schema", "settings"})


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return import_module(f"{__name__}.{name}")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
