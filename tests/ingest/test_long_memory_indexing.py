"""A memory longer than its L0 is indexed by all it says (ingest/memory.py ``indexed_context``; issues 25, 27): the L0
stays within 256 characters for display, and the level-0 record's context (embedding input and BM25 text, never
shown) carries the whole text, so a word only the cut-off part holds still finds it; an update replaces that line
and keeps what the message answers."""

from __future__ import annotations

import pytest

from context_engine.ingest.memory_context import indexed_context, own_text_removed

FILLER = "We talked about the garden and the weather for a long while that afternoon."
HEAD = "Caroline moved to Berlin on 12 March 2024 to join Siemens as an engineer."


def _long(tail: str) -> str:
    return " ".join([HEAD, FILLER, FILLER, FILLER, FILLER, tail])


@pytest.fixture
def engine(tmp_path):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings
    from tests.retrieval.conftest import HashEmbedder

    e = ContextEngineService(load_settings(tmp_path / "home"), embedder=HashEmbedder())
    yield e
    e.close()


def _level0_context(engine, uri: str) -> str:
    from tests.retrieval.conftest import ALICE

    rows = engine.metadata.get_vectors(ALICE.account_id, [uri])
    return next(r.context for r in rows if r.level == 0)


def test_the_whole_text_is_indexed_when_the_l0_is_a_cut(engine):
    from tests.retrieval.conftest import ALICE

    text = _long("Her old flatmate keeps a zeppelin model on the shelf.")
    uris = engine.add_messages(
        [
            {"role": "assistant", "content": "Where did Caroline move last spring?"},
            {"role": "user", "speaker": "Caroline", "content": text},
        ],
        "s1",
        ALICE,
    ).uris
    l0 = engine.read(uris[1], "L0", ALICE)
    assert len(l0) <= 256 and "zeppelin" not in l0  # the tail is cut from what is shown
    context = _level0_context(engine, uris[1])
    assert context.split("\n") == ["assistant: Where did Caroline move last spring?", f"Caroline: {text}"]
    hits = engine.search_memory("zeppelin model", ALICE, top_k=3).hits
    assert hits and hits[0].uri == uris[1]
    assert "zeppelin" not in hits[0].abstract


def test_an_update_replaces_the_whole_text_line_and_keeps_what_the_message_answers(engine):
    from tests.retrieval.conftest import ALICE

    uris = engine.add_messages(
        [
            {"role": "assistant", "content": "Where did Caroline move last spring?"},
            {"role": "user", "speaker": "Caroline", "content": _long("She keeps a zeppelin model there.")},
        ],
        "s1",
        ALICE,
    ).uris
    new = _long("She keeps a lighthouse painting there.")
    assert engine.update_memory(uris[1], new, ALICE).items[0].status == "updated"
    assert _level0_context(engine, uris[1]).split("\n") == [
        "assistant: Where did Caroline move last spring?",
        f"Caroline: {new}",
    ]
    assert engine.search_memory("lighthouse painting", ALICE, top_k=1).hits[0].uri == uris[1]


def test_a_memory_that_fits_its_l0_gets_no_extra_line(engine):
    from tests.retrieval.conftest import ALICE

    uri = engine.add_messages([{"role": "user", "content": "I switched to rooibos."}], "s1", ALICE).uris[0]
    assert _level0_context(engine, uri) == ""
    assert indexed_context("q", "Sam", "Short.", "Sam: Short.") == "q"


def test_the_helpers_add_and_remove_exactly_the_own_line():
    text = "A  long\ntext"
    ctx = indexed_context("user: what?", "Sam", text, "Sam: A …")
    assert ctx == "user: what?\nSam: A long text"
    assert own_text_removed(ctx, "Sam", text) == "user: what?"
    assert own_text_removed("user: what?", "Sam", text) == "user: what?"  # nothing of its own to remove
    assert indexed_context("", "", text, "A …") == "A long text"  # a memory (no speaker)


def test_a_very_long_text_is_indexed_by_its_first_characters_and_stored_whole(engine):
    # the embedding's time and memory grow with its input: one 1 MB message could exhaust a small server, so the
    # own-text line is bounded (INDEXED_TEXT_MAX_CHARS); the message's content keeps every character
    from context_engine.ingest.memory_context import INDEXED_TEXT_MAX_CHARS
    from tests.retrieval.conftest import ALICE

    text = " ".join([HEAD, *[f"{FILLER} ({i})" for i in range(600)], "The last line names Zanzibar."])
    assert len(text) > 3 * INDEXED_TEXT_MAX_CHARS
    uri = engine.add_messages([{"role": "user", "content": text}], "long", ALICE).uris[0]
    context = _level0_context(engine, uri)
    assert context.startswith("user: Caroline moved to Berlin")
    assert len(context) <= INDEXED_TEXT_MAX_CHARS + len("user: ")
    assert "Zanzibar" not in context  # past the bound: not indexed by this line
    assert engine.read_memory(uri, ALICE, level="L2").total_chars == len(text)  # stored whole


def test_the_bound_line_is_removed_on_update_and_so_is_an_uncut_one_stored_before():
    from context_engine.ingest.memory_context import INDEXED_TEXT_MAX_CHARS

    text = "word " * INDEXED_TEXT_MAX_CHARS
    ctx = indexed_context("user: what?", "Sam", text, "Sam: word …")
    own = ctx.split("\n")[-1]
    assert len(own) <= INDEXED_TEXT_MAX_CHARS + len("Sam: ")
    assert own_text_removed(ctx, "Sam", text) == "user: what?"
    uncut = "user: what?\nSam: " + " ".join(text.split())  # what a release without the bound stored
    assert own_text_removed(uncut, "Sam", text) == "user: what?"
