"""search_memory over memories (issue 11 items 1, 2 and 4): memory filters (time range, metadata, session) as a
pre-filter and recheck, the recency component, and conversational context making a reply findable — on the default
model (use-multilingual) and the real stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.context import RequestContext
from context_engine.schema.query import SearchMemoryRequest
from context_engine.settings import load_settings

pytestmark = pytest.mark.slow

ANN = RequestContext(account_id="default", role="user", user_space="ann", agent_space="helper")
OTHER = RequestContext(account_id="default", role="user", user_space="other", agent_space="other")


@pytest.fixture
def make(tmp_path, default_embedder):
    from context_engine.service import ContextEngineService

    opened = []

    def build(**overrides):
        settings = load_settings(tmp_path / f"h{len(opened)}", embedding={"backend": "use-multilingual"}, **overrides)
        engine = ContextEngineService(settings, embedder=default_embedder)
        opened.append(engine)
        return engine

    yield build
    for e in opened:
        e.close()


TRIP = [
    {
        "speaker": "Ann",
        "content": "We are planning a hiking trip to the Alps in July.",
        "timestamp": "2023-03-01T10:00:00Z",
    },
    {"speaker": "Sam", "content": "Which village will you stay in?", "timestamp": "2023-03-01T10:01:00Z"},
    {"speaker": "Ann", "content": "Probably Zermatt, near the Matterhorn.", "timestamp": "2023-03-01T10:02:00Z"},
]
COOKING = [
    {
        "speaker": "Ann",
        "content": "I baked sourdough bread with rye flour yesterday.",
        "timestamp": "2023-06-10T18:00:00Z",
        "metadata": {"topic": "food"},
    },
    {
        "speaker": "Sam",
        "content": "Did the hiking boots you ordered arrive?",
        "timestamp": "2023-06-10T18:05:00Z",
        "metadata": {"topic": "gear"},
    },
]


def _uris(response):
    return [h.uri for h in response.hits]


def _ranked(engine, query, top_k=3):
    """The URIs search_memory returns for ``query`` (``top_k``) and its trace's ``ranked`` event (what the ordering
    rules moved)."""
    response = engine.search_memory(query, ANN, top_k=top_k, include_debug=True, trace_level="detailed")
    return _uris(response), [e for e in response.thinking_trace["events"] if e["event"] == "ranked"][0]


def test_a_reply_is_found_through_the_turn_it_answers(make):
    engine = make()
    uris = engine.add_messages(TRIP, "trip", ANN).uris
    hits = _uris(engine.search_memory("Which village near the Matterhorn will Ann stay in?", ANN, top_k=3))
    assert hits[0] in (uris[2], uris[1]) and uris[2] in hits


def test_session_metadata_and_time_filters_select_exactly(make):
    engine = make()
    trip = engine.add_messages(TRIP, "trip", ANN).uris
    cooking = engine.add_messages(COOKING, "cooking", ANN).uris
    engine.add_memories([{"text": "Ann hikes every weekend in the Black Forest"}], ANN)

    in_session = _uris(engine.search_memory(SearchMemoryRequest(query="hiking", conversation_id="cooking"), ANN))
    assert set(in_session) == set(cooking)  # the other session and the general memory are filtered out
    by_topic = _uris(engine.search_memory(SearchMemoryRequest(query="hiking", metadata_filter={"topic": "gear"}), ANN))
    assert by_topic == [cooking[1]]
    either = engine.search_memory(SearchMemoryRequest(query="what", metadata_filter={"topic": ["gear", "food"]}), ANN)
    assert set(_uris(either)) == set(cooking)
    march = SearchMemoryRequest(
        query="hiking trip", time_range={"start": "2023-03-01T00:00:00Z", "end": "2023-04-01T00:00:00Z"}
    )
    assert set(_uris(engine.search_memory(march, ANN))) == set(trip)
    # a memory without occurred_at is placed at its created_at (now): outside March 2023, inside a window around now
    now = datetime.now(UTC)
    recent = SearchMemoryRequest(
        query="hiking", time_range={"start": now - timedelta(hours=1), "end": now + timedelta(hours=1)}
    )
    assert [u.rsplit("/", 2)[-2] for u in _uris(engine.search_memory(recent, ANN))] == ["general"]
    # filters never widen tenancy: another user of the account sees none of Ann's memories
    assert _uris(engine.search_memory(SearchMemoryRequest(query="hiking", conversation_id="trip"), OTHER)) == []


@pytest.mark.parametrize(
    "fields",
    [
        {"time_range": {"start": "2023-05-01T00:00:00Z", "end": "2023-04-01T00:00:00Z"}},
        {"metadata_filter": {"topic": {"nested": 1}}},
        {"metadata_filter": {"topic": []}},
        {"conversation_id": "a/b"},
        {"conversation_id": ".."},
    ],
)
def test_malformed_memory_filters_are_ret_4001(make, fields):
    engine = make()
    with pytest.raises(ContextEngineError) as info:
        engine.search_memory(SearchMemoryRequest(query="hiking", **fields), ANN)
    assert info.value.code is ErrorCode.QUERY_INVALID
    assert info.value.details["field"] in fields


def test_recency_favours_the_newer_memory_only_when_switched_on(make):
    old, new = "2020-01-01T00:00:00Z", datetime.now(UTC).isoformat()
    items = [
        {"text": "Ann's favourite colour is blue", "occurred_at": old},
        {"text": "Ann's favourite colour is green", "occurred_at": new},
    ]
    query = "What is Ann's favourite colour?"
    off = make()
    off.add_memories(items, ANN)
    res_off = {h.abstract: h.score for h in off.search_memory(query, ANN, top_k=2).hits}
    on = make(memory={"recency_half_life_days": 30, "recency_weight": 0.5})
    on.add_memories(items, ANN)
    hits_on = on.search_memory(query, ANN, top_k=2).hits
    res_on = {h.abstract: h.score for h in hits_on}
    blue, green = items[0]["text"], items[1]["text"]
    assert set(res_off) == set(res_on) == {blue, green}
    assert hits_on[0].abstract == green
    # recency of the 2020 memory is ~0, of today's ~1: at weight 0.5 the old one loses about half its score, the new
    # one gains up to half of what it lacked (the intent boost, if any, is added after both)
    assert res_on[blue] < 0.65 * res_off[blue]
    assert res_on[green] > res_off[green]


def test_recency_component_is_a_half_life_decay():
    from context_engine.retrieval.scoring import Scorer
    from context_engine.settings import ScoringSettings

    now = datetime(2024, 1, 31, tzinfo=UTC)
    scorer = Scorer(ScoringSettings(), recency_half_life_days=10, recency_weight=0.2, clock=lambda: now)
    assert scorer.recency(datetime(2024, 1, 21, tzinfo=UTC), now) == 0.5
    assert scorer.recency(datetime(2024, 1, 11, tzinfo=UTC), now) == 0.25
    assert scorer.recency(now + timedelta(days=3), now) == 1.0  # the future counts as now
    assert scorer.recency(None, now) == 0.0
    assert Scorer(ScoringSettings()).recency(datetime(2024, 1, 21, tzinfo=UTC), now) == 0.0  # off by default


def test_an_admin_without_a_user_space_filters_every_users_memories(make):
    engine = make()
    bob = RequestContext(account_id="default", role="user", user_space="bob", agent_space="b")
    ann_uri = engine.add_messages(TRIP[:1], "trip", ANN).uris[0]
    bob_uri = engine.add_messages(
        [{"speaker": "Bob", "content": "I am hiking in Norway next week."}], "trip", bob
    ).uris[0]
    admin = RequestContext(account_id="default", role="admin")
    got = _uris(engine.search_memory(SearchMemoryRequest(query="hiking", conversation_id="trip"), admin))
    assert set(got) == {ann_uri, bob_uri}
    only_ann = _uris(
        engine.search_memory(SearchMemoryRequest(query="hiking", metadata_filter={"speaker": "Ann"}), admin)
    )
    assert only_ann == [ann_uri]


# An agent's conversation (issue 25): each user turn followed by the assistant's reply, questions in the third person.
AGENT_SESSION = [
    {"role": "user", "speaker": "Sam", "content": "I just started a new job at Northwind as a data engineer."},
    {"role": "assistant", "content": "Got it, thanks for sharing."},
    {"role": "user", "speaker": "Sam", "content": "I switched to rooibos because coffee was wrecking my sleep."},
    {"role": "assistant", "content": "Rooibos is a nice caffeine-free alternative to coffee."},
    {"role": "user", "speaker": "Sam", "content": "My daughter Ana starts school in Porto next September."},
    {"role": "assistant", "content": "Noted!"},
    {"role": "user", "speaker": "Sam", "content": "I ride my bike to the office on Tuesdays and Thursdays."},
    {"role": "assistant", "content": "Good to know!"},
]


@pytest.mark.parametrize(
    ("question", "turn"),
    [
        ("What company does Sam work for?", 0),
        ("What does Sam drink instead of coffee?", 2),
        ("Where will Sam's daughter go to school?", 4),
        ("How does Sam get to the office?", 6),
    ],
)
def test_the_users_turn_not_the_assistants_acknowledgement_comes_first(make, question, turn):
    engine = make()
    uris = engine.add_messages(AGENT_SESSION, "s1", ANN).uris
    hits = _uris(engine.search_memory(question, ANN, top_k=5))
    assert hits[0] == uris[turn]
    acks = [uris[i] for i in (1, 5, 7)]
    assert all(hits.index(a) > hits.index(uris[turn]) for a in acks if a in hits)


def _said(engine, *turns: tuple[str, str]) -> list[str]:
    """``(speaker, content)`` turns added as one conversation ``d1`` of ANN; their URIs in order."""
    return engine.add_messages([{"speaker": sp, "content": c} for sp, c in turns], "d1", ANN).uris


def test_a_question_naming_a_speaker_prefers_that_speakers_turns(make):
    engine = make()
    uris = _said(
        engine,
        ("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
        ("Melanie", "Wow, the support group sounds powerful! I went to a pottery class."),
    )
    hits = _uris(engine.search_memory("When did Caroline go to the support group?", ANN, top_k=2))
    assert hits[0] == uris[0]


def test_a_question_about_the_present_prefers_the_latest_statement(make):
    engine = make()
    old = engine.add_messages(
        [
            {
                "role": "user",
                "speaker": "Sam",
                "content": "I live in Leeds with two friends.",
                "timestamp": "2024-03-01",
            },
            {"role": "assistant", "content": "Noted!", "timestamp": "2024-03-01"},
        ],
        "s1",
        ANN,
    ).uris[0]
    new = engine.add_messages(
        [
            {"role": "user", "speaker": "Sam", "content": "We moved to Lisbon last week.", "timestamp": "2024-04-10"},
            {"role": "assistant", "content": "Got it!", "timestamp": "2024-04-10"},
        ],
        "s2",
        ANN,
    ).uris[0]
    assert _uris(engine.search_memory("Where does Sam live now?", ANN, top_k=3))[:2] == [new, old]
    # without a word about the present, the statement that shares the question's words comes first
    assert _uris(engine.search_memory("Where does Sam live?", ANN, top_k=3))[0] == old


GREETINGS_AND_A_JOB = [
    {"role": "user", "speaker": "Sam", "content": "Hello, me again."},
    {"role": "assistant", "content": "Welcome back!"},
    {"role": "user", "speaker": "Sam", "content": "I just started at Northwind as a data engineer."},
    {"role": "assistant", "content": "Congratulations! How are you finding the team?"},
    {"role": "user", "speaker": "Sam", "content": "Pretty good, everyone's been friendly."},
    {"role": "assistant", "content": "Got it, thanks for sharing."},
    {"role": "user", "speaker": "Sam", "content": "Hi again!"},
    {"role": "assistant", "content": "Hi! What can I help with today?"},
    {"role": "user", "speaker": "Sam", "content": "Our cat is mostly hiding under the sofa."},
    {"role": "assistant", "content": "Noted!"},
]


@pytest.mark.parametrize("speaker_names", [True, False])
def test_a_speakers_name_in_the_question_does_not_favour_the_speakers_shortest_turns(make, speaker_names):
    engine = make(retrieval={"query_transform": {"speaker_names": speaker_names}})
    uris = engine.add_messages(GREETINGS_AND_A_JOB, "s1", ANN).uris
    response = engine.search_memory("Where is Sam employed?", ANN, top_k=5, include_debug=True, trace_level="detailed")
    hits = _uris(response)
    events = [e for e in response.thinking_trace["events"] if e["event"] == "query_transform"]
    if speaker_names:
        assert hits[0] == uris[2]
        assert events and events[0]["transform"] == "speaker_names" and events[0]["text"] == "Where is employed?"
    else:
        # the name matched as a word: Sam's shortest turns ("Sam: Hi again!") come before the fact
        assert hits[0] != uris[2]
        assert not events


# A conversation stored without names (OpenAI-style messages): every user turn reads "user: ...".
ROLE_ONLY = [
    {"role": "user", "content": "Hi again"},
    {"role": "assistant", "content": "Hi! How has your week been?"},
    {"role": "user", "content": "Pretty good, thanks."},
    {"role": "assistant", "content": "Do you work in a hospital or a community pharmacy?"},
    {"role": "user", "content": "Community pharmacy, a small independent one in Leith."},
    {"role": "assistant", "content": "That's a lot of responsibility."},
    {"role": "user", "content": "Hello! Got a baking question."},
    {"role": "assistant", "content": "Sure, what are you baking?"},
    {"role": "user", "content": "Hey! Holiday planning time."},
    {"role": "assistant", "content": "Lovely, where are you thinking of going?"},
]


@pytest.mark.parametrize("speaker_names", [True, False])
def test_the_user_in_the_question_does_not_favour_the_users_shortest_turns(make, speaker_names):
    engine = make(retrieval={"query_transform": {"speaker_names": speaker_names}})
    uris = engine.add_messages(ROLE_ONLY, "s1", ANN).uris
    response = engine.search_memory(
        "Where does the user work?", ANN, top_k=10, include_debug=True, trace_level="detailed"
    )
    rank = {u: i for i, u in enumerate(_uris(response))}
    job, greetings = uris[4], [uris[0], uris[6], uris[8]]
    events = [e for e in response.thinking_trace["events"] if e["event"] == "query_transform"]
    if speaker_names:
        # searched again with "the user" in the first person the user's turns are written in
        assert events and events[0]["text"] == "Where does I work?" and events[0]["speakers"] == ["user"]
        assert all(rank[job] < rank[g] for g in greetings)
    else:
        # "user" matched as a word in the "user: " prefix: "user: Hi again" comes before the answer
        assert not events
        assert rank[uris[0]] < rank[job]


def test_a_hit_says_when_its_message_was_written(make):
    # "last Monday" is resolved against the message's time: the hit carries it, in UTC, as read_memory's block does
    engine = make()
    messages = [
        {"role": "user", "content": "I started at Northwind last Monday.", "timestamp": "2024-10-14T18:00:00+02:00"},
        {"role": "assistant", "content": "Congratulations!"},  # no timestamp: no time
    ]
    uris = engine.add_messages(messages, "s1", ANN).uris
    note = engine.add_memory("The user prefers tea over coffee.", ANN).uris[0]
    hits = {h.uri: h for h in engine.search_memory("When did the user start at Northwind?", ANN, top_k=10).hits}
    assert hits[uris[0]].occurred_at == datetime(2024, 10, 14, 16, 0, tzinfo=UTC)
    assert hits[uris[1]].occurred_at is None and hits[note].occurred_at is None
    assert all(h.occurred_at is None for u, h in hits.items() if u.endswith("/"))  # directories
    assert engine.read_memory(uris[0], ANN, level="L2").block.occurred_at == hits[uris[0]].occurred_at


def _agent_conversation(engine, conv_id: str, dataset: str = "agent_dev") -> dict[str, str]:
    """One conversation of eval/conversations/<dataset> (written by us) added session by session; URI -> turn id."""
    import json

    from tests.conftest import REPO

    sessions: dict[str, list[dict]] = {}
    path = REPO / "eval" / "conversations" / dataset / "turns.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        turn = json.loads(line)
        if turn["conv_id"] == conv_id:
            sessions.setdefault(turn["session"], []).append(turn)
    ids: dict[str, str] = {}
    for session, turns in sessions.items():
        when = datetime.strptime(turns[0]["session_date_time"], "%I:%M %p on %d %B, %Y").isoformat()
        messages = [
            {"role": t["role"], "content": t["text"], "timestamp": when}
            | ({"speaker": t["speaker"]} if t["speaker"] else {})
            for t in turns
        ]
        report = engine.add_messages(messages, session, ANN)
        ids.update({u: t["dia_id"] for u, t in zip(report.uris, turns, strict=True)})
    return ids


@pytest.mark.parametrize("speaker_names", [True, False])
def test_a_chinese_speakers_name_is_resolved_like_an_english_one(make, speaker_names):
    # Chinese has no spaces between words: "林晓从事哪方面的职业？" names the speaker 林晓 (issue 25). With the name
    # out of the second search, the job turns come first; with it in, the speaker's shortest turns ("林晓: 哈喽～").
    engine = make(retrieval={"query_transform": {"speaker_names": speaker_names}})
    ids = _agent_conversation(engine, "agent-zh-01", "agent_dev_zh")
    response = engine.search_memory("林晓从事哪方面的职业？", ANN, top_k=5, include_debug=True, trace_level="detailed")
    first = [ids[u] for u in _uris(response)]
    named = [e for e in response.thinking_trace["events"] if e["event"] == "messages"]
    assert named and named[0]["named"] == ["林晓"]  # the speaker boost applies either way
    events = [e for e in response.thinking_trace["events"] if e["event"] == "query_transform"]
    # D1:3 "我上周刚入职星河科技，做前端开发，..."; D4:9 "还有，我上周升职成高级前端工程师了！"
    if speaker_names:
        assert set(first[:2]) == {"D1:3", "D4:9"}
        assert events and events[0]["text"] == "从事哪方面的职业?"
    else:
        assert first[0] not in {"D1:3", "D4:9"}  # a greeting ("D1:1" 又来打扰啦！, "D4:1") comes first
        assert not events


def test_a_chinese_question_naming_what_the_store_never_mentions_is_no_match(make):
    # jieba's dictionary finds the names of a Chinese question (no capitals to tell them by): a place the
    # conversation never mentions gets the missing-name penalty, a speaker it holds does not
    engine = make()
    _agent_conversation(engine, "agent-zh-01", "agent_dev_zh")
    assert engine.search_memory("日本的首都是哪里？", ANN, top_k=10).match_quality == "none"
    assert engine.search_memory("林晓的猫叫什么名字？", ANN, top_k=10).match_quality != "none"


@pytest.mark.parametrize("boost", [0.08, 0.0])
def test_a_who_question_prefers_the_memory_that_holds_a_name(make, boost):
    engine = make(retrieval={"scoring": {"answer_type_boost": boost}})
    ids = _agent_conversation(engine, "agent-09")
    response = engine.search_memory("Who is Kofi's vet?", ANN, top_k=3, include_debug=True, trace_level="detailed")
    first = [ids[u] for u in _uris(response)]
    # D1:7 "His vet is Dr Okafor at Riverside Vets."; D3:1 "Switched Kofi to two meals a day, the vet said it's time."
    if boost:
        assert first[:2] == ["D1:7", "D3:1"]
        ranked = [e for e in response.thinking_trace["events"] if e["event"] == "ranked"][0]
        assert ranked["answer_type"] == "name"
    else:
        assert first[:2] == ["D3:1", "D1:7"]


@pytest.mark.parametrize("margin", [0.05, 0.0])
def test_a_question_about_the_present_puts_the_later_statement_on_the_same_topic_first(make, margin):
    engine = make(retrieval={"scoring": {"current_state_margin": margin}})
    ids = _agent_conversation(engine, "agent-14")
    response = engine.search_memory(
        "Which day does the user volunteer now?", ANN, top_k=5, include_debug=True, trace_level="detailed"
    )
    first = [ids[u] for u in _uris(response)]
    # D2:5 "I volunteer at the Oxfam bookshop on Friday mornings." (June); D4:3 "I've moved my Oxfam shift to
    # Tuesdays." (December): the same topic, the later one is the answer
    ranked = [e for e in response.thinking_trace["events"] if e["event"] == "ranked"][0]
    if margin:
        assert first[:2] == ["D4:3", "D2:5"]
        assert ranked["superseded"] >= 1
    else:
        assert first[:2] == ["D2:5", "D4:3"]
        assert ranked["superseded"] == 0


@pytest.mark.parametrize("margin", [0.05, 0.0])
def test_statements_holding_what_the_question_asks_about_are_one_topic(make, margin):
    # D2:7 "I've still got £2,300 on a credit card at 22.9% APR." (February); D3:3 "Paid the credit card off
    # completely last Friday!" (May): cosine 0.45, below current_state_same_topic, but both hold the question's
    # "credit card": the later one is the answer. current_state_boost 0: the rule alone orders them (with the boost
    # the later one comes first in this store either way)
    engine = make(retrieval={"scoring": {"current_state_margin": margin, "current_state_boost": 0.0}})
    ids = _agent_conversation(engine, "agent-08")
    uris, ranked = _ranked(engine, "Does the user still have credit card debt?", top_k=10)
    first = [ids[u] for u in uris]
    if margin:
        assert first[:2] == ["D3:3", "D2:7"]
        assert ranked["superseded"] >= 1
    else:
        assert first[:2] == ["D2:7", "D3:3"]


@pytest.mark.parametrize("boost", [0.08, 0.0])
def test_a_which_day_question_prefers_the_memory_that_names_a_day(make, boost):
    # "On which day ..." opens with the preposition its answer takes; a day is a weekday or a date, not any
    # number or time word (the assistant's "book club evening")
    engine = make(retrieval={"scoring": {"answer_type_boost": boost}})
    ids = _agent_conversation(engine, "agent-04")
    uris, ranked = _ranked(engine, "On which day does the book club meet now?", top_k=10)
    first = [ids[u] for u in uris]
    # D4:5 "And we meet on the last Tuesday of the month now instead."
    if boost:
        assert first[0] == "D4:5"
        assert ranked["answer_type"] == "day"
    else:
        assert first[0] != "D4:5"


def test_a_question_that_repeats_the_fact_ranks_below_the_statement(make):
    # "How lucky! Did you get a photo of the bittern at Minsmere?" repeats the fact's words but states only a
    # reaction: a question asks, the answer is in the statement it asks about (issue 25, states_content).
    engine = make()
    uris = _said(
        engine,
        ("Maggie", "Saw a bittern at Minsmere on Sunday, first time in years!"),
        ("Ruth", "How lucky! Did you get a photo of the bittern at Minsmere?"),
    )
    hits = _uris(engine.search_memory("Which bird did Maggie see at Minsmere?", ANN, top_k=2))
    assert hits == [uris[0], uris[1]]


def test_a_question_in_other_words_than_the_memory_is_ranked_by_meaning(make):
    # "What does the user cook in bulk at the weekend?" for "Sundays are meal prep day, usually a big batch of chilli
    # and roasted veg.": no turn holds half of the question's information (only incidental words match), so the dense
    # weight rises to retrieval.seed.lexical_gap_dense_weight (issue 25) and the meal-prep turn comes first; at the
    # tuned weight the other turns' shared words win.
    question = "What does the user cook in bulk at the weekend?"
    engine = make()
    ids = _agent_conversation(engine, "agent-06")
    response = engine.search_memory(question, ANN, top_k=3, include_debug=True, trace_level="detailed")
    assert ids[_uris(response)[0]] == "D2:3"
    assert [e for e in response.thinking_trace["events"] if e["event"] == "lexical_gap"]
    off = make(retrieval={"seed": {"lexical_gap_share": 0.0}})
    ids = _agent_conversation(off, "agent-06")
    assert ids[_uris(off.search_memory(question, ANN, top_k=3))[0]] != "D2:3"


def test_the_lexical_gap_rule_leaves_a_document_question_alone(make):
    # The raised weight lifts the memories' fused scores, which the merge compares with documents': a request whose
    # intent is a document ("runbook") keeps the tuned weight for its memories; the same words without an intent
    # raise it.
    engine = make()
    _agent_conversation(engine, "agent-06")

    def gap_events(query):
        response = engine.search_memory(query, ANN, top_k=5, include_debug=True, trace_level="detailed")
        return [e for e in response.thinking_trace["events"] if e["event"] == "lexical_gap"]

    # once per search: the question, then its first-person form ("What does I cook ...", query_transform)
    events = gap_events("What does the user cook in bulk at the weekend?")
    assert len(events) == 2
    assert all(e["context_type"] == "memory" and e["dense_weight"] == 0.5 for e in events)
    assert gap_events("runbook for what the user cooks in bulk at the weekend") == []


CORRECTED = [
    {"role": "user", "speaker": "Tomas", "content": "My dentist appointment is on the 2nd of May at 9 am."},
    {"role": "assistant", "content": "Noted."},
    {"role": "user", "speaker": "Tomas", "content": "Our team standup is at 9:15 every morning."},
    {"role": "assistant", "content": "Thanks."},
    {"role": "user", "speaker": "Tomas", "content": "Oops, I mean the 3rd of May, same time. The 2nd was old."},
    {"role": "assistant", "content": "Dentist on 3 May at 9 am, got it."},
]


@pytest.mark.parametrize("margin", [0.15, 0.0])
def test_a_correction_comes_before_the_statement_it_corrects(make, margin):
    # The correction says only the new value ("the 3rd of May"); it is indexed with the statement it corrects and
    # ranks just above it, for a question without any word about the present (issue 25, the corrections shape).
    engine = make(retrieval={"scoring": {"correction_margin": margin}})
    said, _, _, _, fixed, _ = engine.add_messages(CORRECTED, "s1", ANN).uris
    hits, ranked = _ranked(engine, "When is Tomas's dentist appointment?")
    if margin:
        assert hits[:2] == [fixed, said]
        assert ranked["corrected"] == 1
    else:
        assert hits.index(said) < hits.index(fixed)
        assert ranked["corrected"] == 0


REQUESTED = [
    {"role": "user", "speaker": "Lena", "content": "Could you find me a physio near work? My knee is playing up."},
    {"role": "assistant", "content": "I found Riverside Physio on Carter Lane and booked you with Amira Haddad."},
    {"role": "user", "speaker": "Lena", "content": "Great, thanks."},
    {"role": "assistant", "content": "You're welcome."},
]


@pytest.mark.parametrize("margin", [0.15, 0.0])
def test_what_the_assistant_did_comes_before_the_request(make, margin):
    # The request shares the question's words and is the named user's; the assistant's report holds the answer and
    # ranks just above it (issue 25, the requests shape; retrieval/replies.py prefer_reports).
    engine = make(retrieval={"scoring": {"report_margin": margin}})
    request, report, _, _ = engine.add_messages(REQUESTED, "s1", ANN).uris
    hits, ranked = _ranked(engine, "Which physio is Lena seeing for her knee?")
    if margin:
        assert hits[:2] == [report, request] and ranked["reported"] == 1
    else:
        assert hits[:2] == [request, report] and ranked["reported"] == 0
    # a question about the asking: no lift (the report, read with the request, may still match it better)
    asked, ranked = _ranked(engine, "What did Lena ask the assistant to find?")
    assert ranked["reported"] == 0 and request in asked[:2]


ECHOED = [
    {"role": "user", "speaker": "Ann", "content": "We use Python 3.11 and FastAPI for the service."},
    {"role": "assistant", "content": "Good choice for an API."},
    {
        "role": "user",
        "speaker": "Ann",
        "content": "The worker reads its settings from /etc/orbit/worker.yaml on the box, not from env vars.",
    },
    {"role": "assistant", "content": "Noted, the worker config lives at /etc/orbit/worker.yaml."},
]


@pytest.mark.parametrize("margin", [0.15, 0.0])
def test_the_users_statement_comes_before_the_assistants_echo_of_it(make, margin):
    # The echo restates the statement in fewer words and matched the question better; the user's message is the
    # source (issue 25, role-aware ranking; retrieval/replies.py prefer_sources).
    engine = make(retrieval={"scoring": {"echo_margin": margin}})
    _, _, said, echo = engine.add_messages(ECHOED, "s1", ANN).uris
    hits, ranked = _ranked(engine, "Where is the worker's config file?")
    if margin:
        assert hits[:2] == [said, echo] and ranked["echoed"] == 1
    else:
        assert hits[:2] == [echo, said] and ranked["echoed"] == 0
