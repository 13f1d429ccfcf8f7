"""The ``memory_events`` table on every metadata backend (storage/metadata/memory_events.py; issue 29): rows written
inside a transaction commit or roll back with it, the newest event per memory, pages newest first per owner space
or memory, and no row of another account."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from context_engine.storage.factory import open_memory_events

from .conftest import MetadataBackend

T0 = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)


def _event(uri: str, event: str, n: int, space: str = "user:alice", **extra: object) -> dict[str, object]:
    return {
        "owner_space": space,
        "uri": uri,
        "uri_key": uri,
        "event": event,
        "category": None,
        "version_before": extra.get("before"),
        "version_after": extra.get("after"),
        "abstract_before": None,
        "abstract_after": extra.get("text"),
        "created_at": T0 + timedelta(seconds=n),
    }


def test_events_are_paged_newest_first_per_space_and_memory(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    events = open_memory_events(store)
    a, b = "ctx://user/alice/memories/a.md", "ctx://user/alice/memories/b.md"
    events.record("acme", [_event(a, "ADD", 0, after=1, text="A one"), _event(b, "ADD", 1, after=1)])
    events.record("acme", [_event(a, "UPDATE", 2, before=1, after=2, text="A two")])
    events.record("acme", [_event("ctx://user/carol/memories/c.md", "ADD", 3, space="user:carol")])
    events.record("globex", [_event(a, "DELETE", 4, before=9)])  # the same URI in another account
    rows, total = events.page("acme", owner_space="user:alice", limit=2, offset=0)
    assert total == 3 and [(r.uri, r.event) for r in rows] == [(a, "UPDATE"), (b, "ADD")]
    rows, total = events.page("acme", owner_space="user:alice", limit=2, offset=2)
    assert total == 3 and [(r.uri, r.event, r.created_at) for r in rows] == [(a, "ADD", T0)]
    rows, total = events.page("acme", uri_key=a, limit=10, offset=0)
    assert [r.event for r in rows] == ["UPDATE", "ADD"] and total == 2
    latest = events.latest("acme", [a, b, "ctx://user/alice/memories/none.md"])
    assert {k: (r.event, r.version_after, r.abstract_after) for k, r in latest.items()} == {
        a: ("UPDATE", 2, "A two"),
        b: ("ADD", 1, None),
    }
    assert events.latest("globex", [a])[a].event == "DELETE"
    assert events.page("initech", limit=10, offset=0) == ([], 0)


def test_events_commit_and_roll_back_with_the_transaction(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    events = open_memory_events(store)
    uri = "ctx://user/alice/memories/a.md"
    with pytest.raises(RuntimeError), store.transaction():
        events.record("acme", [_event(uri, "ADD", 0, after=1)])
        assert events.latest("acme", [uri])[uri].event == "ADD"  # the transaction sees its own row
        raise RuntimeError("the write failed")
    assert events.page("acme", limit=10, offset=0) == ([], 0)
    with store.transaction():
        events.record("acme", [_event(uri, "ADD", 0, after=1)])
    assert events.page("acme", limit=10, offset=0)[1] == 1
