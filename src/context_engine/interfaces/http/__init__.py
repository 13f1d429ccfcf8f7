"""HTTP interface (FastAPI): :func:`create_app` builds the application; ``context-engine serve`` runs it.

``create_app`` is imported on first access (PEP 562): FastAPI and the routes take about a second to import, and the
CLI imports :mod:`context_engine.interfaces.http.auth` without needing them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from context_engine.interfaces.http.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from context_engine.interfaces.http.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
