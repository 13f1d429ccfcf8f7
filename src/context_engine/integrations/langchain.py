"""A LangChain retriever over the ContextEngine HTTP API (``pip install context-engine[langchain]``).

:class:`ContextEngineRetriever` is a ``langchain_core`` ``BaseRetriever``: ``invoke(query)`` / ``ainvoke(query)``
return ``Document`` objects, best first, whose ``page_content`` is the L0 abstract (or the requested level's text, or
the lookup_knowledge evidence) and whose ``metadata`` has ``uri``, ``level`` and ``score`` (plus
``relevance_level`` for lookup_knowledge); see :mod:`context_engine.integrations._common` for the exact fields.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, SecretStr, model_validator

from context_engine.client import DEFAULT_BASE_URL, AsyncClient, Client
from context_engine.integrations._common import Item, RetrieverConfig, TextLevel, Tool, aretrieve, retrieve


def _document(item: Item) -> Document:
    return Document(id=item.id, page_content=item.text, metadata=item.metadata)


class ContextEngineRetriever(BaseRetriever):
    """Documents from ``search_memory`` (default) or ``lookup_knowledge`` of a ContextEngine server.

    Attributes:
        base_url: the server (``context-engine serve``).
        api_key: the caller's API key (``Authorization: Bearer``); its RequestContext decides what is visible.
        tool, level, top_k, options: see :class:`~context_engine.integrations._common.RetrieverConfig`.
        timeout_s: per-request timeout, seconds.

    Raises (from ``invoke``/``ainvoke``):
        ApiError: the server's error, e.g. ``RET-4002`` for ``top_k`` out of range.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    base_url: str = DEFAULT_BASE_URL
    api_key: SecretStr | None = None
    tool: Tool = "search_memory"
    level: TextLevel | None = None
    top_k: int = Field(5, ge=1, le=50)
    options: dict[str, Any] = Field(default_factory=dict)
    timeout_s: float = Field(30.0, gt=0)
    _config: RetrieverConfig = PrivateAttr()
    _client: Client | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _build_config(self) -> ContextEngineRetriever:
        self._config = RetrieverConfig(tool=self.tool, level=self.level, top_k=self.top_k, options=self.options)
        return self

    def _key(self) -> str | None:
        return self.api_key.get_secret_value() if self.api_key else None

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if self._client is None:  # one connection pool for the retriever's life
            self._client = Client(self.base_url, self._key(), timeout_s=self.timeout_s)
        return [_document(item) for item in retrieve(self._client, query, self._config)]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        # A client per call: an httpx.AsyncClient's pool belongs to the event loop that opened it.
        async with AsyncClient(self.base_url, self._key(), timeout_s=self.timeout_s) as client:
            return [_document(item) for item in await aretrieve(client, query, self._config)]

    def close(self) -> None:
        """Close the sync client's connections (the retriever opens new ones if used again)."""
        if self._client is not None:
            self._client.close()
            self._client = None
