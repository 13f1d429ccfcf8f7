"""HTTP interface (FastAPI): :func:`create_app` builds the application; ``context-engine serve`` runs it."""

from context_engine.interfaces.http.app import create_app

__all__ = ["create_app"]
