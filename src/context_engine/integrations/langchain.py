"""A LangChain retriever over the ContextEngine HTTP API (``pip install context-engine[langchain]``).

:class:`ContextEngineRetriever` is a ``langchain_core`` ``BaseRetriever``: ``invoke(query)`` / ``ainvoke(query)``
return ``Document`` objects, best first, whose ``page_content`` is the L0 abstract (or the requested level's text, or
the lookup_knowledge evidence) and whose ``metadata`` has ``uri``, ``level`` and ``score`` (plus
``relevance_level`` for lookup_knowledge); see :mod:`context_engine.integrations._common` for the exact fields.

The number of documents follows LangChain's conventions (``langchain-tests`` ``RetrieversIntegrationTests``,
run by tests/client/test_langchain_standard.py): ``k`` or ``top_k`` in the constructor, and per call
``invoke(query, k=1)`` or ``invoke(query, top_k=1)``, which overrides the constructor's value for that call only.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, SecretStr, ValidationError, model_validator

from context_engine.client import DEFAULT_BASE_URL, AsyncClient, Client
from context_engine.integrations._common import Item, RetrieverConfig, TextLevel, Tool, aretrieve, retrieve

_RUN_KWARGS = frozenset({"verbose"})
"""Keyword arguments that ``BaseRetriever.invoke`` itself passes on with the caller's (it reads them too)."""


def _document(item: Item) -> Document:
    return Document(id=item.id, page_content=item.text, metadata=item.metadata)


class ContextEngineRetriever(BaseRetriever):
    """Documents from ``search_memory`` (default) or ``lookup_knowledge`` of a ContextEngine server.

    Attributes:
        base_url: the server (``context-engine serve``).
        api_key: the caller's API key (``Authorization: Bearer``); its RequestContext decides what is visible.
        tool, level, top_k, options: see :class:`~context_engine.integrations._common.RetrieverConfig`; ``k`` is
            accepted in the constructor as another name of ``top_k`` (LangChain's usual name; both given and
            different is a ``ValidationError``).
        timeout_s: per-request timeout, seconds.

    ``invoke(query, k=N)`` / ``invoke(query, top_k=N)`` (and ``ainvoke``) ask for ``N`` documents for that call.

    Raises (from ``invoke``/``ainvoke``):
        ValueError: a per-call ``k``/``top_k`` outside 1..50 or not an integer, both given and different, or
            another keyword argument (a typo is refused, not ignored).
        ApiError: the server's error, e.g. ``RET-4031`` for a hidden ``target_uri``.
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

    @model_validator(mode="before")
    @classmethod
    def _k_is_top_k(cls, data: Any) -> Any:
        if isinstance(data, dict) and "k" in data:
            data = dict(data)
            k = data.pop("k")
            if "top_k" in data and data["top_k"] != k:
                raise ValueError(f"k={k!r} and top_k={data['top_k']!r} disagree: give one of them")
            data["top_k"] = k
        return data

    @model_validator(mode="after")
    def _build_config(self) -> ContextEngineRetriever:
        self._config = RetrieverConfig(tool=self.tool, level=self.level, top_k=self.top_k, options=self.options)
        return self

    def _key(self) -> str | None:
        return self.api_key.get_secret_value() if self.api_key else None

    def _call_config(self, k: Any, top_k: Any, extra: dict[str, Any]) -> RetrieverConfig:
        """The config of one call: the constructor's, with ``top_k`` replaced by a per-call ``k``/``top_k``."""
        unknown = set(extra) - _RUN_KWARGS
        if unknown:
            raise ValueError(f"unknown argument(s) {sorted(unknown)}; per call only k or top_k")
        if k is not None and top_k is not None and k != top_k:
            raise ValueError(f"k={k!r} and top_k={top_k!r} disagree: give one of them")
        wanted = k if k is not None else top_k
        if wanted is None:
            return self._config
        try:
            return RetrieverConfig.model_validate({**self._config.model_dump(), "top_k": wanted}, strict=True)
        except ValidationError as err:  # a ValueError, said in the per-call argument's terms
            raise ValueError(f"k/top_k must be an integer in 1..50, got {wanted!r}") from err

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        top_k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        config = self._call_config(k, top_k, kwargs)
        if self._client is None:  # one connection pool for the retriever's life
            self._client = Client(self.base_url, self._key(), timeout_s=self.timeout_s)
        return [_document(item) for item in retrieve(self._client, query, config)]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        top_k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        config = self._call_config(k, top_k, kwargs)
        # A client per call: an httpx.AsyncClient's pool belongs to the event loop that opened it.
        async with AsyncClient(self.base_url, self._key(), timeout_s=self.timeout_s) as client:
            return [_document(item) for item in await aretrieve(client, query, config)]

    def close(self) -> None:
        """Close the sync client's connections (the retriever opens new ones if used again)."""
        if self._client is not None:
            self._client.close()
            self._client = None
