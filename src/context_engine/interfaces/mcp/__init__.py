"""MCP interface (official SDK): :func:`build_mcp_server`; ``context-engine mcp`` serves it over stdio."""

from context_engine.interfaces.mcp.server import build_mcp_server

__all__ = ["build_mcp_server"]
