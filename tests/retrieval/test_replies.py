"""The reply to a question turn ranks with the question (retrieval/replies.py, issue 25)."""

from __future__ import annotations

import pytest

from context_engine.retrieval.replies import first_reply, reply_window
from context_engine.schema.context import RequestContext
from context_engine.storage.vector.scoring import L0Match

SESSION = "ctx://user/mel/memories/sessions/c1/"


def match(seq: int, text: str, similarity: float = 0.1) -> L0Match:
    uri = f"{SESSION}{seq:06d}.md"
    return L0Match(uri, SESSION, "user:mel", "memory", "", text, similarity)


@pytest.mark.parametrize(
    ("uri", "abstract", "window"),
    [
        (f"{SESSION}000015.md", "Melanie: Wow, that painting is awesome! What inspired it?", 3),
        (f"{SESSION}000099.md", "assistant: How many nights in a row?", 1),
        (f"{SESSION}000009.md", "Caroline: 你喜欢什么颜色？", 2),
    ],
)
def test_an_asking_message_looks_at_the_messages_after_it(uri, abstract, window):
    seq = int(uri.rsplit("/", 1)[1].removesuffix(".md"))
    assert reply_window(uri, abstract, window) == [f"{SESSION}{seq + i:06d}.md" for i in range(1, window + 1)]


@pytest.mark.parametrize(
    ("uri", "abstract"),
    [
        (f"{SESSION}000015.md", "Melanie: Wow, that painting is awesome!"),  # states, does not ask
        ("ctx://user/mel/memories/prefs.md", "Melanie: What inspired it?"),  # not a conversation message
        (SESSION, "Melanie: What inspired it?"),  # a directory
        (f"{SESSION}notes.md", "Melanie: What inspired it?"),  # no sequence number
    ],
)
def test_other_nodes_have_no_reply_window(uri, abstract):
    assert reply_window(uri, abstract, 3) == []


def test_the_reply_is_the_next_message_of_another_speaker_that_states_something():
    asker = f"{SESSION}000015.md", "Melanie: What inspired the painting?"
    following = reply_window(*asker, 3)
    answer = match(16, "Caroline: I painted it after I visited the LGBTQ center.")
    assert first_reply(*asker, following, {answer.uri: answer}) == answer
    ack = match(16, "assistant: Noted!")
    same = match(17, "Melanie: Or was it the sunset?")  # the asker again
    later = match(18, "Caroline: The sunset at the lake, mostly.")
    found = {m.uri: m for m in (ack, same, later)}
    assert first_reply(*asker, following, found) == later  # the acknowledgement and the asker are passed over
    assert first_reply(*asker, following, {ack.uri: ack, same.uri: same}) is None
    assert first_reply(*asker, following, {}) is None  # nothing found (deleted, filtered out, another space)


# ---- through the engine (the default model) --------------------------------------------------------------------------
MEL = RequestContext(account_id="acme", role="user", user_space="mel", agent_space="helper")
# written for this test: the question of the conversation matches the query; its answer shares few of its words
_LINES = [
    ("Melanie", "Hey Caroline! How have you been lately?"),
    ("Caroline", "Busy! I finished a big canvas for the art show next month."),
    ("Melanie", "Wow, that painting for the art show is stunning. What inspired the painting?"),
    ("Caroline", "A visit to the community centre downtown, everyone there felt like family."),
    ("Melanie", "That is lovely. I took the kids camping by the lake at the weekend."),
    ("Caroline", "Sounds fun! Did they enjoy the campfire?"),
    ("Melanie", "They loved the marshmallows most of all."),
]
TURNS = [{"role": "user", "speaker": who, "content": text} for who, text in _LINES]


def _search(tmp_path, embedder, name, **hierarchy):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    # messages indexed alone (no context): the answer's own words are all it has
    settings = load_settings(tmp_path / name, memory={"context_messages": 0}, retrieval={"hierarchy": hierarchy})
    with ContextEngineService(settings, embedder=embedder) as engine:
        engine.add_messages(TURNS, "c1", MEL)
        return engine.search_memory(
            "What inspired Caroline's painting for the art show?", MEL, include_debug=True, trace_level="detailed"
        )


def test_the_answer_to_a_matching_question_ranks_with_it(tmp_path, default_embedder):
    on = _search(tmp_path, default_embedder, "on")
    off = _search(tmp_path, default_embedder, "off", reply_factor=0.0)
    uris_on, uris_off = [h.uri for h in on.hits], [h.uri for h in off.hits]
    asking = next(h for h in on.hits if "What inspired the painting?" in (h.abstract or ""))
    reply = next(h for h in on.hits if "community centre" in (h.abstract or ""))
    assert uris_on.index(reply.uri) == uris_on.index(asking.uri) + 1  # right below the question it answers
    assert reply.match_reason.startswith(f"reply_to:{asking.uri} ")
    assert reply.uri not in uris_off[: uris_off.index(asking.uri) + 2]  # without the rule: lower, or not at all
    events = [e for e in on.thinking_trace["events"] if e.get("event") == "replies"]
    assert events and events[0]["count"] >= 1
    assert not [e for e in off.thinking_trace["events"] if e.get("event") == "replies"]
