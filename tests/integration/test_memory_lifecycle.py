"""The memory write path and lifecycle through the service, on the default model (use-multilingual) and the real
stores (issue 11 items 3 and 4, "Bad input"): add_messages (sessions, numbering, metadata, per-turn context, bounded
directory summaries), add_memories dedup (exact, near-duplicate policies, a contradiction is not a duplicate),
update_memory with versions, list/get/delete_memory, isolation between users, and bad input that writes nothing.

The cosines quoted below are of the default model; the near-duplicate threshold is ``memory.near_duplicate_similarity``
(0.92 by default).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import Level
from context_engine.settings import load_settings
from context_engine.storage.content.local import LocalContentStore
from tests.retrieval.conftest import CountingContent

pytestmark = pytest.mark.slow

ALICE = RequestContext(account_id="default", role="user", user_space="alice", agent_space="helper")
BOB = RequestContext(account_id="default", role="user", user_space="bob", agent_space="other")
SESSIONS = "ctx://user/alice/memories/sessions/"

DARK = "The user prefers dark mode in the editor"
DARK_REPHRASED = "User prefers the editor in dark mode"  # cosine 0.98 to DARK
DARK_SHORT = "The user prefers dark mode"
LIGHT_SHORT = "The user prefers light mode"  # cosine 0.85 to DARK_SHORT: a contradiction, not a duplicate


# ---------------------------------------------------------------------------------------------------- fixtures
@pytest.fixture
def make(tmp_path: Path, default_embedder) -> Iterator[Callable[..., Any]]:
    """Factory: ``make(content=..., embedder=..., **settings_overrides)`` -> a service on a fresh home."""
    from context_engine.service import ContextEngineService

    opened: list[Any] = []

    def build(*, content: Any = None, embedder: Any = None, **overrides: Any) -> Any:
        home = tmp_path / f"home{len(opened)}"
        settings = load_settings(home, embedding={"backend": "use-multilingual"}, **overrides)
        engine = ContextEngineService(settings, embedder=embedder or default_embedder, content=content)
        opened.append(engine)
        return engine

    yield build
    for engine in opened:
        engine.close()


@pytest.fixture
def engine(make):
    return make()


def messages(start: int, stop: int, **extra: Any) -> list[dict[str, Any]]:
    """Alternating Caroline (user) / Melanie (assistant) turns with one distinct fact each, minute-stamped."""
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "speaker": "Caroline" if i % 2 == 0 else "Melanie",
            "content": f"Turn {i}: I bought {i + 2} tickets for the concert in hall {i * 7}.",
            "timestamp": f"2023-05-08T13:{i % 60:02d}:00Z",
            **extra,
        }
        for i in range(start, stop)
    ]


def snapshot(engine, ctx: RequestContext = ALICE) -> tuple:
    """Everything a user could observe of the store: content files, nodes, vector rows, index size, the listing."""
    root = Path(engine.content.root)  # the local content store, also behind a test wrapper
    files = sorted((str(p.relative_to(root)), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    nodes = sorted(
        (n.uri, n.index_status, n.content_hash, n.version, n.updated_at)
        for n in engine.metadata.list_all_nodes(ctx.account_id)
    )
    vectors = sorted((v.id, v.text, v.context) for batch in engine.metadata.iter_vectors(ctx.account_id) for v in batch)
    listing = engine.list_memories(ctx, limit=200)
    return files, nodes, vectors, engine.index.count(), engine.metadata.count_nodes(ctx.account_id), listing


def level0(engine, uri: str):
    [vec] = [v for v in engine.metadata.get_vectors("default", [uri]) if v.level == 0]
    return vec


# ---------------------------------------------------------------------------------------------------- add_messages
def test_add_messages_numbers_the_session_and_continues_it(engine):
    first = engine.add_messages(messages(0, 3), "s1", ALICE)
    assert first.uris == [f"{SESSIONS}s1/00000{i}.md" for i in (1, 2, 3)]
    assert [o.status for o in first.items] == ["added"] * 3 and first.nodes == 3
    second = engine.add_messages(messages(3, 5), "s1", ALICE)
    assert second.uris == [f"{SESSIONS}s1/000004.md", f"{SESSIONS}s1/000005.md"]
    other = engine.add_messages(messages(0, 1), "s2", ALICE)  # each session has its own counter
    assert other.uris == [f"{SESSIONS}s2/000001.md"]
    children = [v.uri for v in engine.ls(f"{SESSIONS}s1/", ALICE)]
    assert children == [f"{SESSIONS}s1/00000{i}.md" for i in range(1, 6)]
    assert engine.read(f"{SESSIONS}s1/000004.md", "L2", ALICE) == messages(3, 4)[0]["content"]


def test_messages_never_overwrite_a_node_written_in_the_session_by_another_route(engine):
    """Failed at 2c3ec5e (an attack pass): a session whose greatest child name is not a number ("zzz.md") took its
    next number from its count of children, and the next messages replaced a memory written at "000010.md"."""
    engine.add_messages(messages(0, 5), "s1", ALICE)
    kept = "An explicit memory at 000010"
    engine.add_memory(kept, ALICE, uri=f"{SESSIONS}s1/000010.md")
    engine.add_memory("A note named zzz", ALICE, uri=f"{SESSIONS}s1/zzz.md")
    later = engine.add_messages(messages(5, 13), "s1", ALICE)
    assert f"{SESSIONS}s1/000010.md" not in later.uris and len(set(later.uris)) == 8
    assert engine.get_memory(f"{SESSIONS}s1/000010.md", ALICE).text == kept
    assert [engine.read(u, "L2", ALICE) for u in later.uris] == [m["content"] for m in messages(5, 13)]


def test_messages_meeting_stored_nodes_at_every_reserved_number_are_refused(engine):
    """After ``_RESERVE_TRIES`` (8) reservations in a row that each meet a node written there by another route, the
    batch is ``WRT-4091`` and nothing of it is written."""
    engine.add_messages(messages(0, 5), "s1", ALICE)
    engine.add_memory("A note named zzz", ALICE, uri=f"{SESSIONS}s1/zzz.md")  # the floor: 14 children
    for n in range(15, 23):
        engine.add_memory(f"Explicit memory {n}", ALICE, uri=f"{SESSIONS}s1/{n:06d}.md")
    before = engine.list_memories(ALICE).total
    with pytest.raises(ContextEngineError) as caught:
        engine.add_messages(messages(5, 6), "s1", ALICE)
    assert caught.value.code is ErrorCode.CONFLICT and caught.value.details["uri"] == f"{SESSIONS}s1/"
    assert engine.list_memories(ALICE).total == before
    assert engine.add_messages(messages(5, 6), "s1", ALICE).uris == [f"{SESSIONS}s1/000023.md"]


def test_a_message_keeps_speaker_role_session_and_time(engine):
    uri = engine.add_messages(messages(0, 2, metadata={"topic": "music"}), "s1", ALICE).uris[1]
    detail = engine.get_memory(uri, ALICE)
    assert detail.metadata == {
        "topic": "music",
        "role": "assistant",
        "speaker": "Melanie",
        "session_id": "s1",  # the stored key keeps its first name
        "timestamp": "2023-05-08T13:01:00+00:00",
    }
    assert detail.occurred_at is not None and detail.occurred_at.isoformat() == "2023-05-08T13:01:00+00:00"
    assert detail.conversation_id == "s1" and detail.version == 1 and detail.history == []
    assert detail.abstract == "Melanie: Turn 1: I bought 3 tickets for the concert in hall 7."
    assert detail.text == "Turn 1: I bought 3 tickets for the concert in hall 7."
    no_speaker = engine.add_messages([{"content": "Just a note."}], "s3", ALICE).uris[0]
    meta = engine.get_memory(no_speaker, ALICE).metadata
    assert meta == {"role": "user", "speaker": "user", "session_id": "s3"}  # no timestamp: none stored
    assert engine.get_memory(no_speaker, ALICE).occurred_at is None


def test_context_is_role_aware_and_never_shown(engine):
    uris = engine.add_messages(messages(0, 2), "s1", ALICE).uris
    # a user turn is indexed with the assistant's reply after it (issue 25); the first turn has nothing before it
    assert level0(engine, uris[0]).context == "Melanie: Turn 1: I bought 3 tickets for the concert in hall 7."
    vec = level0(engine, uris[1])
    assert vec.text == "Melanie: Turn 1: I bought 3 tickets for the concert in hall 7."
    assert vec.context == ""  # an assistant turn never borrows the user's words
    assert engine.read(uris[0], "L0", ALICE) == "Caroline: Turn 0: I bought 2 tickets for the concert in hall 0."
    # a second batch takes its first message's context from the stored tail of the session: the assistant's
    # question it answers, skipping an acknowledgement after it
    engine.add_messages(
        [
            {"role": "assistant", "speaker": "Melanie", "content": "Which hall is the concert in?"},
            {"role": "assistant", "speaker": "Melanie", "content": "Noted!"},
        ],
        "s1",
        ALICE,
    )
    later = engine.add_messages([{"role": "user", "speaker": "Caroline", "content": "Hall 14."}], "s1", ALICE)
    assert level0(engine, later.uris[0]).context == "Melanie: Which hall is the concert in?"
    assert engine.read(later.uris[0], "L0", ALICE) == "Caroline: Hall 14."
    # a message right after the speaker's own previous one goes on from it (a burst, across batches too), and is
    # read with its reply; past an assistant's statement the speaker's own earlier turn is not what a turn answers
    again = engine.add_messages(messages(2, 5), "s1", ALICE).uris
    assert level0(engine, again[0]).context.split("\n") == [
        "Caroline: Hall 14.",
        "Melanie: Turn 3: I bought 5 tickets for the concert in hall 21.",
    ]
    assert level0(engine, again[2]).context == ""


def _dir_counts(l0: str, l1: str, name: str) -> tuple[int, int, int]:
    """(count in L0, count in L1's header, lines listed in L1 + its "… and N more")."""
    m0 = re.match(rf"Directory {name}: (\d+) items", l0)
    m1 = re.match(rf"Directory {name} \((\d+) items\)", l1)
    assert m0 and m1, (l0, l1)
    lines = l1.splitlines()
    more = re.fullmatch(r"… and (\d+) more", lines[-1])
    listed = sum(1 for line in lines if line.startswith("- "))
    return int(m0.group(1)), int(m1.group(1)), listed + (int(more.group(1)) if more else 0)


def test_a_long_session_gets_a_summary_with_the_right_counts_at_bounded_cost(make, tmp_path):
    counting = CountingContent(LocalContentStore(tmp_path / "counted-content"))
    engine = make(content=counting)
    session = f"{SESSIONS}long/"
    for start in range(0, 40, 10):  # 40 stored messages: more than the 2 x 12 children a summary reads
        engine.add_messages(messages(start, start + 10), "long", ALICE)
    l0, l1 = engine.read(session, "L0", ALICE), engine.read(session, "L1", ALICE)
    assert _dir_counts(l0, l1, "long") == (40, 40, 40)
    assert "000040.md" in l1 and "000001.md" in l1  # the window holds the first and the last children
    assert "… and " in l1

    # Reading the directory: one file per level, whatever the session's length.
    counting.reads.clear()
    engine.read(session, "L0", ALICE)
    engine.read(session, "L1", ALICE)
    assert counting.reads == [(session, Level.L0), (session, Level.L1)]
    # Listing a page of it: one L0 per listed memory.
    counting.reads.clear()
    page = engine.list_memories(ALICE, conversation_id="long", limit=5)
    assert page.total == 40 and len(page.items) == 5 and len(counting.reads) == 5

    # Appending one message costs the same number of content reads at 40 and at 70 messages.
    def reads_to_append(seq: int) -> list[tuple[str, Level]]:
        counting.reads.clear()
        engine.add_messages(messages(seq, seq + 1), "long", ALICE)
        return list(counting.reads)

    at_40 = reads_to_append(40)
    for start in range(41, 70, 10):
        engine.add_messages(messages(start, min(start + 10, 70)), "long", ALICE)
    at_70 = reads_to_append(70)
    assert len(at_40) == len(at_70)
    session_reads = [r for r in at_70 if r[0].startswith(session) and r[0] != session]
    assert len(session_reads) <= 2 * 12 + 4  # the summary window, the new file's own levels and the tail
    l0, l1 = engine.read(session, "L0", ALICE), engine.read(session, "L1", ALICE)
    assert _dir_counts(l0, l1, "long") == (71, 71, 71)


# ---------------------------------------------------------------------------------------------------- dedup
def test_the_same_normalised_text_is_the_same_memory(engine):
    first = engine.add_memories([{"text": DARK}], ALICE)
    again = engine.add_memories([{"text": "  the USER prefers dark\n mode in the editor  "}], ALICE)
    assert first.items[0].status == "added"
    assert again.items[0].status == "unchanged" and again.items[0].uri == first.items[0].uri
    assert again.unchanged == 1 and again.nodes == 0
    assert engine.list_memories(ALICE).total == 1
    twice = engine.add_memories([{"text": "Bob likes green tea."}, {"text": "bob likes GREEN tea."}], ALICE)
    assert [o.status for o in twice.items] == ["added", "unchanged"]
    assert twice.items[0].uri == twice.items[1].uri
    assert engine.list_memories(ALICE).total == 2


def test_a_near_duplicate_is_skipped_by_default_and_names_the_existing_memory(engine):
    existing = engine.add_memories([{"text": DARK}], ALICE).uris[0]
    before = snapshot(engine)
    result = engine.add_memories([{"text": DARK_REPHRASED}], ALICE)
    [outcome] = result.items
    assert outcome.status == "duplicate" and outcome.duplicate_of == existing
    assert outcome.similarity is not None and outcome.similarity >= 0.95
    assert result.duplicates == 1 and result.uris == [existing]
    assert snapshot(engine) == before  # nothing written


def test_a_near_duplicate_is_written_under_keep(engine):
    existing = engine.add_memories([{"text": DARK}], ALICE).uris[0]
    [outcome] = engine.add_memories([{"text": DARK_REPHRASED}], ALICE, policy="keep").items
    assert outcome.status == "added" and outcome.uri != existing
    assert engine.get_memory(outcome.uri, ALICE).text == DARK_REPHRASED
    assert engine.list_memories(ALICE).total == 2


def test_a_near_duplicate_replaces_the_existing_memory_under_replace(engine):
    existing = engine.add_memories([{"text": DARK, "metadata": {"source": "chat"}}], ALICE).uris[0]
    created = engine.get_memory(existing, ALICE)
    [outcome] = engine.add_memories([{"text": DARK_REPHRASED}], ALICE, policy="replace").items
    assert outcome.status == "replaced" and outcome.uri == existing and outcome.version == 2
    detail = engine.get_memory(existing, ALICE)
    assert detail.version == 2 and detail.text == DARK_REPHRASED and detail.abstract == DARK_REPHRASED
    assert [(v.version, v.text) for v in detail.history] == [(1, DARK)]
    assert detail.metadata == {"source": "chat"}  # kept: the new item gave none
    assert detail.created_at == created.created_at and detail.updated_at > created.updated_at
    assert engine.list_memories(ALICE).total == 1


def test_a_near_duplicate_within_one_batch_is_caught(engine):
    result = engine.add_memories([{"text": DARK}, {"text": DARK_REPHRASED}], ALICE)
    assert [o.status for o in result.items] == ["added", "duplicate"]
    assert result.items[1].duplicate_of == result.items[0].uri
    assert engine.list_memories(ALICE).total == 1


def test_a_contradiction_is_not_a_duplicate(engine):
    dark = engine.add_memories([{"text": DARK_SHORT}], ALICE).uris[0]
    [outcome] = engine.add_memories([{"text": LIGHT_SHORT}], ALICE).items
    assert outcome.status == "added" and outcome.duplicate_of is None and outcome.uri != dark
    assert {m.abstract for m in engine.list_memories(ALICE).items} == {DARK_SHORT, LIGHT_SHORT}


def test_dedup_is_per_user(engine):
    alice = engine.add_memories([{"text": DARK}], ALICE).uris[0]
    [same] = engine.add_memories([{"text": DARK}], BOB).items
    [near] = engine.add_memories([{"text": DARK_REPHRASED}], BOB).items
    assert same.status == "added" and same.uri.startswith("ctx://user/bob/") and same.uri != alice
    assert near.status == "duplicate" and near.duplicate_of == same.uri  # bob's own memory, never alice's


# ---------------------------------------------------------------------------------------------------- update
MANGO = "Alice's favourite fruit is mango, she eats one every morning."
TESLA = "Alice now drives a red Tesla Model 3 to work in Munich."


def test_update_memory_re_embeds_and_keeps_the_previous_version(engine):
    uri = engine.add_memories([{"text": MANGO, "metadata": {"k": 1}}], ALICE).uris[0]
    engine.add_memories([{"text": "Alice plays the cello in an amateur orchestra."}], ALICE)
    before = engine.get_memory(uri, ALICE)
    result = engine.update_memory(uri, TESLA, ALICE)
    assert [(o.uri, o.status, o.version) for o in result.items] == [(uri, "updated", 2)]
    after = engine.get_memory(uri, ALICE)
    assert after.text == TESLA and after.abstract == TESLA and after.version == 2
    assert after.created_at == before.created_at and after.updated_at > before.updated_at
    assert after.metadata == {"k": 1}
    assert [(v.version, v.text) for v in after.history] == [(1, MANGO)]
    assert after.history[0].created_at == before.updated_at
    assert level0(engine, uri).text == TESLA  # the stored vector is of the new text

    hits = engine.search_memory("what car does Alice drive to work", ALICE, score_threshold=0.0).hits
    assert hits and hits[0].uri == uri and hits[0].abstract == TESLA
    old = engine.search_memory("favourite fruit mango every morning", ALICE, score_threshold=0.0).hits
    assert all("mango" not in h.abstract for h in old)
    assert all(h.abstract == TESLA for h in old if h.uri == uri)


def test_update_memory_to_the_same_text_is_unchanged(engine):
    uri = engine.add_memories([{"text": MANGO}], ALICE).uris[0]
    [outcome] = engine.update_memory(uri, "  " + MANGO.replace(" ", "  ") + " ", ALICE).items
    assert outcome.status == "unchanged" and outcome.version == 1
    assert engine.get_memory(uri, ALICE).history == []


def test_an_update_that_changes_only_case_metadata_or_time_is_written(engine):
    """Failed at 26bb900 (an attack pass): an update whose text was the same memory by the identity of adds (case and
    sentence punctuation folded) answered ``unchanged`` and dropped a corrected code's case, and one that also gave
    new metadata or ``occurred_at`` answered ``updated`` with version 2 while nothing was written (the write skipped a
    document of the same content hash). An update names its memory: every change but spacing is written."""
    uri = engine.add_memories([{"text": "My locker code is AbX7q.", "metadata": {"status": "draft"}}], ALICE).uris[0]
    [case] = engine.update_memory(uri, "My locker code is abx7Q.", ALICE).items
    assert (case.status, case.version) == ("updated", 2)
    [meta] = engine.update_memory(
        uri, "My locker code is abx7Q.", ALICE, metadata={"status": "approved"}, occurred_at="2025-03-01"
    ).items
    assert (meta.status, meta.version) == ("updated", 3)
    detail = engine.get_memory(uri, ALICE)
    assert (detail.version, detail.text, detail.metadata) == (3, "My locker code is abx7Q.", {"status": "approved"})
    assert detail.occurred_at is not None and detail.occurred_at.isoformat().startswith("2025-03-01")
    assert [(v.version, v.text) for v in detail.history] == [
        (1, "My locker code is AbX7q."),
        (2, "My locker code is abx7Q."),
    ]
    found = engine.list_memories(ALICE).items
    assert [m.version for m in found if m.uri == uri] == [3]
    [again] = engine.update_memory(uri, "My locker code is abx7Q.", ALICE, metadata={"status": "approved"}).items
    assert (again.status, again.version) == ("unchanged", 3)


def test_add_memory_at_the_uri_of_a_stored_memory_is_its_update(engine):
    """Failed at 26bb900 (an attack pass): ``add_memory(uri=)`` over a stored memory replaced its text in place: version
    1 still, no history, the outcome ``added``; over a message it also dropped the message's role, speaker and
    conversation. It is now that memory's update (docs/memories.md): version + 1, the previous text kept, outcome
    ``replaced``, a message's own keys kept."""
    uri = engine.add_memory("My locker code is 4471.", ALICE, category="facts").items[0].uri
    [outcome] = engine.add_memory("My bike lock code is 9012.", ALICE, uri=uri).items
    assert (outcome.uri, outcome.status, outcome.version) == (uri, "replaced", 2)
    detail = engine.get_memory(uri, ALICE)
    assert detail.text == "My bike lock code is 9012." and [v.text for v in detail.history] == [
        "My locker code is 4471."
    ]
    message = engine.add_messages(messages(0, 2), "s1", ALICE).uris[1]
    before = engine.get_memory(message, ALICE).metadata
    engine.add_memory("Actually I bought 9 tickets.", ALICE, uri=message)
    after = engine.get_memory(message, ALICE)
    assert after.version == 2 and after.metadata == before and after.conversation_id == "s1"
    assert level0(engine, message).text.startswith(before["speaker"] + ": Actually I bought 9 tickets.")


def test_updating_a_message_with_metadata_keeps_the_engine_keys(engine):
    """Failed at 26bb900 (an attack pass): ``update_memory(uri, text, metadata=)`` on a message stored the caller's
    object as given: the message lost its role, speaker and conversation (a role filter no longer found it), or a
    caller's ``role``/``session_id`` moved it into another conversation. The engine's keys now say what the message
    says, as ``add_messages`` does; the caller's other keys are stored."""
    uri = engine.add_messages(messages(0, 2), "s1", ALICE).uris[1]
    before = engine.get_memory(uri, ALICE).metadata
    engine.update_memory(
        uri, "I bought 9 tickets.", ALICE, metadata={"checked": True, "role": "system", "session_id": "x"}
    )
    after = engine.get_memory(uri, ALICE)
    assert after.metadata == {**before, "checked": True} and after.conversation_id == "s1"
    assert [m.uri for m in engine.list_memories(ALICE, conversation_id="s1").items].count(uri) == 1
    assert engine.list_memories(ALICE, conversation_id="x").items == []


def test_two_updates_keep_both_earlier_versions_oldest_first(engine):
    uri = engine.add_memories([{"text": MANGO}], ALICE).uris[0]
    engine.update_memory(uri, TESLA, ALICE)
    engine.update_memory(uri, "Alice sold her car and now cycles to work.", ALICE)
    detail = engine.get_memory(uri, ALICE)
    assert detail.version == 3
    assert [(v.version, v.text) for v in detail.history] == [(1, MANGO), (2, TESLA)]


def test_updating_a_message_keeps_its_speaker_and_context(engine):
    uri = engine.add_messages(messages(0, 2), "s1", ALICE).uris[0]
    engine.update_memory(uri, "Actually I bought 9 tickets.", ALICE)
    vec = level0(engine, uri)
    assert vec.text == "Caroline: Actually I bought 9 tickets."
    assert vec.context == "Melanie: Turn 1: I bought 3 tickets for the concert in hall 7."
    assert engine.get_memory(uri, ALICE).metadata["speaker"] == "Caroline"


# ---------------------------------------------------------------------------------------------------- list, delete
def test_list_memories_is_newest_first_and_pages(engine):
    uris = [
        engine.add_memories([{"text": f"Fact number {i}: the locker code is {1000 + i}."}], ALICE).uris[0]
        for i in range(5)
    ]
    newest_first = list(reversed(uris))
    first = engine.list_memories(ALICE, limit=2)
    assert [m.uri for m in first.items] == newest_first[:2]
    assert (first.total, first.offset, first.limit, first.next_offset) == (5, 0, 2, 2)
    second = engine.list_memories(ALICE, limit=2, offset=first.next_offset)
    assert [m.uri for m in second.items] == newest_first[2:4] and second.next_offset == 4
    last = engine.list_memories(ALICE, limit=2, offset=4)
    assert [m.uri for m in last.items] == newest_first[4:] and last.next_offset is None
    assert [m.abstract for m in last.items] == ["Fact number 0: the locker code is 1000."]
    times = [m.updated_at for m in engine.list_memories(ALICE, limit=10).items]
    assert times == sorted(times, reverse=True)
    engine.update_memory(uris[0], "Fact number 0: the locker code changed to 4242.", ALICE)
    assert engine.list_memories(ALICE, limit=1).items[0].uri == uris[0]  # an update makes it the newest
    assert engine.list_memories(BOB).total == 0
    with pytest.raises(ContextEngineError) as exc:
        engine.list_memories(ALICE, limit=0)
    assert exc.value.code is ErrorCode.REQUEST_INVALID


def test_list_memories_of_a_session_and_a_category(engine):
    engine.add_messages(messages(0, 3), "s1", ALICE)
    engine.add_memories([{"text": "Alice is vegetarian.", "category": "preference"}], ALICE)
    assert engine.list_memories(ALICE).total == 4
    session = engine.list_memories(ALICE, conversation_id="s1")
    assert session.total == 3 and {m.conversation_id for m in session.items} == {"s1"}
    pref = engine.list_memories(ALICE, category="preference")
    assert [m.abstract for m in pref.items] == ["Alice is vegetarian."] and pref.items[0].category == "preference"


def test_delete_memory_removes_it_and_its_versions(engine):
    uri = engine.add_memories([{"text": MANGO}], ALICE).uris[0]
    keep = engine.add_memories([{"text": "Alice plays the cello in an amateur orchestra."}], ALICE).uris[0]
    engine.update_memory(uri, TESLA, ALICE)
    assert len(engine.metadata.get_versions("default", uri)) == 1
    report = engine.delete_memory(uri, ALICE)
    assert report.nodes == 1 and report.uris == [uri]
    with pytest.raises(ContextEngineError) as exc:
        engine.get_memory(uri, ALICE)
    assert exc.value.code is ErrorCode.TARGET_NOT_FOUND and exc.value.code.http_status == 404  # her own, deleted
    assert engine.metadata.get_versions("default", uri) == []
    assert engine.metadata.get_vectors("default", [uri]) == []
    assert [m.uri for m in engine.list_memories(ALICE).items] == [keep]
    hits = engine.search_memory("what car does Alice drive to work", ALICE, score_threshold=0.0).hits
    assert uri not in [h.uri for h in hits]
    # the same text again is a new memory at version 1, without the deleted one's history
    again = engine.add_memories([{"text": MANGO}], ALICE).items[0]
    assert again.status == "added" and again.uri == uri
    assert engine.get_memory(uri, ALICE).history == [] and engine.get_memory(uri, ALICE).version == 1


# ---------------------------------------------------------------------------------------------------- isolation
def test_another_users_memory_is_invisible_with_the_same_body_as_a_missing_one(engine):
    uri = engine.add_memories([{"text": MANGO}], ALICE).uris[0]
    before = snapshot(engine)

    def envelope(call: Callable[[], Any]) -> dict[str, Any]:
        with pytest.raises(ContextEngineError) as exc:
            call()
        assert exc.value.code in (ErrorCode.URI_FORBIDDEN, ErrorCode.TARGET_NOT_FOUND)
        return exc.value.envelope()

    hidden = [
        envelope(lambda: engine.get_memory(uri, BOB)),
        envelope(lambda: engine.update_memory(uri, "Bob was here.", BOB)),
        envelope(lambda: engine.delete_memory(uri, BOB)),
    ]
    assert snapshot(engine) == before  # bob changed nothing
    assert engine.get_memory(uri, ALICE).text == MANGO
    assert uri not in [m.uri for m in engine.list_memories(BOB).items]
    assert uri not in [h.uri for h in engine.search_memory("favourite fruit mango", BOB, score_threshold=0.0).hits]

    engine.delete_memory(uri, ALICE)
    missing = [
        envelope(lambda: engine.get_memory(uri, BOB)),
        envelope(lambda: engine.update_memory(uri, "Bob was here.", BOB)),
        envelope(lambda: engine.delete_memory(uri, BOB)),
        envelope(lambda: engine.get_memory(uri, ALICE)),
        envelope(lambda: engine.update_memory(uri, "Alice was here.", ALICE)),
        envelope(lambda: engine.delete_memory(uri, ALICE)),
    ]
    assert hidden == missing[:3]  # bob: the same 403 before and after the delete
    # alice's own deleted memory: 404 (issue 29); her space is hers, so this tells bob's caller nothing
    gone = {"code": "RET-4041", "message": "no memory at this URI (deleted, or never written)", "details": {"uri": uri}}
    assert missing[3:] == [{**gone, "request_id": None}] * 3
    assert hidden[0] == {
        "code": "RET-4032",
        "message": "the URI does not exist or is not visible to this caller",
        "details": {"uri": uri},
        "request_id": None,
    }


# ---------------------------------------------------------------------------------------------------- bad input
OK = {"role": "user", "speaker": "Caroline", "content": "I adopted a puppy named Biscuit on 3 June."}


@pytest.fixture
def seeded(make):
    """A store that already holds a session and a memory, with small limits."""
    engine = make(memory={"max_batch_items": 8, "max_metadata_bytes": 128})
    engine.add_messages(messages(0, 3), "s1", ALICE)
    engine.add_memories([{"text": MANGO}], ALICE)
    return engine


BAD_MESSAGES = [
    pytest.param([{"role": "user", "content": "   \n"}], ErrorCode.CONTENT_INVALID, id="blank-content"),
    pytest.param([{"role": "user", "content": ""}], ErrorCode.CONTENT_INVALID, id="empty-content"),
    pytest.param([{"role": "robot", "content": "beep"}], ErrorCode.REQUEST_INVALID, id="unknown-role"),
    pytest.param([{"content": "x", "timestamp": "yesterday at noon"}], ErrorCode.REQUEST_INVALID, id="timestamp-text"),
    pytest.param([{"content": "x", "timestamp": "2023-13-45"}], ErrorCode.REQUEST_INVALID, id="timestamp-month-13"),
    pytest.param([{"content": "x", "timestamp": 1e20}], ErrorCode.REQUEST_INVALID, id="timestamp-out-of-range"),
    pytest.param([{"content": "x", "timestamp": float("nan")}], ErrorCode.REQUEST_INVALID, id="timestamp-nan"),
    pytest.param([{"content": "x", "metadata": [1, 2]}], ErrorCode.REQUEST_INVALID, id="metadata-list"),
    pytest.param([{"content": "x", "metadata": '{"a": 1}'}], ErrorCode.REQUEST_INVALID, id="metadata-string"),
    pytest.param([{"content": "x", "metadata": {"a": float("nan")}}], ErrorCode.REQUEST_INVALID, id="metadata-nan"),
    pytest.param([{"content": "x", "metadata": {"a": object()}}], ErrorCode.REQUEST_INVALID, id="metadata-object"),
    pytest.param([{"content": "x", "metadata": {"a": "y" * 200}}], ErrorCode.PAYLOAD_TOO_LARGE, id="metadata-big"),
    pytest.param([{"content": "x", "metadata": {"a": "\ud800"}}], ErrorCode.REQUEST_INVALID, id="metadata-surrogate"),
    pytest.param([{"content": "lone \ud800 surrogate"}], ErrorCode.CONTENT_INVALID, id="content-surrogate"),
    pytest.param([{"content": "x", "speaker": "\ud800"}], ErrorCode.REQUEST_INVALID, id="speaker-surrogate"),
    # failed at 26bb900 (an attack pass): the L0 "Bob: I hate broccoli. Eve: I like broccoli." made Bob say it
    pytest.param(
        [OK, {"content": "I like it.", "speaker": "Bob: I hate it. Eve"}], ErrorCode.REQUEST_INVALID, id="speaker-colon"
    ),
    # failed at 26bb900: an assistant's message shown as "user: ..." passed for the user's words
    pytest.param(
        [OK, {"role": "assistant", "speaker": "User", "content": "x"}], ErrorCode.REQUEST_INVALID, id="speaker-role"
    ),
    pytest.param([{"content": "a\x00b"}], ErrorCode.CONTENT_INVALID, id="content-nul"),
    pytest.param([{"content": 5}], ErrorCode.REQUEST_INVALID, id="content-not-text"),
    pytest.param([{"content": "x", "mood": "happy"}], ErrorCode.REQUEST_INVALID, id="unknown-field"),
    pytest.param([], ErrorCode.REQUEST_INVALID, id="empty-batch"),
    pytest.param([OK] * 9, ErrorCode.PAYLOAD_TOO_LARGE, id="batch-over-limit"),
    pytest.param([OK] * 4 + [{"role": "robot", "content": "x"}], ErrorCode.REQUEST_INVALID, id="fifth-bad-role"),
    pytest.param([OK] * 4 + [{"content": "  "}], ErrorCode.CONTENT_INVALID, id="fifth-blank"),
    pytest.param([OK] * 4 + [{"content": "x", "timestamp": "noon"}], ErrorCode.REQUEST_INVALID, id="fifth-timestamp"),
]


@pytest.mark.parametrize(("batch", "code"), BAD_MESSAGES)
def test_a_bad_message_batch_fails_whole_with_its_code_and_writes_nothing(seeded, batch, code):
    before = snapshot(seeded)
    with pytest.raises(ContextEngineError) as exc:
        seeded.add_messages(batch, "s1", ALICE)
    assert exc.value.code is code and 400 <= code.http_status < 500
    if len(batch) == 5:
        assert exc.value.details["index"] == 4 and exc.value.message.startswith("item 4")
    assert snapshot(seeded) == before
    assert seeded.add_messages([OK], "s1", ALICE).uris == [f"{SESSIONS}s1/000004.md"]  # numbering unaffected


@pytest.mark.parametrize("message", [{"role": "user"}, {"role": "user", "content": None}])
def test_a_message_without_content_is_wrt_4221(seeded, message):
    before = snapshot(seeded)
    with pytest.raises(ContextEngineError) as exc:
        seeded.add_messages([OK, message], "s1", ALICE)
    assert snapshot(seeded) == before
    assert exc.value.code is ErrorCode.CONTENT_INVALID


@pytest.mark.parametrize("conversation_id", ["a/b", "..", ".", "../alice", "a\\b", "", "   ", "a\x00", "x" * 300])
def test_a_bad_conversation_id_is_wrt_4001_and_writes_nothing(seeded, conversation_id):
    before = snapshot(seeded)
    with pytest.raises(ContextEngineError) as exc:
        seeded.add_messages([OK], conversation_id, ALICE)
    assert exc.value.code is ErrorCode.URI_INVALID
    assert snapshot(seeded) == before


@pytest.mark.parametrize("call", ["session", "category"])
def test_a_lone_surrogate_in_a_uri_segment_is_a_400(seeded, call):
    with pytest.raises(ContextEngineError) as exc:
        if call == "session":
            seeded.add_messages([OK], "s\ud800", ALICE)
        else:
            seeded.add_memories([{"text": "A fact.", "category": "\ud800"}], ALICE)
    assert exc.value.code is ErrorCode.URI_INVALID


BAD_ITEMS = [
    pytest.param([{"text": "  "}], ErrorCode.CONTENT_INVALID, id="blank-text"),
    pytest.param([{"text": "lone \udfff surrogate"}], ErrorCode.CONTENT_INVALID, id="text-surrogate"),
    pytest.param([{"text": "x", "occurred_at": "nope"}], ErrorCode.REQUEST_INVALID, id="occurred-at"),
    pytest.param([{"text": "x", "metadata": [1]}], ErrorCode.REQUEST_INVALID, id="metadata-list"),
    pytest.param([{"text": "x", "metadata": {"a": "y" * 200}}], ErrorCode.PAYLOAD_TOO_LARGE, id="metadata-big"),
    pytest.param([{"text": "x", "category": "a/b"}], ErrorCode.URI_INVALID, id="category-slash"),
    pytest.param([{"text": "x", "category": ".."}], ErrorCode.URI_INVALID, id="category-dots"),
    pytest.param([{"text": f"Fact {i}."} for i in range(9)], ErrorCode.PAYLOAD_TOO_LARGE, id="batch-over-limit"),
    pytest.param([{"text": f"Fact {i}."} for i in range(4)] + [{"text": ""}], ErrorCode.CONTENT_INVALID, id="fifth"),
]


@pytest.mark.parametrize(("items", "code"), BAD_ITEMS)
def test_a_bad_memory_batch_fails_whole_and_writes_nothing(seeded, items, code):
    before = snapshot(seeded)
    with pytest.raises(ContextEngineError) as exc:
        seeded.add_memories(items, ALICE)
    assert exc.value.code is code
    assert snapshot(seeded) == before


def test_an_unknown_dedup_policy_is_refused(seeded):
    before = snapshot(seeded)
    with pytest.raises(ContextEngineError) as exc:
        seeded.add_memories([{"text": "A new fact."}], ALICE, policy="merge")
    assert exc.value.code is ErrorCode.REQUEST_INVALID
    assert snapshot(seeded) == before


def test_bad_update_input_changes_nothing(seeded):
    uri = seeded.list_memories(ALICE, category="general").items[0].uri
    before = snapshot(seeded)
    for text, kwargs, code in [
        ("  ", {}, ErrorCode.CONTENT_INVALID),
        ("bad \ud800", {}, ErrorCode.CONTENT_INVALID),
        ("New text.", {"metadata": {"a": "y" * 200}}, ErrorCode.PAYLOAD_TOO_LARGE),
        ("New text.", {"occurred_at": "not a time"}, ErrorCode.REQUEST_INVALID),
    ]:
        with pytest.raises(ContextEngineError) as exc:
            seeded.update_memory(uri, text, ALICE, **kwargs)
        assert exc.value.code is code, (text, kwargs)
    assert snapshot(seeded) == before


def test_the_batch_limit_comes_from_settings(make):
    engine = make(memory={"max_batch_items": 3})
    assert len(engine.add_messages([OK] * 3, "s1", ALICE).items) == 3
    with pytest.raises(ContextEngineError) as exc:
        engine.add_messages([OK] * 4, "s1", ALICE)
    assert exc.value.code is ErrorCode.PAYLOAD_TOO_LARGE
    assert exc.value.details == {"count": 4, "limit": 3}


# ---------------------------------------------------------------------------------------------------- failures
class FlakyEmbedder:
    """The real embedder, raising WRT-5031 on document embedding once armed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_name, self.dim = inner.model_name, inner.dim
        self.armed = False

    def embed_documents(self, texts, *, progress=None):
        if self.armed:
            raise ContextEngineError(ErrorCode.EMBEDDING_FAILED, "model crashed", retryable=True)
        return self.inner.embed_documents(texts, progress=progress)

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)


class FailingContent:
    """The real content store, raising WRT-5001 on the ``fail_at``-th ``write_levels`` once armed (so some files of
    the write have already been written and must be restored); the writes after it, the restores, succeed."""

    def __init__(self, inner: Any, fail_at: int = 3) -> None:
        self.inner = inner
        self.fail_at = fail_at
        self.armed = False
        self.writes = 0

    def write_levels(self, account_id, uri, levels):
        if self.armed:
            self.writes += 1
            if self.writes == self.fail_at:
                raise ContextEngineError(ErrorCode.STORAGE_FAILED, "disk full", retryable=True)
        return self.inner.write_levels(account_id, uri, levels)

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)


@pytest.mark.parametrize("what", ["messages", "memories", "update", "replace"])
def test_an_embedder_failure_during_the_write_leaves_the_store_as_it_was(make, default_embedder, what):
    flaky = FlakyEmbedder(default_embedder)
    engine = make(embedder=flaky)
    engine.add_messages(messages(0, 3), "s1", ALICE)
    uri = engine.add_memories([{"text": DARK}], ALICE).uris[0]
    before = snapshot(engine)
    flaky.armed = True
    with pytest.raises(ContextEngineError) as exc:
        if what == "messages":
            engine.add_messages(messages(3, 8), "s1", ALICE)
        elif what == "memories":
            engine.add_memories([{"text": MANGO}, {"text": TESLA}], ALICE)
        elif what == "update":
            engine.update_memory(uri, TESLA, ALICE)
        else:
            engine.add_memories([{"text": DARK_REPHRASED}], ALICE, policy="replace")
    assert exc.value.code is ErrorCode.EMBEDDING_FAILED
    assert snapshot(engine) == before
    flaky.armed = False
    assert engine.add_messages(messages(3, 4), "s1", ALICE).uris == [f"{SESSIONS}s1/000004.md"]


@pytest.mark.parametrize("what", ["messages", "memories", "update", "replace"])
def test_a_content_failure_during_the_commit_leaves_the_store_as_it_was(make, tmp_path, what):
    failing = FailingContent(LocalContentStore(tmp_path / "failing-content"))
    engine = make(content=failing)
    engine.add_messages(messages(0, 3), "s1", ALICE)
    uri = engine.add_memories([{"text": DARK}], ALICE).uris[0]
    before = snapshot(engine)
    failing.armed = True
    with pytest.raises(ContextEngineError) as exc:
        if what == "messages":
            engine.add_messages(messages(3, 8), "s1", ALICE)  # 5 files and 4 directories: fails on the 3rd write
        elif what == "memories":
            engine.add_memories([{"text": MANGO}, {"text": TESLA}, {"text": "Alice is vegetarian."}], ALICE)
        elif what == "update":
            engine.update_memory(uri, TESLA, ALICE)  # the file, then its directories
        else:
            engine.add_memories([{"text": DARK_REPHRASED}], ALICE, policy="replace")
    assert exc.value.code is ErrorCode.STORAGE_FAILED
    assert failing.writes >= failing.fail_at
    assert snapshot(engine) == before  # content restored, the metadata transaction (and any version row) rolled back
    assert engine.metadata.get_versions("default", uri) == []
    assert engine.get_memory(uri, ALICE).text == DARK
    failing.armed = False
    assert engine.add_messages(messages(3, 4), "s1", ALICE).uris == [f"{SESSIONS}s1/000004.md"]


def test_a_memory_up_to_the_memory_cap_is_its_own_l0_after_write_time_redaction(engine):
    """Write-time redaction must not cut a memory: its L0 is its whole text up to ``memory.l0_max_chars`` (256, the
    bound of every L0, DESIGN §1); only a memory holding a secret has its L0 changed."""
    text = (
        "Caroline said the community garden on Elm Street opens every Saturday at nine, that she volunteers there "
        "with Melanie since March 2023, and that the next harvest festival is planned for October with a potluck."
    )
    assert 200 < len(text) <= 256
    uri = engine.add_memory(text, ALICE, category="events").uris[0]
    assert engine.read(uri, "L0", ALICE) == text
    secret = "The staging database password is Pa55w0rd-Staging-2023, said Caroline."
    uri = engine.add_memory(secret, ALICE, category="events").uris[0]
    l0 = engine.read(uri, "L0", ALICE)
    assert "Pa55w0rd-Staging-2023" not in l0 and "[REDACTED" in l0
