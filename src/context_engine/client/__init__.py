"""A typed Python client of the ContextEngine HTTP API: :class:`Client` (sync) and :class:`AsyncClient` (asyncio), on
``httpx``. Methods return the server's own pydantic models (``context_engine.schema``); error answers raise
:class:`ApiError`, a :class:`~context_engine.errors.ContextEngineError` carrying the server's code. See docs/clients.md.

Importing it loads pydantic, httpx and tenacity, never the engine (FastAPI, torch, LanceDB) nor numpy; the models of
a route are imported when it is first called (:mod:`context_engine.client.endpoints`).
"""

from __future__ import annotations

from context_engine.client.aio import AsyncClient
from context_engine.client.core import DEFAULT_BASE_URL, ApiError
from context_engine.client.sync import Client

__all__ = ["DEFAULT_BASE_URL", "ApiError", "AsyncClient", "Client"]
