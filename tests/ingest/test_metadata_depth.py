"""Memory metadata nested deeper than ``METADATA_MAX_DEPTH`` (32) levels is refused at write time with ``WRT-4002``
on every write that takes metadata, and nothing is written (ingest/memory.py). Before, 256 levels were stored, and
then every list and read of that user's memories failed with 500 until the memory was deleted."""

from __future__ import annotations

import json

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.ingest.memory import METADATA_MAX_DEPTH
from context_engine.schema.context import RequestContext
from context_engine.schema.query import json_depth

ALICE = RequestContext(account_id="default", role="user", user_space="alice")


def nested(depth: int) -> dict:
    """``{"a": {"a": ... 1}}`` with ``depth`` objects."""
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    assert isinstance(value, dict)
    return value


@pytest.fixture
def engine(tmp_path):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings
    from tests.retrieval.conftest import HashEmbedder

    e = ContextEngineService(load_settings(tmp_path / "home"), embedder=HashEmbedder())
    yield e
    e.close()


def test_the_limit_counts_the_metadata_object_as_the_first_level():
    assert METADATA_MAX_DEPTH == 32
    assert json_depth({"a": 1}) == 1 and json_depth({"a": [1, {"b": []}]}) == 4
    assert json_depth(nested(32)) == 32 and json_depth(nested(33)) == 33
    cyclic: dict = {"a": 1}
    cyclic["self"] = cyclic  # the Python API can pass one: the walk stops past the limit
    assert json_depth(cyclic) == METADATA_MAX_DEPTH + 1


WRITES = {
    "add_memory": lambda e, md: e.add_memory("Alice likes green tea.", ALICE, metadata=md),
    "add_memory at a URI": lambda e, md: e.add_memory(
        "Alice likes green tea.", ALICE, uri="ctx://user/alice/memories/prefs/tea.md", metadata=md
    ),
    "add_memories": lambda e, md: e.add_memories(
        [{"text": "Alice likes green tea."}, {"text": "Alice owns a bike.", "metadata": md}], ALICE
    ),
    "add_messages": lambda e, md: e.add_messages(
        [{"role": "user", "content": "hi"}, {"role": "user", "content": "I like tea.", "metadata": md}], "c1", ALICE
    ),
}


@pytest.mark.parametrize("write", WRITES, ids=list(WRITES))
@pytest.mark.parametrize("depth", [33, 256, 5_000])
def test_deep_metadata_is_refused_on_every_write_and_nothing_is_written(engine, write, depth):
    with pytest.raises(ContextEngineError) as caught:
        WRITES[write](engine, nested(depth))
    err = caught.value
    assert err.code is ErrorCode.REQUEST_INVALID and err.code.http_status == 400
    assert err.details["field"] == "metadata" and err.details["max_depth"] == METADATA_MAX_DEPTH
    assert "32 levels" in err.message
    if write in ("add_memories", "add_messages"):
        assert err.details["index"] == 1
    assert engine.list_memories(ALICE).total == 0


def test_an_update_with_deep_metadata_is_refused_and_the_memory_is_unchanged(engine):
    uri = engine.add_memory("Alice likes green tea.", ALICE, metadata={"source": "chat"}).uris[0]
    with pytest.raises(ContextEngineError) as caught:
        engine.update_memory(uri, "Alice likes black tea.", ALICE, metadata=nested(40))
    assert caught.value.code is ErrorCode.REQUEST_INVALID and caught.value.details["max_depth"] == 32
    detail = engine.get_memory(uri, ALICE)
    assert detail.text == "Alice likes green tea." and detail.metadata == {"source": "chat"} and detail.version == 1


def test_metadata_at_the_limit_is_stored_and_lists_and_reads_back(engine):
    md = nested(METADATA_MAX_DEPTH)
    uri = engine.add_memory("Alice likes green tea.", ALICE, metadata=md).uris[0]
    msg = engine.add_messages([{"role": "user", "content": "hello", "metadata": md}], "c1", ALICE).uris[0]
    page = engine.list_memories(ALICE)
    assert page.total == 2
    assert engine.get_memory(uri, ALICE).metadata == md
    assert json_depth(engine.get_memory(msg, ALICE).metadata) == METADATA_MAX_DEPTH
    # the answer serializes as JSON (the HTTP and MCP answers): what broke at 256 levels
    assert json.loads(page.model_dump_json())["items"][0]["metadata"]


@pytest.mark.parametrize("write", WRITES, ids=list(WRITES))
@pytest.mark.parametrize(
    "md", [{"tag": "tea\x00"}, {"tags": ["ok", "b\x00d"]}, {"a": {"b\x00": 1}}], ids=["value", "list", "nested-key"]
)
def test_metadata_holding_nul_is_refused_on_every_write_and_nothing_is_written(engine, write, md):
    """A helper's review (2026-12-07): a string value with NUL was stored, and on PostgreSQL every metadata_filter
    over that account's memories then failed with a 500 (JSON text with \\u0000 cannot be read as text there)."""
    with pytest.raises(ContextEngineError) as caught:
        WRITES[write](engine, md)
    err = caught.value
    assert err.code is ErrorCode.REQUEST_INVALID and err.details["field"] == "metadata" and "NUL" in err.message
    assert engine.list_memories(ALICE).total == 0
