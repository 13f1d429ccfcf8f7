"""What the LangChain and LlamaIndex retrievers share: their settings and how one search_memory or lookup_knowledge
answer becomes a list of scored texts with metadata (framework-free, so both adapters stay thin).

* ``search_memory``: one item per hit, best first; the text is the hit's L0 abstract, or with ``level`` L1/L2 the
  overview / the redacted content read with ``read_memory`` (a hit that has no such level, e.g. L2 of a directory,
  keeps its L0 text and says ``level: "L0"``). ``score`` is the hit's final score in 0..1, higher is better.
* ``lookup_knowledge``: one item per evidence block with text, best first (blocks withheld as already returned in
  the session, ``DEDUPED``, carry no text and are left out); the text is the evidence (L2 chunks), ``score`` is the
  block's calibrated similarity (higher is better), and the metadata adds ``relevance_level``, ``title``,
  ``evidence_status`` and the ``invocation_id`` (for ``verify_evidence``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from context_engine.client import AsyncClient, Client
from context_engine.schema.hits import RetrievedBlock
from context_engine.schema.knowledge import LookupResult
from context_engine.schema.query import SearchMemoryResponse

Tool = Literal["search_memory", "lookup_knowledge"]
TextLevel = Literal["L0", "L1", "L2"]


class RetrieverConfig(BaseModel):
    """What a retriever asks for.

    Attributes:
        tool: ``search_memory`` (memories, skills, resources; L0 hits) or ``lookup_knowledge`` (runbook evidence).
        level: the text of each result: ``L0`` (default for search_memory), ``L1`` or ``L2`` (one ``read_memory``
            per hit); lookup_knowledge returns L2 evidence only (``None`` or ``L2``).
        top_k: results wanted, 1..50 (the server's range; ``RET-4002`` otherwise).
        options: other request fields of the tool (``target_uri``, ``categories``; ``conversation_id`` for
            search_memory, ``session_id``, the diagnosis session, for lookup_knowledge; ...).
    """

    model_config = ConfigDict(extra="forbid")

    tool: Tool = "search_memory"
    level: TextLevel | None = None
    top_k: int = Field(5, ge=1, le=50)
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> RetrieverConfig:
        if self.tool == "lookup_knowledge" and self.level not in (None, "L2"):
            raise ValueError("lookup_knowledge returns L2 evidence: level must be None or 'L2'")
        if {"query", "top_k"} & self.options.keys():
            raise ValueError("options must not repeat 'query' or 'top_k'")
        return self

    @property
    def text_level(self) -> TextLevel:
        return self.level or ("L0" if self.tool == "search_memory" else "L2")


@dataclass(frozen=True)
class Item:
    """One result: ``id`` (the URI), ``text``, ``score`` (higher is better) and ``metadata`` (``uri``, ``level``,
    ``score`` and the tool's own fields)."""

    id: str
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


def _hit_item(hit: RetrievedBlock, text: str | None, level: TextLevel) -> Item:
    if text is None:  # the level does not exist for this node: its L0 text, said so
        text, level = hit.abstract or "", "L0"
    meta = {
        "uri": hit.uri,
        "level": level,
        "score": hit.score,
        "category": hit.category,
        "owner_space": hit.owner_space,
        "read_recommendation": hit.read_recommendation,
        "source": "search_memory",
    }
    return Item(hit.uri, text, hit.score, meta)


def _readable(hit: RetrievedBlock, level: TextLevel) -> bool:
    return (level == "L1" and hit.has_overview) or (level == "L2" and hit.has_content)


def _read_text(block: RetrievedBlock, level: TextLevel) -> str | None:
    return block.overview if level == "L1" else block.content_excerpt


def lookup_items(result: LookupResult) -> list[Item]:
    """The evidence blocks of ``result`` that carry text, in their order (best first)."""
    items = []
    for block in result.evidence_blocks:
        if not block.text:
            continue
        meta = {
            "uri": block.doc_id,
            "level": "L2",
            "score": block.similarity,
            "relevance_level": block.relevance_level.value,
            "title": block.title,
            "breadcrumb": block.breadcrumb,
            "evidence_status": result.evidence_status,
            "invocation_id": result.invocation_id,
            "source": "lookup_knowledge",
        }
        items.append(Item(block.doc_id, block.text, block.similarity, meta))
    return items


def retrieve(client: Client, query: str, config: RetrieverConfig) -> list[Item]:
    """Run ``config.tool`` for ``query`` through ``client`` (plus one read per hit for L1/L2).

    Raises:
        ApiError: the server's error (e.g. ``RET-4002`` for a bad ``top_k``, ``RET-4031`` for a hidden target).
    """
    if config.tool == "lookup_knowledge":
        return lookup_items(client.lookup_knowledge(query, top_k=config.top_k, **config.options))
    response = client.search_memory(query, top_k=config.top_k, **config.options)
    level = config.text_level
    if level == "L0":
        return _search_items(response, [hit.abstract for hit in response.hits], level)
    texts = [
        _read_text(client.read_memory(hit.uri, level).block, level) if _readable(hit, level) else None
        for hit in response.hits
    ]
    return _search_items(response, texts, level)


async def aretrieve(client: AsyncClient, query: str, config: RetrieverConfig) -> list[Item]:
    """:func:`retrieve` on the async client; the L1/L2 reads run concurrently."""
    if config.tool == "lookup_knowledge":
        return lookup_items(await client.lookup_knowledge(query, top_k=config.top_k, **config.options))
    response = await client.search_memory(query, top_k=config.top_k, **config.options)
    level = config.text_level
    if level == "L0":
        return _search_items(response, [hit.abstract for hit in response.hits], level)

    async def read(hit: RetrievedBlock) -> str | None:
        if not _readable(hit, level):
            return None
        return _read_text((await client.read_memory(hit.uri, level)).block, level)

    texts = await asyncio.gather(*(read(hit) for hit in response.hits))
    return _search_items(response, list(texts), level)


def _search_items(response: SearchMemoryResponse, texts: list[str | None], level: TextLevel) -> list[Item]:
    return [_hit_item(hit, text, level) for hit, text in zip(response.hits, texts, strict=True)]
