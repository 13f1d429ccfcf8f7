"""The LangChain and LlamaIndex retrievers (the real libraries, pinned in constraints.txt) against the real server."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode
from pydantic import ValidationError

from context_engine.client import ApiError
from context_engine.errors import ErrorCode
from context_engine.integrations.langchain import ContextEngineRetriever as LangChainRetriever
from context_engine.integrations.llamaindex import ContextEngineRetriever as LlamaIndexRetriever
from tests.client.conftest import CERT_URI, DISK_URI, DOCS

pytestmark = pytest.mark.slow

DISK_QUERY = "the node ran out of disk space"
CERT_QUERY = "TLS certificate expires in 3 days on the ingress"


def test_langchain_search_memory_l0(world) -> None:
    retriever = LangChainRetriever(base_url=world.url, api_key=world.alice_key, top_k=3)
    docs = retriever.invoke(DISK_QUERY)
    assert all(isinstance(d, Document) for d in docs) and 1 <= len(docs) <= 3
    first = docs[0]
    assert first.id == DISK_URI and first.metadata["uri"] == DISK_URI and first.metadata["level"] == "L0"
    assert "disk" in first.page_content.lower() and first.page_content != DOCS[DISK_URI]
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True) and 0 < scores[0] <= 1
    assert first.metadata["source"] == "search_memory"
    retriever.close()


def test_langchain_levels_and_lookup(world) -> None:
    l2 = LangChainRetriever(base_url=world.url, api_key=world.alice_key, top_k=3, level="L2").invoke(DISK_QUERY)
    assert l2[0].page_content == DOCS[DISK_URI] and l2[0].metadata["level"] == "L2"
    # a directory hit has no L2: it keeps its L0 text and says so
    assert all(d.metadata["level"] == "L0" for d in l2 if d.metadata["uri"].endswith("/"))
    lookup = LangChainRetriever(base_url=world.url, api_key=world.alice_key, tool="lookup_knowledge", top_k=2)
    docs = lookup.invoke(CERT_QUERY)
    assert docs[0].metadata["uri"] == CERT_URI and docs[0].metadata["relevance_level"] == "PRECISE"
    assert docs[0].metadata["level"] == "L2" and "cert-manager" in docs[0].page_content
    assert docs[0].metadata["score"] > docs[1].metadata["score"]
    assert docs[0].metadata["invocation_id"] and docs[0].metadata["evidence_status"] == "found"


def test_langchain_async_and_errors(world) -> None:
    retriever = LangChainRetriever(base_url=world.url, api_key=world.alice_key, top_k=2, level="L1")
    docs = asyncio.run(retriever.ainvoke(DISK_QUERY))
    assert docs[0].metadata["uri"] == DISK_URI and docs[0].metadata["level"] == "L1"
    assert "crictl rmi --prune" in docs[0].page_content
    bob = LangChainRetriever(base_url=world.url, api_key=world.bob_key)
    assert bob.invoke(DISK_QUERY) == []  # another account sees nothing of acme
    with pytest.raises(ApiError) as err:
        LangChainRetriever(
            base_url=world.url, api_key=world.bob_key, options={"target_uri": "ctx://user/alice/memories/"}
        ).invoke("disk")
    assert err.value.code is ErrorCode.TARGET_FORBIDDEN and err.value.status_code == 403
    with pytest.raises(ValidationError):
        LangChainRetriever(base_url=world.url, top_k=0)
    with pytest.raises(ValidationError):
        LangChainRetriever(base_url=world.url, tool="lookup_knowledge", level="L0")
    with pytest.raises(ValidationError):
        LangChainRetriever(base_url=world.url, topk=3)  # a typo is refused, not ignored


def test_llamaindex_search_and_lookup(world) -> None:
    retriever = LlamaIndexRetriever(world.url, world.alice_key, top_k=3)
    nodes = retriever.retrieve(DISK_QUERY)
    assert all(isinstance(n, NodeWithScore) and isinstance(n.node, TextNode) for n in nodes)
    first = nodes[0]
    assert first.node.node_id == DISK_URI and first.node.metadata["uri"] == DISK_URI
    assert first.node.metadata["level"] == "L0" and first.score == first.node.metadata["score"]
    assert "disk" in first.node.get_content().lower()
    retriever.close()
    lookup = LlamaIndexRetriever(world.url, world.alice_key, tool="lookup_knowledge", top_k=1)
    (block,) = lookup.retrieve(CERT_QUERY)
    assert block.node.node_id == CERT_URI and block.node.metadata["relevance_level"] == "PRECISE"
    assert "cert-manager" in block.node.get_content()


def test_llamaindex_async_and_errors(world) -> None:
    retriever = LlamaIndexRetriever(world.url, world.alice_key, top_k=2, level="L2")
    nodes = asyncio.run(retriever.aretrieve(DISK_QUERY))
    assert nodes[0].node.node_id == DISK_URI and nodes[0].node.get_content() == DOCS[DISK_URI]
    with pytest.raises(ValidationError):
        LlamaIndexRetriever(world.url, world.alice_key, options={"top_k": 3})
    hidden = LlamaIndexRetriever(world.url, world.bob_key, options={"target_uri": "ctx://user/alice/memories/"})
    with pytest.raises(ApiError) as err:
        asyncio.run(hidden.aretrieve("disk"))
    assert err.value.code is ErrorCode.TARGET_FORBIDDEN and err.value.status_code == 403
