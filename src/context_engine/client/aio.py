"""The asynchronous HTTP client (:class:`AsyncClient`): the methods of :class:`~context_engine.client.sync.Client`,
awaitable (those of :class:`~context_engine.client.base.BaseClient` over an asyncio transport)."""

from __future__ import annotations

from typing import Self, TypeVar

import httpx
from pydantic import BaseModel
from tenacity import AsyncRetrying

from context_engine.client.base import Async, BaseClient
from context_engine.client.core import DEFAULT_BASE_URL, Call, check_settings, client_headers, retry_policy

M = TypeVar("M", bound=BaseModel)


class AsyncClient(BaseClient[Async]):
    """The asyncio client of the ContextEngine HTTP API, on ``httpx.AsyncClient``; see :class:`~.sync.Client`.

    Every method sends one request (repeated only as :mod:`context_engine.client.core` describes) and returns the
    server's own response model; an error answer raises :class:`~context_engine.client.ApiError` (a
    :class:`~context_engine.errors.ContextEngineError`) with the server's code, message, details and request id.
    Keyword arguments named ``**fields`` are the other fields of the route's request model, validated locally
    (an unknown field raises ``RET-4001`` or ``WRT-4002`` before anything is sent).

    Args:
        base_url: the server, e.g. ``http://127.0.0.1:8420``.
        api_key: a key from ``context-engine keys create``, sent as ``Authorization: Bearer <key>``; ``None`` only
            works where the server allows anonymous loopback access.
        timeout_s: per-request timeout, seconds.
        retries: repeats of a request the server did not act on (connection refused, ``503 API-5031``), 0..10.
        backoff_s: first wait between repeats, seconds (exponential with jitter).
        transport: an ``httpx`` transport to use instead of the default (proxies, tests).

    Use as an async context manager, or await :meth:`close`.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        *,
        timeout_s: float = 30.0,
        retries: int = 2,
        backoff_s: float = 0.2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        check_settings(retries, timeout_s, backoff_s)
        self.base_url = base_url
        self._retry = retry_policy(retries, backoff_s)
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=client_headers(api_key), timeout=timeout_s, transport=transport
        )

    def __repr__(self) -> str:
        return f"AsyncClient({self.base_url!r})"  # never the key

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _send(self, call: Call[M], /) -> M:
        """The transport: send ``call``, repeated as the retry policy says, and return its answer (the route's model,
        the calling method's return type)."""

        async def once() -> M:
            try:
                response = await self._http.request(**call.args)
            except httpx.HTTPError as err:
                raise call.no_answer(err) from err
            return call.answer(response)

        return await AsyncRetrying(**self._retry)(once)
