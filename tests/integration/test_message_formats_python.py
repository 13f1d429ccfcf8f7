"""add_messages from Python takes LangChain message objects and OpenAI dicts as they are (issue 29 item 3): the role,
the speaker and the text are stored as with our own format, and the messages are found by search_memory."""

from __future__ import annotations

import pytest

from context_engine.schema.context import RequestContext
from context_engine.settings import load_settings

pytestmark = pytest.mark.slow

SAM = RequestContext(account_id="default", role="user", user_space="sam", agent_space="helper")


@pytest.fixture
def engine(tmp_path, default_embedder):
    from context_engine.service import ContextEngineService

    svc = ContextEngineService(load_settings(tmp_path / "home"), embedder=default_embedder)
    yield svc
    svc.close()


def test_langchain_objects_and_openai_dicts_are_stored_and_found(engine):
    lc = pytest.importorskip("langchain_core.messages")
    result = engine.add_messages(
        [
            lc.HumanMessage("I started a new job at Northwind Traders.", name="Sam"),
            lc.AIMessage("Congratulations on the new job!"),
            {"role": "user", "name": "Sam", "content": [{"type": "text", "text": "My sister lives in Leeds."}]},
        ],
        "s1",
        SAM,
    )
    details = [engine.get_memory(u, SAM) for u in result.uris]
    assert [(d.metadata["role"], d.metadata["speaker"]) for d in details] == [
        ("user", "Sam"),
        ("assistant", "assistant"),
        ("user", "Sam"),
    ]
    assert details[0].abstract == "Sam: I started a new job at Northwind Traders."
    hits = engine.search_memory("Which company is Sam's new job at?", SAM, top_k=3).hits
    assert hits[0].uri == result.uris[0]
