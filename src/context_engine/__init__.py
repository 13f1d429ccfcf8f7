"""ContextEngine: the right context at the right depth for AI agents (see DESIGN.md)."""

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema import ContextURI, Level, RequestContext
from context_engine.settings import Settings, load_settings

__all__ = ["ContextEngineError", "ContextURI", "ErrorCode", "Level", "RequestContext", "Settings", "load_settings"]
