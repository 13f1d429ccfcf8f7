"""MCP interface (official SDK): :func:`build_mcp_server`; ``context-engine mcp`` serves it over stdio.

``build_mcp_server`` is imported on first access (PEP 562): the SDK takes about a second to import, which
:mod:`context_engine.interfaces.mcp.background` alone does not need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from context_engine.interfaces.mcp.server import build_mcp_server

__all__ = ["build_mcp_server"]


def __getattr__(name: str) -> Any:
    if name == "build_mcp_server":
        from context_engine.interfaces.mcp.server import build_mcp_server

        return build_mcp_server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
