"""A LlamaIndex retriever over the ContextEngine HTTP API (``pip install context-engine[llamaindex]``).

:class:`ContextEngineRetriever` is a ``llama_index.core`` ``BaseRetriever``: ``retrieve(query)`` /
``aretrieve(query)`` return ``NodeWithScore`` objects, best first, whose node is a ``TextNode`` (``id_`` the URI,
``text`` the L0 abstract, the requested level's text or the lookup_knowledge evidence) with ``metadata`` ``uri``,
``level`` and ``score`` (plus ``relevance_level`` for lookup_knowledge); ``score`` is the same number. See
:mod:`context_engine.integrations._common` for the exact fields.

The number of nodes is ``top_k`` or, by LlamaIndex's usual name, ``similarity_top_k`` (the contract of
``llama_index.core`` ``BaseRetriever``, checked by tests/client/test_llamaindex_contract.py).
"""

from __future__ import annotations

from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from context_engine.client import DEFAULT_BASE_URL, AsyncClient, Client
from context_engine.integrations._common import Item, RetrieverConfig, TextLevel, Tool, aretrieve, retrieve


def _node(item: Item) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=item.id, text=item.text, metadata=item.metadata), score=item.score)


class ContextEngineRetriever(BaseRetriever):
    """Nodes from ``search_memory`` (default) or ``lookup_knowledge`` of a ContextEngine server.

    Args:
        base_url: the server (``context-engine serve``).
        api_key: the caller's API key (``Authorization: Bearer``); its RequestContext decides what is visible.
        tool, level, top_k, options: see :class:`~context_engine.integrations._common.RetrieverConfig`
            (pydantic ``ValidationError`` when out of range).
        similarity_top_k: another name of ``top_k`` (LlamaIndex's); both given and different is a ``ValueError``.
        timeout_s: per-request timeout, seconds.
        callback_manager: LlamaIndex callbacks.

    Raises (from ``retrieve``/``aretrieve``):
        ApiError: the server's error, e.g. ``RET-4002`` for ``top_k`` out of range.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        *,
        tool: Tool = "search_memory",
        level: TextLevel | None = None,
        top_k: int | None = None,
        similarity_top_k: int | None = None,
        options: dict[str, Any] | None = None,
        timeout_s: float = 30.0,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if top_k is not None and similarity_top_k is not None and top_k != similarity_top_k:
            raise ValueError(f"top_k={top_k!r} and similarity_top_k={similarity_top_k!r} disagree: give one of them")
        wanted = top_k if top_k is not None else similarity_top_k
        self.config = RetrieverConfig(
            tool=tool, level=level, top_k=5 if wanted is None else wanted, options=options or {}
        )
        self._base_url, self._api_key, self._timeout_s = base_url, api_key, timeout_s
        self._client: Client | None = None
        super().__init__(callback_manager=callback_manager)

    @property
    def similarity_top_k(self) -> int:
        """The number of nodes asked for (``top_k``)."""
        return self.config.top_k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self._client is None:  # one connection pool for the retriever's life
            self._client = Client(self._base_url, self._api_key, timeout_s=self._timeout_s)
        return [_node(item) for item in retrieve(self._client, query_bundle.query_str, self.config)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # A client per call: an httpx.AsyncClient's pool belongs to the event loop that opened it.
        async with AsyncClient(self._base_url, self._api_key, timeout_s=self._timeout_s) as client:
            return [_node(item) for item in await aretrieve(client, query_bundle.query_str, self.config)]

    def close(self) -> None:
        """Close the sync client's connections (the retriever opens new ones if used again)."""
        if self._client is not None:
            self._client.close()
            self._client = None
