"""A search embeds each of its query texts once, the likely ones in one batch (retrieval/query_vectors.py), on the
default model: the batch's vectors are its single calls' to float rounding, and the answers do not change."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from context_engine.schema.context import RequestContext
from context_engine.settings import load_settings

pytestmark = pytest.mark.slow

ANN = RequestContext(account_id="default", role="user", user_space="ann", agent_space="helper")

NAMED = [
    {"role": "user", "speaker": "Sam", "content": "Hello, me again."},
    {"role": "assistant", "content": "Welcome back!"},
    {"role": "user", "speaker": "Sam", "content": "I just started at Northwind as a data engineer."},
    {"role": "assistant", "content": "Congratulations! How are you finding the team?"},
    {"role": "user", "speaker": "Sam", "content": "Our cat is mostly hiding under the sofa."},
    {"role": "assistant", "content": "Noted!"},
]
UNNAMED: list[dict] = [
    {"role": "user", "content": "Hi again"},
    {"role": "assistant", "content": "Hi! How has your week been?"},
    {"role": "user", "content": "Community pharmacy, a small independent one in Leith."},
    {"role": "assistant", "content": "That's a lot of responsibility."},
]


def one_at_a_time(embedder):
    """The default model without ``embed_queries`` (a shallow copy sharing its weights): every query text in a call
    of its own, as before batching; ``calls`` counts them."""
    single = copy.copy(embedder)
    single.embed_queries = None  # what the pipeline reads: no batch method
    single.calls = 0
    inner = embedder.embed_query

    def embed_query(text):
        single.calls += 1
        return inner(text)

    single.embed_query = embed_query
    return single


def _dated(conversation: list[dict]) -> list[dict]:
    """The messages a minute apart from a fixed time: the recency component reads the same in both stores."""
    return [{**m, "timestamp": f"2024-03-01T10:{i:02d}:00Z"} for i, m in enumerate(conversation)]


@pytest.fixture
def engines(tmp_path, default_embedder):
    from context_engine.service import ContextEngineService

    opened = [
        ContextEngineService(
            load_settings(tmp_path / name, embedding={"backend": "use-multilingual"}), embedder=embedder
        )
        for name, embedder in (("batched", default_embedder), ("single", one_at_a_time(default_embedder)))
    ]
    yield opened
    for e in opened:
        e.close()


def _embeddings(response) -> dict:
    events = [e for e in response.thinking_trace["events"] if e["event"] == "query_embeddings"]
    assert len(events) == 1
    return {k: events[0][k] for k in ("texts", "batches")}


def test_the_default_models_batch_equals_its_single_calls(default_embedder):
    texts = ["Where is Sam employed?", "Where is employed?", "用户的猫叫什么？"]
    batch = default_embedder.embed_queries(texts)
    assert batch.shape == (3, default_embedder.dim)
    for row, text in zip(batch, texts, strict=True):
        assert np.abs(row - default_embedder.embed_query(text)).max() < 1e-6


@pytest.mark.parametrize(
    ("conversation", "question", "expected"),
    [
        # the query, the second search's text ("Where is employed?"), the speaker-neutral one ("Where is I employed?")
        (NAMED, "Where is Sam employed?", {"texts": 3, "batches": 1}),
        # "Where does I work?" is both the second search's text and the speaker-neutral query
        (UNNAMED, "Where does the user work?", {"texts": 2, "batches": 1}),
        # no name, no reference to the user: the query alone
        (NAMED, "data engineering job", {"texts": 1, "batches": 1}),
    ],
)
def test_a_search_embeds_its_texts_once_in_one_batch_with_the_same_answer(engines, conversation, question, expected):
    responses = []
    for engine in engines:
        engine.add_messages(_dated(conversation), "s1", ANN)
        responses.append(engine.search_memory(question, ANN, top_k=5, include_debug=True, trace_level="detailed"))
    assert _embeddings(responses[0]) == expected
    # without batches, each text in a call of its own, and the answers the same
    assert _embeddings(responses[1])["texts"] == engines[1].embedder.calls == expected["texts"]
    assert [h.uri for h in responses[0].hits] == [h.uri for h in responses[1].hits]
    scores = [[h.score for h in r.hits] for r in responses]  # both stores written with the same timestamps
    assert scores[0] == pytest.approx(scores[1], abs=1e-5)
    assert responses[0].match_quality == responses[1].match_quality
