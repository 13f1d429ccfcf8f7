"""The web console at ``/console`` (issue 16, docs/console.md): server-rendered pages over the same service, API keys
and tenancy checks as the HTTP API. :func:`mount_console` adds it to the app that ``create_app`` builds."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from context_engine.interfaces.http.console.routes import HERE, router

__all__ = ["mount_console"]


def mount_console(app: FastAPI) -> None:
    """Add the console's pages and fragments (``/console/...``) and its own static files (``/console/static``)."""
    app.include_router(router)
    app.mount("/console/static", StaticFiles(directory=HERE / "static"), name="console-static")
