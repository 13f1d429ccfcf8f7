"""The reply to a question turn ranks with the question (retrieval/replies.py, issue 25)."""

from __future__ import annotations

import pytest

from context_engine.retrieval.replies import answers_for_named, first_reply, lift, reply_window, unlift_orphans
from context_engine.schema.context import RequestContext
from context_engine.schema.hits import NodeHit
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
        ("ctx://resources/faq/memories/sessions/q/000012.md", "Q: What is it?"),  # a resource, not a message
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


@pytest.mark.parametrize(
    ("asker", "replier", "named", "expected"),
    [
        ("Melanie", "Caroline", {"Caroline"}, True),
        ("user", "assistant", {"assistant"}, True),  # "What did the assistant suggest?"
        ("assistant", "user", {"user"}, True),  # "Where does the user work?" over "Where do you work?" / "At Boots"
        ("Melanie", "Caroline", {"Melanie"}, False),  # the asker is named
        ("Melanie", "Caroline", {"Melanie", "Caroline"}, False),  # both are
        ("Melanie", "Caroline", set(), False),  # no one is
    ],
)
def test_a_reply_leads_when_the_query_names_its_speaker_and_not_the_askers(asker, replier, named, expected):
    question = f"{SESSION}000015.md", f"{asker}: What inspired it?"
    reply = match(16, f"{replier}: A visit to the community centre.")
    assert answers_for_named(*question, reply, frozenset(named)) is expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What inspired Caroline's painting?", True),
        ("Who asked Caroline what inspired her painting?", False),  # about the asking: the question is wanted
        ("What did Melanie want to know? Caroline asked back.", False),
        ("请问Caroline的画是受什么启发的？", True),  # 请问 is politeness
        ("Caroline被问了什么？", False),
    ],
)
def test_a_reply_does_not_lead_for_a_query_about_the_asking(query, expected):
    question = f"{SESSION}000015.md", "Melanie: What inspired it?"
    reply = match(16, "Caroline: A visit to the community centre.")
    assert answers_for_named(*question, reply, frozenset({"Caroline"}), query) is expected


def test_a_lifted_reply_keeps_its_own_score_and_gives_it_back_when_its_question_is_dropped():
    question = NodeHit(uri=f"{SESSION}000015.md", owner_space="user:mel", vector_score=0.6)
    reply = NodeHit(uri=f"{SESSION}000016.md", owner_space="user:mel", vector_score=0.05, match_reason="child_of:x")
    other = NodeHit(uri=f"{SESSION}000030.md", owner_space="user:mel", vector_score=0.3, match_reason="l0_hybrid")
    assert lift(reply, 0.42, question.uri) and not lift(other, 0.2, question.uri)  # the own score is higher
    assert (reply.vector_score, reply.own_vector_score, reply.reply_to) == (0.42, 0.05, question.uri)
    assert reply.match_reason == f"child_of:x; reply_to:{question.uri}" and other.reply_to is None
    assert unlift_orphans([[question, reply], [other]]) == 0 and reply.vector_score == 0.42  # the question is kept
    assert unlift_orphans([[reply], [other]]) == 1  # a filter dropped the question
    assert (reply.vector_score, reply.own_vector_score, reply.reply_to) == (0.05, None, None)
    assert reply.match_reason == "child_of:x"


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


ASKED = "What inspired Caroline's painting for the art show?"  # names the one who answers (Caroline)


def _search(tmp_path, embedder, name, *, request=None, query=ASKED, **hierarchy):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    # messages indexed alone (no context): the answer's own words are all it has
    settings = load_settings(tmp_path / name, memory={"context_messages": 0}, retrieval={"hierarchy": hierarchy})
    with ContextEngineService(settings, embedder=embedder) as engine:
        engine.add_messages(TURNS, "c1", MEL)
        return engine.search_memory(
            query,
            MEL,
            include_debug=True,
            trace_level="detailed",
            **(request or {}),
        )


def _pair(result) -> tuple[int, int]:
    """The ranks of the asking message ("What inspired the painting?") and of its reply."""
    uris = [h.uri for h in result.hits]
    asking = next(h for h in result.hits if "What inspired the painting?" in (h.abstract or ""))
    reply = next(h for h in result.hits if "community centre" in (h.abstract or ""))
    return uris.index(asking.uri), uris.index(reply.uri)


def test_the_answer_to_a_matching_question_ranks_with_it(tmp_path, default_embedder):
    query = "What inspired the painting for the art show?"  # names no one
    on = _search(tmp_path, default_embedder, "on", query=query)
    off = _search(tmp_path, default_embedder, "off", query=query, reply_factor=0.0)
    uris_off = [h.uri for h in off.hits]
    asking = next(h for h in on.hits if "What inspired the painting?" in (h.abstract or ""))
    reply = next(h for h in on.hits if "community centre" in (h.abstract or ""))
    at, reply_at = _pair(on)
    assert reply_at == at + 1  # right below the question it answers
    assert f"reply_to:{asking.uri}" in reply.match_reason
    assert reply.uri not in uris_off[: uris_off.index(asking.uri) + 2]  # without the rule: lower, or not at all
    events = [e for e in on.thinking_trace["events"] if e.get("event") == "replies"]
    assert events and events[0]["count"] >= 1
    assert not [e for e in off.thinking_trace["events"] if e.get("event") == "replies"]


def test_the_reply_ranks_above_its_question_when_the_query_names_the_one_who_answers(tmp_path, default_embedder):
    """For "What inspired Caroline's painting?" Caroline's reply says it, Melanie's question only asks it."""
    named = _search(tmp_path, default_embedder, "named")
    at, reply_at = _pair(named)
    assert reply_at == at - 1
    asking = named.hits[at]
    assert named.hits[reply_at].score > asking.score and f"reply_to:{asking.uri}" in named.hits[reply_at].match_reason
    off = _search(tmp_path, default_embedder, "off", named_reply_first=False)
    assert _pair(off) == (0, 1)  # without the rule: below its question, as for a query naming no one
    # the query names the asker, not the one who answers: the question keeps its place above the reply
    asker = _search(tmp_path, default_embedder, "asker", query="What did Melanie ask about the painting?")
    at, reply_at = _pair(asker)
    assert reply_at == at + 1


def test_what_the_assistant_suggested_is_the_assistants_reply_not_the_users_request(tmp_path, default_embedder):
    """A user's request is indexed with the assistant's reply as its context, so it matches the reply's words too;
    asked what the assistant suggested, the reply ranks first."""
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    turns = [
        {"role": "user", "content": "I need to pull tables out of a few hundred PDF invoices. Which library?"},
        {"role": "assistant", "content": "For tables in PDFs I'd suggest pdfplumber: page.extract_tables() per page."},
        {"role": "user", "content": "Thanks. Unrelated: my sister's birthday is on 3 March."},
        {"role": "assistant", "content": "Noted!"},
    ]
    query = "Which library did the assistant suggest for extracting tables from PDFs?"
    firsts = {}
    for first in (True, False):
        settings = load_settings(tmp_path / str(first), retrieval={"hierarchy": {"named_reply_first": first}})
        with ContextEngineService(settings, embedder=default_embedder) as engine:
            uris = engine.add_messages(turns, "c1", MEL).uris
            firsts[first] = engine.search_memory(query, MEL).hits[0].uri
    assert firsts == {True: uris[1], False: uris[0]}


def test_a_reply_borrows_no_rank_from_a_question_the_filters_drop(tmp_path, default_embedder):
    """exclude_terms drops the question at the recheck: its reply ranks on its own score again, and the label reads
    the reply's own vector score."""
    on = _search(tmp_path, default_embedder, "on", request={"planner_hints": {"exclude_terms": ["painting"]}})
    off = _search(
        tmp_path, default_embedder, "off", reply_factor=0.0, request={"planner_hints": {"exclude_terms": ["painting"]}}
    )
    assert not [h for h in on.hits if "painting" in (h.abstract or "").lower()]  # the question is gone
    asking = f"{SESSION}000003.md"
    assert not [h for h in on.hits if f"reply_to:{asking}" in h.match_reason]
    both = {h.uri: h.score for h in off.hits}
    # no score borrowed from the dropped question (a reply to a kept question, "Did they enjoy the campfire?", is)
    shared = [(h.uri, h.score) for h in on.hits if h.uri in both and "reply_to:" not in h.match_reason]
    assert len(shared) >= 3 and shared == [(uri, both[uri]) for uri, _ in shared]
    assert on.match_quality == off.match_quality


def test_a_reply_outside_the_target_is_not_looked_up(tmp_path, default_embedder):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    with ContextEngineService(load_settings(tmp_path / "t"), embedder=default_embedder) as engine:
        uris = engine.add_messages(TURNS, "c1", MEL).uris
        asking = uris[2]  # "... What inspired the painting?"
        r = engine.search_memory(
            "What inspired Caroline's painting for the art show?",
            MEL,
            target_uri=asking,
            include_debug=True,
            trace_level="detailed",
        )
    assert [h.uri for h in r.hits] == [asking]
    assert not [e for e in r.thinking_trace["events"] if e.get("event") == "replies"]
    drops = r.thinking_trace["stages"].get("recheck", {})
    assert "outside_target_uri" not in str(drops)
