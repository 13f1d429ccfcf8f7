"""The memory event history through the service (issue 29 item 5): every ADD, UPDATE and DELETE of a memory, recorded
in the write's transaction (ingest/memory_events.py), read per caller as list_memories decides (service
.list_memory_events), with real writes on the real stores."""

from __future__ import annotations

from datetime import datetime

import pytest

from context_engine.errors import ContextEngineError
from context_engine.schema.context import RequestContext

ALICE = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="alice-bot")
CAROL = RequestContext(account_id="acme", role="user", user_space="carol")
ADMIN = RequestContext(account_id="acme", role="admin")
OTHER_ADMIN = RequestContext(account_id="globex", role="admin")
BOB = RequestContext(account_id="globex", role="user", user_space="alice")  # the same user name, another account


def _kinds(page) -> list[tuple[str, str]]:
    return [(e.event, e.uri) for e in page.items]


@pytest.fixture
def engine(make_engine):
    return make_engine()


def test_an_add_an_update_and_a_delete_are_three_events_newest_first(engine):
    uri = engine.add_memory("Alice takes her coffee black.", ALICE, category="preference").uris[0]
    engine.update_memory(uri, "Alice takes her coffee with oat milk.", ALICE)
    engine.delete_memory(uri, ALICE)
    page = engine.list_memory_events(ALICE)
    assert (page.total, page.offset, page.next_offset) == (3, 0, None)
    delete, update, add = page.items
    assert [e.event for e in page.items] == ["DELETE", "UPDATE", "ADD"]
    assert {e.uri for e in page.items} == {uri} and all(e.category == "preference" for e in page.items)
    assert (add.version_before, add.version_after) == (None, 1)
    assert (add.abstract_before, add.abstract_after) == (None, "Alice takes her coffee black.")
    assert (update.version_before, update.version_after) == (1, 2)
    assert update.abstract_before == "Alice takes her coffee black."
    assert update.abstract_after == "Alice takes her coffee with oat milk."
    assert (delete.version_before, delete.version_after) == (2, None)
    assert (delete.abstract_before, delete.abstract_after) == ("Alice takes her coffee with oat milk.", None)
    assert add.id < update.id < delete.id
    assert isinstance(add.created_at, datetime) and add.created_at <= update.created_at <= delete.created_at
    # one memory's own events (deleted or not): the same three
    assert _kinds(engine.list_memory_events(ALICE, uri=uri)) == _kinds(page)


def test_every_memory_write_makes_its_events_and_no_write_makes_none(engine):
    engine.add_messages(
        [{"role": "user", "content": "We land in Lisbon on Friday."}, {"role": "assistant", "content": "Noted."}],
        "trip-1",
        ALICE,
    )
    batch = engine.add_memories([{"text": "Alice is allergic to peanuts."}, {"text": "Alice's car is blue."}], ALICE)
    assert [e.event for e in engine.list_memory_events(ALICE).items] == ["ADD"] * 4
    # the same text again is unchanged: nothing is written, no event
    engine.add_memory("Alice is allergic to peanuts.", ALICE)
    assert engine.list_memory_events(ALICE).total == 4
    # a recursive delete of the conversation: one DELETE per message
    engine.delete("ctx://user/alice/memories/sessions/trip-1/", ALICE, recursive=True)
    page = engine.list_memory_events(ALICE)
    assert [e.event for e in page.items[:2]] == ["DELETE", "DELETE"]
    assert {e.uri for e in page.items[:2]} == {
        "ctx://user/alice/memories/sessions/trip-1/000001.md",
        "ctx://user/alice/memories/sessions/trip-1/000002.md",
    }
    assert {e.abstract_before for e in page.items[:2]} == {"user: We land in Lisbon on Friday.", "assistant: Noted."}
    # a memory moved: a DELETE where it was, an ADD where it is
    old = batch.uris[1]
    new = old.replace("/memories/", "/memories/car/")
    engine.move(old, new, ALICE)
    moved = engine.list_memory_events(ALICE, limit=2).items
    assert {(e.event, e.uri) for e in moved} == {("DELETE", old), ("ADD", new)}
    assert all("blue" in (e.abstract_before or e.abstract_after or "") for e in moved)


def test_a_failed_write_leaves_no_event(engine):
    class Refuse:
        def nodes_written(self, account_id, nodes, vectors):
            raise RuntimeError("the hint index failed")

        def nodes_deleted(self, account_id, uris):
            raise RuntimeError("the hint index failed")

    uri = engine.add_memory("Alice's desk is on the third floor.", ALICE).uris[0]
    engine.pipeline.add_listener(Refuse())
    for write in (
        lambda: engine.add_memory("Alice runs on Tuesdays.", ALICE),
        lambda: engine.update_memory(uri, "Alice's desk is on the fourth floor.", ALICE),
        lambda: engine.delete_memory(uri, ALICE),
    ):
        with pytest.raises(RuntimeError):
            write()
    page = engine.list_memory_events(ALICE)
    assert [(e.event, e.version_after) for e in page.items] == [("ADD", 1)]


def test_events_are_read_per_caller_and_never_across_accounts(engine):
    alice = engine.add_memory("Alice plays tennis on Saturdays.", ALICE).uris[0]
    carol = engine.add_memory("Carol plays football on Sundays.", CAROL).uris[0]
    engine.delete_memory(carol, CAROL)
    assert _kinds(engine.list_memory_events(ALICE)) == [("ADD", alice)]
    assert _kinds(engine.list_memory_events(CAROL)) == [("DELETE", carol), ("ADD", carol)]
    # an admin names the user; without one it reads its own (default) space
    assert _kinds(engine.list_memory_events(ADMIN, user_space="carol")) == [("DELETE", carol), ("ADD", carol)]
    assert engine.list_memory_events(ADMIN).items == []
    assert _kinds(engine.list_memory_events(ADMIN, uri=carol)) == [("DELETE", carol), ("ADD", carol)]
    # a user may not name another user, nor read another user's memory, deleted or never written: one answer
    with pytest.raises(ContextEngineError) as err:
        engine.list_memory_events(ALICE, user_space="carol")
    assert err.value.code.value == "RET-4031"
    for uri in (carol, "ctx://user/carol/memories/never-written.md"):
        with pytest.raises(ContextEngineError) as err:
            engine.list_memory_events(ALICE, uri=uri)
        assert (err.value.code.value, err.value.message) == (
            "RET-4032", "the URI is not a memory visible to this caller"
        )
    # another account: its admin naming alice, and its own user alice, see none of acme's events
    assert engine.list_memory_events(OTHER_ADMIN, user_space="alice").items == []
    assert engine.list_memory_events(BOB).items == []
    assert engine.list_memory_events(OTHER_ADMIN, uri=alice).items == []


def test_paging_and_bad_arguments(engine):
    engine.add_memories([{"text": f"Alice's fact number {i}: {i * 7} apples."} for i in range(5)], ALICE)
    first = engine.list_memory_events(ALICE, limit=2)
    second = engine.list_memory_events(ALICE, limit=2, offset=first.next_offset)
    last = engine.list_memory_events(ALICE, limit=2, offset=second.next_offset)
    assert (first.total, first.next_offset, second.next_offset, last.next_offset) == (5, 2, 4, None)
    ids = [e.id for p in (first, second, last) for e in p.items]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == 5
    for kwargs, code in (
        ({"limit": 0}, "WRT-4002"),
        ({"limit": 201}, "WRT-4002"),
        ({"offset": -1}, "WRT-4002"),
        ({"user_space": "a/b"}, "WRT-4001"),
        ({"uri": "ctx://user/alice/memories/../x.md"}, "WRT-4001"),
        ({"uri": "ctx://resources/"}, "RET-4032"),
    ):
        with pytest.raises(ContextEngineError) as err:
            engine.list_memory_events(ALICE, **kwargs)
        assert err.value.code.value == code, kwargs
    # a caller without a user space has no memories of its own to list
    with pytest.raises(ContextEngineError) as err:
        engine.list_memory_events(RequestContext(account_id="acme", role="user", agent_space="bot"))
    assert err.value.code.value == "WRT-4002"


def test_secrets_in_a_memory_are_redacted_in_its_events(engine):
    uri = engine.add_memory("The staging password=Hunter2Hunter2 for the db", ALICE).uris[0]
    engine.update_memory(uri, "The staging db key is AKIAIOSFODNN7EXAMPLE now", ALICE)
    text = engine.list_memory_events(ALICE).model_dump_json()
    assert "Hunter2Hunter2" not in text and "AKIAIOSFODNN7EXAMPLE" not in text and "[REDACTED" in text
