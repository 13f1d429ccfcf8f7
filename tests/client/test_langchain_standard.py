"""LangChain's own standard suite for retrievers (``langchain-tests`` ``RetrieversIntegrationTests``, pinned in
constraints.txt, installed by the ``test`` extra) against our LangChain retriever on the real server of
tests/client/conftest.py (an engine on a temporary home, the suite's real model, four runbooks).

The suite is run twice, with the number of results named ``k`` (LangChain's usual name) and ``top_k`` (ours): the
constructor takes either, and ``invoke(query, k=1)`` / ``invoke(query, top_k=1)`` returns one document. None of the
standard tests is overridden or marked xfail (the suite's own ``test_no_overrides_DO_NOT_OVERRIDE`` checks it).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from context_engine.integrations.langchain import ContextEngineRetriever
from tests.client.conftest import World

pytestmark = pytest.mark.slow

QUERY = "the node ran out of disk space"


# The suite's test_ainvoke_returns_documents is a coroutine: pytest-asyncio (strict mode) runs it when marked; the
# mark on the class reaches its sync tests too, where pytest-asyncio warns that it has nothing to do.
@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:The test <Function .*> is marked with '@pytest.mark.asyncio' but it is not")
class _OnTheTestServer(RetrieversIntegrationTests):
    """The standard suite, constructed against the package's live server (the ``world`` fixture)."""

    _world: World

    @pytest.fixture(autouse=True)
    def _on_server(self, world: World) -> None:
        self._world = world

    @property
    def retriever_constructor(self) -> type[ContextEngineRetriever]:
        return ContextEngineRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"base_url": self._world.url, "api_key": self._world.alice_key}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


class TestStandardWithK(_OnTheTestServer):
    """``k``: LangChain's default name for the number of results."""


class TestStandardWithTopK(_OnTheTestServer):
    """``top_k``: the name our API uses."""

    @property
    def num_results_arg_name(self) -> str:
        return "top_k"


def test_per_call_k_overrides_the_constructor_for_that_call_only(world: World) -> None:
    retriever = ContextEngineRetriever(base_url=world.url, api_key=world.alice_key, k=2)
    assert retriever.top_k == 2
    assert len(retriever.invoke(QUERY, k=1)) == 1
    assert len(retriever.invoke(QUERY, top_k=3)) == 3
    docs = retriever.invoke(QUERY)
    assert len(docs) == 2 and all(isinstance(d, Document) for d in docs)
    retriever.close()


def test_bad_k_is_refused(world: World) -> None:
    retriever = ContextEngineRetriever(base_url=world.url, api_key=world.alice_key)
    for bad in ({"k": 0}, {"k": 51}, {"top_k": "3"}, {"k": True}, {"k": 1, "top_k": 2}, {"kk": 1}):
        with pytest.raises(ValueError):
            retriever.invoke(QUERY, **bad)
    with pytest.raises(ValueError):
        ContextEngineRetriever(base_url=world.url, k=2, top_k=3)
    assert ContextEngineRetriever(base_url=world.url, k=4, top_k=4).top_k == 4
