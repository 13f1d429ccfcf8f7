"""The LlamaIndex retriever against the contract of ``llama_index.core`` ``BaseRetriever``, on the real server of
tests/client/conftest.py (an engine on a temporary home, the suite's real model, four runbooks).

llama-index-core ships no standard test suite for retrievers (its integrations' own tests check little more than
the base class), so these tests follow the base class's documented contract: ``retrieve`` and ``aretrieve`` take a
string or a ``QueryBundle`` and return ``NodeWithScore`` objects (a node with a stable id and text, a float score,
best first), ``similarity_top_k`` sets how many, the callback manager sees one ``RETRIEVE`` event per call with the
nodes, and the framework's own retrieval evaluator (``RetrieverEvaluator``, hit rate and MRR, no LLM) runs on it.
"""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.callbacks.schema import EventPayload
from llama_index.core.evaluation import RetrieverEvaluator
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from context_engine.integrations.llamaindex import ContextEngineRetriever
from tests.client.conftest import DISK_URI, World

pytestmark = pytest.mark.slow

QUERY = "the node ran out of disk space"


def _check_shape(nodes: list[NodeWithScore]) -> None:
    assert isinstance(nodes, list) and nodes
    for n in nodes:
        assert isinstance(n, NodeWithScore) and isinstance(n.node, TextNode)
        assert n.node.node_id == n.node.metadata["uri"] and n.node.get_content()
        assert isinstance(n.score, float) and n.score == n.get_score()
    scores = [n.score for n in nodes]
    assert scores == sorted(scores, reverse=True)  # best first


def test_is_a_base_retriever() -> None:
    assert BaseRetriever.__name__ in [b.__name__ for b in ContextEngineRetriever.__mro__]
    assert issubclass(ContextEngineRetriever, BaseRetriever)


def test_retrieve_takes_a_string_or_a_query_bundle(world: World) -> None:
    retriever = ContextEngineRetriever(world.url, world.alice_key)
    by_str = retriever.retrieve(QUERY)
    by_bundle = retriever.retrieve(QueryBundle(query_str=QUERY))
    _check_shape(by_str)
    assert by_str[0].node.node_id == DISK_URI
    assert [n.node.node_id for n in by_bundle] == [n.node.node_id for n in by_str]
    retriever.close()


def test_aretrieve_gives_what_retrieve_gives(world: World) -> None:
    retriever = ContextEngineRetriever(world.url, world.alice_key, similarity_top_k=3)
    sync = retriever.retrieve(QUERY)
    from_str = asyncio.run(retriever.aretrieve(QUERY))
    from_bundle = asyncio.run(retriever.aretrieve(QueryBundle(query_str=QUERY)))
    _check_shape(from_str)
    for got in (from_str, from_bundle):
        assert [(n.node.node_id, n.score) for n in got] == [(n.node.node_id, n.score) for n in sync]
    retriever.close()


@pytest.mark.parametrize("n", [1, 3])
def test_similarity_top_k_sets_how_many(world: World, n: int) -> None:
    for retriever in (
        ContextEngineRetriever(world.url, world.alice_key, similarity_top_k=n),
        ContextEngineRetriever(world.url, world.alice_key, top_k=n),
    ):
        assert retriever.similarity_top_k == n
        assert len(retriever.retrieve(QUERY)) == n
        assert len(asyncio.run(retriever.aretrieve(QUERY))) == n
        retriever.close()


def test_top_k_names_must_agree(world: World) -> None:
    with pytest.raises(ValueError):
        ContextEngineRetriever(world.url, top_k=2, similarity_top_k=3)
    assert ContextEngineRetriever(world.url, top_k=2, similarity_top_k=2).similarity_top_k == 2
    assert ContextEngineRetriever(world.url).similarity_top_k == 5


def test_callback_manager_sees_one_retrieve_event_per_call(world: World) -> None:
    handler = LlamaDebugHandler()
    retriever = ContextEngineRetriever(world.url, world.alice_key, top_k=2, callback_manager=CallbackManager([handler]))
    nodes = retriever.retrieve(QUERY)
    asyncio.run(retriever.aretrieve(QUERY))
    pairs = handler.get_event_pairs(CBEventType.RETRIEVE)
    assert len(pairs) == 2
    start, end = pairs[0]
    assert start.payload[EventPayload.QUERY_STR] == QUERY
    assert [n.node.node_id for n in end.payload[EventPayload.NODES]] == [n.node.node_id for n in nodes]
    retriever.close()


def test_the_frameworks_retriever_evaluator_runs_on_it(world: World) -> None:
    retriever = ContextEngineRetriever(world.url, world.alice_key, similarity_top_k=3)
    evaluator = RetrieverEvaluator.from_metric_names(["hit_rate", "mrr"], retriever=retriever)
    result = evaluator.evaluate(query=QUERY, expected_ids=[DISK_URI])
    assert result.retrieved_ids[0] == DISK_URI
    assert result.metric_vals_dict == {"hit_rate": 1.0, "mrr": 1.0}
    retriever.close()
