"""Concurrent writes to one memory (an attack pass, 2026-12-07): an update that read a memory before another write
changed or deleted it is refused inside the write's transaction (``ingest/memory.py`` ``_version_writer``), so two
updates never both write version ``v + 1`` (a unique-key failure, a 500) and an update never writes back a memory
deleted meanwhile. The interleavings are made explicit (the stale read, then the other write, then the update) so
the tests do not depend on thread timing; a last test runs real threads and accepts only the documented outcomes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.context import RequestContext
from context_engine.settings import load_settings

pytestmark = pytest.mark.slow

ALICE = RequestContext(account_id="default", role="user", user_space="alice", agent_space="helper")


@pytest.fixture
def engine(tmp_path, default_embedder):
    from context_engine.service import ContextEngineService

    e = ContextEngineService(
        load_settings(tmp_path / "home", embedding={"backend": "use-multilingual"}), embedder=default_embedder
    )
    yield e
    e.close()


def _stale_update(engine, uri: str, text: str):
    """The node as an update reads it before its write turn, and the call that writes with it."""
    node = engine._memory_node(uri, ALICE, write=True)
    return lambda: engine.memory_writer.update_memory(ALICE.account_id, node, text)


def test_an_update_that_read_an_older_version_is_a_retryable_conflict_and_writes_nothing(engine):
    uri = engine.add_memory("The standup is at 9:15 every morning.", ALICE, category="work").uris[0]
    late = _stale_update(engine, uri, "The standup is at 10:00 every morning.")
    assert engine.update_memory(uri, "The standup is at 9:45 every morning.", ALICE).items[0].version == 2
    with pytest.raises(ContextEngineError) as err:
        late()
    assert err.value.code == ErrorCode.CONFLICT and err.value.retryable
    assert err.value.details["version"] == 2
    detail = engine.get_memory(uri, ALICE)
    assert (detail.version, detail.text) == (2, "The standup is at 9:45 every morning.")
    assert [h.text for h in detail.history] == ["The standup is at 9:15 every morning."]
    # read again, the same update goes through as version 3
    assert engine.update_memory(uri, "The standup is at 10:00 every morning.", ALICE).items[0].version == 3


def test_an_update_that_read_a_memory_deleted_since_does_not_bring_it_back(engine):
    uri = engine.add_memory("My locker code at the gym is 4471.", ALICE, category="gym").uris[0]
    late = _stale_update(engine, uri, "My locker code at the gym is 4417.")
    engine.delete_memory(uri, ALICE)
    with pytest.raises(ContextEngineError) as err:
        late()
    assert err.value.code == ErrorCode.TARGET_NOT_FOUND
    with pytest.raises(ContextEngineError) as gone:
        engine.get_memory(uri, ALICE)
    assert gone.value.code == ErrorCode.TARGET_NOT_FOUND
    assert uri not in {h.uri for h in engine.search_memory("gym locker code", ALICE, top_k=5).hits}


def test_concurrent_updates_of_one_memory_each_land_or_are_a_retryable_conflict(engine):
    uri = engine.add_memory("Our team standup is at 9:15.", ALICE, category="work").uris[0]

    def update(i: int) -> int | str:
        try:
            return engine.update_memory(uri, f"Our team standup is at 9:{20 + i}.", ALICE).items[0].version
        except ContextEngineError as e:
            assert e.code == ErrorCode.CONFLICT and e.retryable, e  # never a storage failure
            return "conflict"

    with ThreadPoolExecutor(6) as pool:
        outcomes = list(pool.map(update, range(6)))
    versions = sorted(v for v in outcomes if v != "conflict")
    assert versions == list(range(2, 2 + len(versions)))  # each landed update got its own version
    detail = engine.get_memory(uri, ALICE)
    assert detail.version == 1 + len(versions) and len(detail.history) == len(versions)
