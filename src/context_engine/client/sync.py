"""The synchronous HTTP client (:class:`Client`): the methods of :class:`~context_engine.client.base.BaseClient` over a
blocking transport. Its methods mirror :class:`~context_engine.client.aio.AsyncClient`."""

from __future__ import annotations

from typing import Self, TypeVar

import httpx
from pydantic import BaseModel
from tenacity import Retrying

from context_engine.client.base import BaseClient, Sync
from context_engine.client.core import DEFAULT_BASE_URL, Call, check_settings, client_headers, retry_policy

M = TypeVar("M", bound=BaseModel)


class Client(BaseClient[Sync]):
    """A typed client of the ContextEngine HTTP API (``context-engine serve``), on ``httpx``.

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

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        *,
        timeout_s: float = 30.0,
        retries: int = 2,
        backoff_s: float = 0.2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        check_settings(retries, timeout_s, backoff_s)
        self.base_url = base_url
        self._retry = retry_policy(retries, backoff_s)
        self._http = httpx.Client(
            base_url=base_url, headers=client_headers(api_key), timeout=timeout_s, transport=transport
        )

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"  # never the key

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _send(self, call: Call[M], /) -> M:
        """The transport: send ``call``, repeated as the retry policy says, and return its answer (the route's model,
        the calling method's return type)."""

        def once() -> M:
            try:
                response = self._http.request(**call.args)
            except httpx.HTTPError as err:
                raise call.no_answer(err) from err
            return call.answer(response)

        return Retrying(**self._retry)(once)
