"""The match_quality rule (retrieval/match_quality.py): names in a query, the speaker-neutral query and the topic
similarity, the evidence, the three labels and their thresholds; through the pipeline, the label is in every answer
and never removes a hit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_engine.retrieval.match_quality import (
    MatchQualityRater,
    answer_hits,
    descriptor_names,
    mentions,
    query_names,
    speaker_neutral,
)
from context_engine.retrieval.query_vectors import TextVectors
from context_engine.schema.context import RequestContext
from context_engine.schema.hits import NodeHit
from context_engine.schema.similarity import SimilarityScale
from context_engine.settings import MatchQualitySettings
from tests.retrieval.conftest import ALICE, seed_small_store

RATER = MatchQualityRater(MatchQualitySettings())


def hit(uri: str, similarity: float, vector: float | None = None, abstract: str = "", **kw) -> NodeHit:
    base = {"owner_space": "user:alice", "context_type": "memory", "is_dir": uri.endswith("/")}
    base.update(kw)
    return NodeHit(
        uri=uri,
        similarity=similarity,
        vector_score=similarity if vector is None else vector,
        abstract=abstract,
        **base,
    )


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("What is Nate's favorite genre of movies?", ["nate"]),
        ("When did Caroline go to the LGBTQ support group?", ["caroline", "lgbtq"]),
        ("What is the capital of France?", ["france"]),
        ("Nate's favourite genre?", []),  # the first word of a sentence is not taken for a name
        ("What did John attend in March 2023? And on Monday?", ["john"]),  # months, weekdays, sentence starts
        ("What does the user drink instead of coffee?", []),
        # Chinese: proper nouns of jieba's dictionary, Latin words; terms of address it marks as names are not
        ("用户喜欢喝什么茶？", []),
        ("日本的首都是哪里？", ["日本"]),
        ("用户喜欢周杰伦吗？", ["周杰伦"]),
        ("林晓在杭州住哪个小区？", ["杭州"]),  # a name the dictionary does not hold (林晓) is not found: no penalty
        ("用户的NAS是什么型号？", ["nas"]),
        ("用户的老公叫什么名字？", []),
        # words jieba's dictionary flags as names that are common words, and lower-case Latin words, are not names;
        # an English question with a Chinese word keeps the English rule for its Latin words (a review)
        ("用户学英语多久了？", []),
        ("用户住在哪个城市？", []),
        ("用户平时用什么app记账？", []),
        ("用户的P40还好用吗", ["p40"]),
        ("What does the user think of 火锅?", []),
        ("Where did Sam buy the 抹茶 powder?", ["sam"]),
        ("Is I or The or What a name?", []),  # capitalised function words are not
        ("Did Anna meet Anna's sister?", ["anna"]),
    ],
)
def test_query_names(query, names):
    assert query_names(query) == names


def test_mentions_is_a_whole_word_case_folded():
    assert mentions("Nate: I love action movies", "nate")
    assert mentions("Maria's dogs", "maria")
    assert not mentions("Natalie likes films", "nate")
    assert not mentions("", "nate")
    # Chinese writes no spaces: a CJK name anywhere; a Latin name beside CJK characters is a whole word
    assert mentions("林晓: 我上周去了杭州", "杭州")
    assert mentions("user: 我的NAS是群晖的", "nas")
    assert not mentions("user: 我的NASA纪念品", "nas")
    assert mentions("Bob, x_bob and bobby", "bob") and not mentions("x_bob and bobby", "bob")


def test_no_hits_is_none():
    assert RATER.rate("anything", []) == "none"
    features = RATER.features("What is Nate's job?", [])
    assert features.hits == 0 and features.evidence == 0.0 and features.missing_names == ("nate",)


def test_thresholds_of_the_three_labels():
    s = MatchQualitySettings()
    low = [hit("ctx://user/alice/memories/a.md", s.none_below_evidence - 0.01, 0.9)]
    mid = [hit("ctx://user/alice/memories/a.md", s.strong_min_evidence - 0.01, 0.9)]
    words_weak = [hit("ctx://user/alice/memories/a.md", 0.9, s.strong_min_vector_score - 0.01)]
    both = [hit("ctx://user/alice/memories/a.md", s.strong_min_evidence, s.strong_min_vector_score)]
    assert RATER.rate("q", low) == "none"
    assert RATER.rate("q", mid) == "weak"
    assert RATER.rate("q", words_weak) == "weak"  # close in meaning, but the first hit's own match is weak
    assert RATER.rate("q", both) == "strong"


def test_similarity_is_the_best_file_hit_and_the_first_file_hit_decides_strong():
    hits = [
        hit("ctx://user/alice/memories/a.md", 0.30, 0.45),
        hit("ctx://user/alice/memories/b.md", 0.80, 0.20),
    ]
    f = RATER.features("q", hits)
    assert f.similarity == pytest.approx(0.80) and f.first_vector_score == pytest.approx(0.45)
    assert RATER.label(f) == "strong"
    swapped = RATER.features("q", list(reversed(hits)))
    assert swapped.first_vector_score == pytest.approx(0.20) and RATER.label(swapped) == "weak"


def test_directories_are_navigation_not_answers():
    directory = hit("ctx://user/alice/memories/health/", 0.95, 0.95)
    file = hit("ctx://user/alice/memories/health/a.md", 0.10, 0.10)
    assert RATER.features("q", [directory, file]).similarity == pytest.approx(0.10)  # the file decides
    assert RATER.rate("q", [directory, file]) == "none"
    only_dirs = RATER.features("q", [directory])
    assert not only_dirs.files and RATER.label(only_dirs) == "weak"  # at most weak when only directories came back


def test_a_missing_name_lowers_the_evidence_in_proportion():
    s = MatchQualitySettings()
    tim = [hit("ctx://user/alice/memories/a.md", 0.7, 0.5, "Tim: my favourite genre is fantasy")]
    about_nate = RATER.features("What is Nate's favorite genre?", tim)
    assert about_nate.missing_names == ("nate",)
    assert about_nate.evidence == pytest.approx(0.7 - s.missing_name_penalty)
    two = RATER.features("Did Nate and Tim like fantasy?", tim)
    assert two.missing_names == ("nate",) and two.evidence == pytest.approx(0.7 - s.missing_name_penalty / 2)
    assert RATER.features("What is Tim's favorite genre?", tim).evidence == pytest.approx(0.7)


def test_a_name_mentioned_by_any_candidate_is_not_missing():
    returned = [hit("ctx://user/alice/memories/a.md", 0.6, 0.5, "my favourite genre is fantasy")]
    candidate = hit("ctx://user/alice/memories/b.md", 0.1, 0.1, "Nate: hi there")
    assert RATER.features("What is Nate's favorite genre?", returned, [candidate]).missing_names == ()


def test_the_penalty_can_be_switched_off_and_the_scale_applies():
    off = MatchQualityRater(MatchQualitySettings(missing_name_penalty=0.0))
    hits = [hit("ctx://user/alice/memories/a.md", 0.7, 0.5, "Tim: fantasy")]
    assert off.features("What is Nate's genre?", hits).evidence == pytest.approx(0.7)
    scaled = MatchQualityRater(MatchQualitySettings(), SimilarityScale(0.5, 0.9))
    assert scaled.features("q", [hit("ctx://user/alice/memories/a.md", 0.7, 0.5)]).similarity == pytest.approx(0.5)
    assert scaled.features("q", [hit("ctx://user/alice/memories/a.md", 0.2, 0.5)]).similarity == 0.0


@given(
    sims=st.lists(st.floats(-1, 1), min_size=1, max_size=8),
    vectors=st.lists(st.floats(0, 1), min_size=8, max_size=8),
    extra=st.floats(0, 1),
)
@settings(max_examples=200, derandomize=True)
def test_a_better_match_never_lowers_the_label(sims, vectors, extra):
    """Monotone: raising a hit's similarity (or adding a hit) never moves the label towards ``none``."""
    order = {"none": 0, "weak": 1, "strong": 2}
    hits = [hit(f"ctx://user/alice/memories/{i}.md", s, vectors[i]) for i, s in enumerate(sims)]
    before = RATER.rate("q", hits)
    raised = [hits[0].model_copy(update={"similarity": min(1.0, hits[0].similarity + extra)}), *hits[1:]]
    assert order[RATER.rate("q", raised)] >= order[before]
    more = [*hits, hit("ctx://user/alice/memories/extra.md", 1.0, 0.0)]
    assert order[RATER.rate("q", more)] >= order[before] or before == "strong"  # strong reads the first hit too


# ---- the speaker-neutral query and the topic similarity --------------------------------------------------------------
SESSION = "ctx://user/alice/memories/sessions/c1/"


@pytest.mark.parametrize(
    ("query", "speakers", "neutral"),
    [
        ("How old is Sam?", ["Sam", "assistant"], "How old is I?"),
        ("What is the name of Sam's cat?", ["Sam"], "What is the name of my cat?"),
        ("What is the user\u2019s blood type?", ["user", "assistant"], "What is my blood type?"),
        ("Does the user have any children?", ["user"], "Does I have any children?"),
        ("Did Caroline and Melanie meet?", ["Caroline", "Melanie"], "Did I and I meet?"),
        ("Where does Dr Okafor work?", ["Okafor", "Dr Okafor"], "Where does I work?"),  # the longer name first
        ("Where does Samantha live?", ["Sam"], None),  # whole words only
        ("What is Nate's favorite genre?", ["Tim", "John"], None),  # names no speaker
        ("What is the capital of France?", [], None),
        ("Where will Priya move next month?", ["Will", "Jo"], None),  # a capitalised query: names are capitalised
        ("What does Will do for work?", ["Will", "Jo"], "What does I do for work?"),
        ("what does will do for work", ["Will", "Jo"], "what does I do for work"),  # no capitals: any case
        ("What user name does Priya use?", ["user", "assistant"], None),  # a role is named with its article
        ("Which job does Priya's assistant have?", ["user", "assistant"], None),
        ("What is James' job?", ["James"], "What is my job?"),
        # Chinese: a name anywhere, its possessive 的, and the role's Chinese word
        ("林晓的猫叫什么名字？", ["林晓", "assistant"], "我的猫叫什么名字?"),
        ("林晓在哪家公司上班？", ["林晓"], "我在哪家公司上班?"),
        ("用户对什么过敏？", ["user", "assistant"], "我对什么过敏?"),
        ("用户名是什么？", ["user"], None),
        ("Sam的猫叫什么？", ["Sam"], "我的猫叫什么?"),  # a Latin name in a Chinese sentence
    ],
)
def test_speaker_neutral(query, speakers, neutral):
    assert speaker_neutral(query, speakers) == neutral


def test_the_neutral_query_names_only_the_speakers_of_returned_messages():
    message = hit(SESSION + "m1.md", 0.5, abstract="Sam: Hi again!")
    memory = hit("ctx://user/alice/memories/m.md", 0.5, abstract="Priya: a memory, not a message")
    directory = hit(SESSION, 0.5, abstract="Lena: a directory")
    assert RATER.neutral_query("How old is Sam?", [message, memory, directory]) == "How old is I?"
    assert RATER.neutral_query("How old is Priya?", [message, memory, directory]) is None
    assert RATER.neutral_query("How old is Lena?", [message, memory, directory]) is None
    assert RATER.neutral_query("How old is Sam?", [memory]) is None  # no message: no speaker lifts a cosine
    off = MatchQualityRater(MatchQualitySettings(speaker_neutral_similarity=False))
    assert off.neutral_query("How old is Sam?", [message]) is None


def test_the_user_without_a_name_is_put_in_the_first_person_over_messages():
    message = hit(SESSION + "m1.md", 0.5, abstract="Sam: I take the train to see my parents in Groningen.")
    memory = hit("ctx://user/alice/memories/m.md", 0.5, abstract="a memory, not a message")
    assert RATER.neutral_query("Where do his parents live?", [message]) == "Where do my parents live?"
    assert RATER.neutral_query("What is the user's job?", [message]) == "What is my job?"  # the user is named Sam
    assert RATER.neutral_query("Where does she work now?", [message]) == "Where does I work now?"
    assert RATER.neutral_query("用户的父母住在哪里？", [message]) == "我的父母住在哪里?"
    assert RATER.neutral_query("她的父母住在哪里？", [message]) == "我的父母住在哪里？"
    assert RATER.neutral_query("Where do his parents live?", [memory]) is None  # no message, no speaker label
    assert RATER.neutral_query("Where is Groningen?", [message]) is None  # no reference to the user


def test_the_topic_similarity_decides_none_on_measured_values():
    """agent_dev, calibrated cosines read back by bench/match_quality.py (use-multilingual): "How old is Sam?" is
    never answered in its conversation, yet "Sam: Hi again!" is as close as an answer (0.527) until the name is put
    in the first person (0.172); "What is the name of Sam's cat?" keeps its answer close (0.696 -> 0.534)."""
    s = MatchQualitySettings()
    greeting = hit(SESSION + "m1.md", 0.526854, 0.387462, "Sam: Hi again!")
    neutral = {greeting.uri: 0.171962}
    old = RATER.features("How old is Sam?", [greeting], neutral=neutral, neutral_query="How old is I?")
    assert old.similarity == pytest.approx(0.526854) and old.topic_similarity == pytest.approx(0.171962)
    assert old.evidence == pytest.approx(0.171962) and old.evidence < s.none_below_evidence
    assert RATER.label(old) == "none"
    assert old.neutral_query == "How old is I?" and old.as_dict()["neutral_query"] == "How old is I?"
    cat = hit(SESSION + "m2.md", 0.696034, 0.381807, "Sam: We adopted a grey tabby called Miso.")
    named = RATER.features("What is the name of Sam's cat?", [cat], neutral={cat.uri: 0.533859})
    assert named.evidence == pytest.approx(0.533859) and RATER.label(named) == "weak"  # first hit's own score < 0.4
    without = RATER.features("How old is Sam?", [greeting])  # no neutral query: the query's own cosine
    assert without.topic_similarity == without.similarity and RATER.label(without) == "weak"


def test_a_hit_without_a_neutral_cosine_keeps_its_own_and_the_scale_applies():
    a = hit(SESSION + "a.md", 0.5, abstract="Sam: a")
    b = hit(SESSION + "b.md", 0.3, abstract="Sam: b")
    f = RATER.features("q Sam", [a, b], neutral={a.uri: 0.1})  # b was not found at level 0: 0.3 counts
    assert f.topic_similarity == pytest.approx(0.3)
    scaled = MatchQualityRater(MatchQualitySettings(), SimilarityScale(0.5, 0.9))
    g = scaled.features("q Sam", [a], neutral={a.uri: 0.7})
    assert g.similarity == 0.0 and g.topic_similarity == pytest.approx(0.5)


def test_the_name_penalty_applies_to_the_topic_similarity():
    s = MatchQualitySettings()
    tim = hit(SESSION + "t.md", 0.7, 0.5, "Tim: my favourite genre is fantasy")
    f = RATER.features("What is Nate's favourite genre?", [tim], neutral={tim.uri: 0.6})
    assert not f.speaker_named  # Nate is no speaker of the returned messages: the full penalty
    assert f.missing_names == ("nate",) and f.evidence == pytest.approx(0.6 - s.missing_name_penalty)


@pytest.mark.parametrize(
    ("query", "places"),
    [
        ("Which neighbourhood of the Spanish capital is Mateo based in?", {"spanish"}),
        ("Which Japanese writing system is the user studying?", {"japanese"}),
        ("Which part of London does the user rent in?", {"london"}),
        ("When did Caroline go to the LGBTQ support group?", {"lgbtq"}),
        ("Where does the user's friend Bob rent a flat?", set()),  # after a noun: a person
        ("What did the user say about Nate's favourite genre?", set()),  # possessive
        ("What does Priya work as, according to Will?", set()),  # after a verb
        ("Did the user meet the Smiths' neighbour, or the Smiths?", set()),  # one possessive use is enough
        ("What did the user buy in Paris and give to Anna?", {"paris"}),  # "to" takes people as often as places
        ("林晓在杭州住哪个小区？", {"杭州"}),  # Chinese: the places jieba's dictionary marks (ns)
        ("用户喜欢周杰伦吗？", set()),
    ],
)
def test_descriptor_names(query, places):
    assert descriptor_names(query) == places


def test_a_query_naming_a_returned_speaker_takes_the_speaker_penalty_for_places_only():
    # Measured on agent_dev: "Which neighbourhood of the Spanish capital is Mateo based in?" is answered by
    # "Mateo: I live in Chamberí, ..."; "Spanish" is in no candidate, and the full penalty made the answer 'none'.
    full = MatchQualitySettings().missing_name_penalty
    mateo = hit(SESSION + "m.md", 0.3, 0.2, "Mateo: I live in Chamberí, by the way, so the airport is a quick ride.")
    query = "Which neighbourhood of the Spanish capital is Mateo based in?"
    f = RATER.features(query, [mateo], neutral={mateo.uri: 0.3})
    assert f.speaker_named and f.missing_names == ("spanish",) and f.place_names == ("spanish",)
    assert f.evidence == pytest.approx(0.3) and RATER.label(f) == "weak"
    # the same through a role: "the user" names the speaker "user"
    user = hit(SESSION + "u.md", 0.3, 0.2, "user: I rent a room in Hackney.")
    g = RATER.features("Which part of London does the user rent in?", [user], neutral={user.uri: 0.3})
    assert g.speaker_named and g.place_names == ("london",) and g.evidence == pytest.approx(0.3)
    # a person the store never names keeps the full penalty, the speaker named or not (a review's reproducer:
    # without the position test "the user's friend Bob" was 'strong')
    bob = RATER.features("Where does the user's friend Bob rent a flat?", [user], neutral={user.uri: 0.6})
    assert bob.speaker_named and bob.missing_names == ("bob",) and bob.place_names == ()
    assert bob.evidence == pytest.approx(0.6 - full)
    tim = hit(SESSION + "t.md", 0.7, 0.5, "Tim: my favourite genre is fantasy")
    two = RATER.features("Did Nate and Tim like fantasy?", [tim], neutral={tim.uri: 0.6})
    assert two.speaker_named and two.place_names == () and two.evidence == pytest.approx(0.6 - full / 2)
    # "will" is no reference to the speaker Will in a capitalised query: the full penalty for Priya
    will = hit(SESSION + "w.md", 0.5, 0.3, "Will: I might move flats next month.")
    moving = RATER.features("Where will Priya move next month?", [will])
    assert not moving.speaker_named and moving.evidence == pytest.approx(0.5 - full)
    # the penalty of a place beside a named speaker is a setting of its own
    half = MatchQualityRater(MatchQualitySettings(missing_name_penalty_with_speaker=0.2))
    assert half.features(query, [mateo], neutral={mateo.uri: 0.3}).evidence == pytest.approx(0.3 - 0.2 / 2)
    # a memory that is no message has no speaker: the full penalty
    note = hit("ctx://user/alice/memories/a.md", 0.3, 0.2, "Mateo lives in Chamberí")
    n = RATER.features(query, [note])
    assert not n.speaker_named and n.evidence == pytest.approx(0.3 - full / 2)


def test_a_message_that_states_nothing_is_no_evidence():
    # Measured on agent_dev: "Where does the user work?" (never answered) found "assistant: Of course, what's up?",
    # calibrated cosine 0.45 to "Where does I work?" against 0.08 for the user's own turns: 'weak' on noise.
    question_back = hit(SESSION + "a.md", 0.45, 0.1, "assistant: Of course, what's up?")
    ack = hit(SESSION + "b.md", 0.5, 0.1, "assistant: Noted!")
    turn = hit(SESSION + "u.md", 0.08, 0.05, "user: Christmas went well! The nut roast was the surprise hit.")
    hits = [question_back, turn, ack]
    assert answer_hits(hits) == [turn]
    f = RATER.features("Where does the user work?", hits)
    assert f.similarity == pytest.approx(0.08) and RATER.label(f) == "none"
    # the own-text check reads the first messages that state something
    in_band = [question_back, hit(SESSION + "v.md", 0.3, 0.2, "user: I cycle to work along the river."), ack]
    assert [h.uri for h in RATER.own_text_hits(RATER.features("q", in_band), in_band)] == [in_band[1].uri]
    # an assistant's confirmation that offers more states its answer (a review)
    booked = hit(SESSION + "c.md", 0.4, 0.2, "assistant: Done: I booked Kiln & Clover for 7pm Friday. Want a reminder?")
    assert answer_hits([booked, question_back]) == [booked]
    # a user's question about themselves states what it tells ("any ideas?" does not empty it)
    asks = hit(
        SESSION + "p.md", 0.32, 0.2, "Priya: Dev and I have our 10th wedding anniversary on 14 October, any ideas?"
    )
    assert answer_hits([asks, question_back]) == [asks]
    # only messages that state nothing: they are all there is to rate
    assert answer_hits([question_back, ack]) == [question_back, ack]
    assert RATER.features("q", [question_back, ack]).similarity == pytest.approx(0.5)
    # a memory that is no message always counts, and directories never do
    note = hit("ctx://user/alice/memories/n.md", 0.2, abstract="Noted!")
    assert answer_hits([hit(SESSION, 0.9, abstract="Directory c1"), note]) == [note]


def test_the_user_without_a_name_takes_the_speaker_penalty_for_places_only():
    # agent_dev: "Which Japanese writing system is the user studying?" over Mateo's turns ("I've been practising
    # hiragana every evening"): "Japanese" is in no candidate; the question is about the user the store holds
    mateo = hit(SESSION + "m.md", 0.4, 0.25, "Mateo: I've been practising hiragana every evening.")
    f = RATER.features("Which Japanese writing system is the user studying?", [mateo], neutral={mateo.uri: 0.4})
    assert f.speaker_named and f.place_names == ("japanese",) and f.evidence == pytest.approx(0.4)
    assert RATER.label(f) == "weak"
    # a pronoun may be anyone's: no speaker named (a review: "her husband" is Marie Curie's)
    curie = RATER.features("What did Marie Curie study in Japanese with her husband?", [mateo])
    assert not curie.speaker_named
    # a person the store never names keeps the full penalty
    bob = RATER.features("Where does the user's friend Bob live?", [mateo], neutral={mateo.uri: 0.4})
    assert bob.missing_names == ("bob",) and bob.evidence == pytest.approx(
        0.4 - MatchQualitySettings().missing_name_penalty
    )


# ---- through the pipeline (hashing embedder) -------------------------------------------------------------------------
def test_every_answer_carries_the_label_and_the_trace_shows_its_features(hash_engine):
    engine = hash_engine()
    seed_small_store(engine)
    r = engine.search_memory("Alice prefers short answers", ALICE, include_debug=True, trace_level="detailed")
    assert r.match_quality in ("strong", "weak")
    detail = r.thinking_trace["stages"]["assemble"]["match_quality"]
    assert detail["label"] == r.match_quality and detail["hits"] == len(r.hits)
    assert {"similarity", "evidence", "first_vector_score", "names", "missing_names", "files"} <= set(detail)
    off_topic = engine.search_memory("zebra quantum xylophone", ALICE)
    assert off_topic.match_quality == "none" and off_topic.hits  # labelled, never emptied
    counted = engine.metrics.registry.get_sample_value(
        "ce_retrieval_search_memory_match_quality_total", {"quality": "none"}
    )
    assert counted and counted >= 1


def test_the_label_never_removes_a_hit(hash_engine):
    """The same request answers the same hits whatever the thresholds say: the label only labels."""
    strict = hash_engine(retrieval={"match_quality": {"none_below_evidence": 1.0}})
    lenient = hash_engine(
        retrieval={
            "match_quality": {"none_below_evidence": 0.0, "strong_min_evidence": 0.0, "strong_min_vector_score": 0.0}
        }
    )
    for e in (strict, lenient):
        seed_small_store(e)
    a = strict.search_memory("Alice prefers short answers", ALICE)
    b = lenient.search_memory("Alice prefers short answers", ALICE)
    assert a.match_quality == "none" and b.match_quality == "strong"
    assert [(h.uri, h.score) for h in a.hits] == [(h.uri, h.score) for h in b.hits] and a.hits


def test_degraded_search_says_none(hash_engine, monkeypatch):
    from context_engine.errors import ContextEngineError, ErrorCode

    engine = hash_engine()
    seed_small_store(engine)

    def down(*_args, **_kwargs):
        raise ContextEngineError(ErrorCode.VECTOR_SEARCH_FAILED, "index is down", retryable=True)

    monkeypatch.setattr(engine.search_pipeline.source, "scorer", down)
    r = engine.search_memory("Alice prefers short answers", ALICE)
    assert r.retryable and r.hits == [] and r.match_quality == "none"


def _conversation(engine):
    engine.add_messages(
        [
            {"role": "user", "speaker": "Sam", "content": "Hi again!"},
            {"role": "assistant", "content": "Welcome back!"},
            {"role": "user", "speaker": "Sam", "content": "I adopted a grey tabby cat called Miso."},
            {"role": "assistant", "content": "Noted!"},
            {"role": "user", "speaker": "Sam", "content": "I work at Northwind as a data engineer."},
        ],
        "c1",
        ALICE,
    )


def test_a_query_naming_a_speaker_is_rated_on_its_speaker_neutral_form(hash_engine):
    engine = hash_engine()
    _conversation(engine)
    r = engine.search_memory("What is the name of Sam's cat?", ALICE, include_debug=True, trace_level="detailed")
    detail = r.thinking_trace["stages"]["assemble"]["match_quality"]
    assert detail["neutral_query"] == "What is the name of my cat?"
    assert 0.0 <= detail["topic_similarity"] <= 1.0 and detail["evidence"] == detail["topic_similarity"]
    off = hash_engine(retrieval={"match_quality": {"speaker_neutral_similarity": False}})
    _conversation(off)
    same = off.search_memory("What is the name of Sam's cat?", ALICE, include_debug=True, trace_level="detailed")
    plain = same.thinking_trace["stages"]["assemble"]["match_quality"]
    assert plain["neutral_query"] is None and plain["topic_similarity"] == plain["similarity"]
    assert [h.uri for h in r.hits] == [h.uri for h in same.hits]  # the label never changes the ranking


def test_a_failing_neutral_embedding_falls_back_to_the_query_cosine(hash_engine, monkeypatch):
    engine = hash_engine()
    _conversation(engine)
    embedder = engine.search_pipeline._embedder
    real = embedder.embed_query

    def fail_on_neutral(text):
        if text == "What is the name of my cat?":
            raise RuntimeError("embedder down")
        return real(text)

    monkeypatch.setattr(embedder, "embed_query", fail_on_neutral)
    r = engine.search_memory("What is the name of Sam's cat?", ALICE, include_debug=True, trace_level="detailed")
    detail = r.thinking_trace["stages"]["assemble"]["match_quality"]
    assert detail["topic_similarity"] == detail["similarity"] and r.hits and r.match_quality == detail["label"]
    events = [e for e in r.thinking_trace["events"] if e.get("event") == "match_quality_fallback"]
    assert events and events[0]["reason"] == "RuntimeError"


# ---- the own-text check ----------------------------------------------------------------------------------------------
def _messages(*sims: float) -> list[NodeHit]:
    return [hit(f"{SESSION}m{i}.md", s, abstract=f"Sam: message {i}") for i, s in enumerate(sims)]


def test_the_own_text_check_reads_the_first_file_hits_in_its_band_only():
    s = MatchQualitySettings()
    directory = hit(SESSION, 0.9, abstract="Directory c1")
    hits = [directory, *_messages(0.3, 0.25, 0.2, 0.1)]
    in_band = RATER.features("q", hits)
    assert s.none_below_evidence <= in_band.evidence < s.own_text_check_below
    assert [h.uri for h in RATER.own_text_hits(in_band, hits)] == [h.uri for h in hits[1:4]]  # no directory
    assert RATER.own_text_hits(RATER.features("q", _messages(0.45, 0.1)), hits) == []  # evidence above the band
    assert RATER.own_text_hits(RATER.features("q", _messages(0.15)), hits) == []  # already none
    memories = [hit(f"ctx://user/alice/memories/m{i}.md", 0.3, abstract=f"Sam: memory {i}") for i in range(3)]
    assert RATER.own_text_hits(RATER.features("q", memories), memories) == []  # indexed as their own texts
    mixed = [memories[0], *_messages(0.3)]
    assert len(RATER.own_text_hits(RATER.features("q", mixed), mixed)) == 2  # one message among them suffices
    assert RATER.embedded_alone(mixed) == mixed[1:]
    off = MatchQualityRater(MatchQualitySettings(own_text_hits=0))
    assert off.own_text_hits(off.features("q", hits), hits) == []


def test_the_own_text_evidence_can_only_turn_a_label_into_none():
    s = MatchQualitySettings()
    hits = _messages(0.35, 0.3)
    plain = RATER.features("q", hits)
    assert plain.own_text_similarity is None and plain.own_text_evidence is None and RATER.label(plain) == "weak"
    low = RATER.features("q", hits, own={hits[0].uri: 0.05, hits[1].uri: 0.1})
    assert low.own_text_similarity == pytest.approx(0.1) and low.own_text_evidence == pytest.approx(0.1)
    assert low.evidence == plain.evidence and RATER.label(low) == "none"
    kept = RATER.features("q", hits, own={hits[0].uri: s.none_below_own_text})
    assert RATER.label(kept) == "weak"  # at the threshold: not below it
    named = RATER.features("Did Nate say it?", hits, own={hits[0].uri: 0.3})
    assert named.own_text_evidence == pytest.approx(0.3 - s.missing_name_penalty)  # the same name penalty
    assert RATER.label(named) == "none"
    assert low.as_dict()["own_text_similarity"] == pytest.approx(0.1)


def test_the_own_text_check_decides_none_on_measured_values():
    """agent_dev, read back by bench/match_quality.py (use-multilingual): "What car does Priya drive?" is never
    answered; the first hits' level-0 vectors, indexed with the messages they answer, reach evidence 0.292, their
    own texts 0.025 ("Priya: My mum's 70th birthday is on 22 April ..."). "What is Priya's husband called?" is
    answered by the first hit ("Priya: My husband Dev works shifts at Heathrow, ...", evidence 0.260), whose own
    text keeps 0.169."""
    car = [
        hit(
            SESSION + "p1.md",
            0.291668,
            abstract="Priya: My mum's 70th birthday is on 22 April and we're planning a surprise lunch.",
        ),
        hit(SESSION + "p2.md", 0.25, abstract="Priya: Probably Saffron House, her favourite Gujarati place."),
    ]
    f = RATER.features("What car does Priya drive?", car, own={car[0].uri: 0.025363, car[1].uri: 0.0})
    assert RATER.label(RATER.features("What car does Priya drive?", car)) == "weak" and RATER.label(f) == "none"
    dev = [
        hit(
            SESSION + "d1.md",
            0.260272,
            abstract="Priya: My husband Dev works shifts at Heathrow, so I do most of the school runs.",
        )
    ]
    g = RATER.features("What is Priya's husband called?", dev, own={dev[0].uri: 0.169286})
    assert g.own_text_evidence == pytest.approx(0.169286) and RATER.label(g) == "weak"


def test_the_pipeline_embeds_the_first_messages_alone_and_falls_back_when_it_cannot(hash_engine, monkeypatch):
    # every answer in the band: the check runs whatever the hashing embedder's cosines are
    band = {"match_quality": {"none_below_evidence": 0.0, "own_text_check_below": 1.0}}
    engine = hash_engine(retrieval=band)
    _conversation(engine)
    embedder = engine.search_pipeline._embedder
    seen: list[list[str]] = []
    real = embedder.embed_documents

    def recording(texts, **kw):
        seen.append(list(texts))
        return real(texts, **kw)

    monkeypatch.setattr(embedder, "embed_documents", recording)
    r = engine.search_memory("Where does Sam work?", ALICE, include_debug=True, trace_level="detailed")
    detail = r.thinking_trace["stages"]["assemble"]["match_quality"]
    files = [h for h in r.hits if not h.uri.endswith("/")]
    assert seen == [[h.abstract for h in files[:3]]]  # one batch: the first three file hits, each alone
    assert detail["own_text_similarity"] is not None and detail["own_text_evidence"] is not None
    cached = engine.search_memory("Where does Sam work?", ALICE, include_debug=True, trace_level="detailed")
    assert len(seen) == 1  # a later request finds the texts' vectors kept (TextVectors)
    assert cached.thinking_trace["stages"]["assemble"]["match_quality"] == detail

    def down(texts, **kw):
        raise RuntimeError("embedder down")

    monkeypatch.setattr(embedder, "embed_documents", down)
    monkeypatch.setattr(engine.search_pipeline, "_text_vectors", TextVectors())  # nothing kept: the model is asked
    again = engine.search_memory("Where does Sam work?", ALICE, include_debug=True, trace_level="detailed")
    fallback = again.thinking_trace["stages"]["assemble"]["match_quality"]
    assert fallback["own_text_similarity"] is None and again.hits
    events = [e for e in again.thinking_trace["events"] if e.get("event") == "match_quality_fallback"]
    assert events and events[0]["check"] == "own_text" and events[0]["reason"] == "RuntimeError"
    assert [h.uri for h in again.hits] == [h.uri for h in r.hits]


# A conversation written for this test: the assistant's questions are the context the user's answers are indexed with.
PRIYA = RequestContext(account_id="acme", role="user", user_space="priya", agent_space="helper")
PRIYA_MESSAGES = [
    {"role": "user", "speaker": "Priya", "content": "Hi! I'm back."},
    {"role": "assistant", "content": "Welcome back! How was the first week at the new school?"},
    {"role": "user", "speaker": "Priya", "content": "Busy, but the other teachers are lovely."},
    {"role": "assistant", "content": "Which car do you take to get there?"},
    {"role": "user", "speaker": "Priya", "content": "Mostly the number 42 bus, it stops right outside."},
    {"role": "assistant", "content": "Noted!"},
    {"role": "user", "speaker": "Priya", "content": "My daughter Meera started ballet lessons on Saturdays."},
    {"role": "assistant", "content": "Lovely. What instrument does your son play?"},
    {"role": "user", "speaker": "Priya", "content": "Arjun is obsessed with dinosaurs at the moment."},
]


def test_a_question_the_messages_never_answer_is_none_by_their_own_texts(tmp_path, default_embedder):
    """The default model: "What car does Priya drive?" finds Priya's answer to "Which car do you take to get
    there?", lifted by the question it was indexed with (evidence in the own-text band), while what it says ("Mostly
    the number 42 bus") names no car; the same request with the check off is ``weak``. An answered question keeps
    its label. ("What is Priya's favourite film?" was this test's question until the assistant's questions stopped
    counting as evidence, ``match_quality.answer_hits``: it is now ``none`` by its evidence alone.)"""
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    labels = {}
    for name, own_text_hits in (("on", 3), ("off", 0)):
        settings = load_settings(tmp_path / name, retrieval={"match_quality": {"own_text_hits": own_text_hits}})
        with ContextEngineService(settings, embedder=default_embedder) as engine:
            engine.add_messages(PRIYA_MESSAGES, "c1", PRIYA)
            film = engine.search_memory("What car does Priya drive?", PRIYA, include_debug=True, trace_level="detailed")
            ballet = engine.search_memory("What does Priya's daughter do on Saturdays?", PRIYA)
            labels[name] = (film, ballet)
    film, ballet = labels["on"]
    detail = film.thinking_trace["stages"]["assemble"]["match_quality"]
    s = MatchQualitySettings()
    assert s.none_below_evidence <= detail["evidence"] < s.own_text_check_below
    assert detail["own_text_evidence"] < s.none_below_own_text and film.match_quality == "none" and film.hits
    off_film, off_ballet = labels["off"]
    assert off_film.match_quality == "weak" and [h.uri for h in off_film.hits] == [h.uri for h in film.hits]
    assert ballet.match_quality != "none" and ballet.match_quality == off_ballet.match_quality
    assert ballet.hits[0].abstract.startswith("Priya: My daughter Meera started ballet")


def test_a_memory_indexed_as_its_own_text_counts_for_the_own_text_check_at_any_rank():
    """Three weak messages first and a memory (no message: its level-0 vector is its own text's) fifth: the
    memory's cosine holds the answer up."""
    messages = _messages(0.3, 0.25, 0.22, 0.21)
    memory = hit("ctx://user/alice/memories/m.md", 0.28, abstract="Alice's favourite film is Arrival")
    hits = [*messages, memory]
    checked = RATER.own_text_hits(RATER.features("q", hits), hits)
    assert [h.uri for h in checked] == [h.uri for h in messages[:3]]
    own = {h.uri: 0.01 for h in checked}
    f = RATER.features("q", hits, own=own)
    assert f.own_text_similarity == pytest.approx(0.28) and RATER.label(f) == "weak"
    without = RATER.features("q", messages, own=own)
    assert RATER.label(without) == "none"


def test_the_own_text_check_reads_the_vector_the_search_scored_against(hash_engine, monkeypatch):
    """A query naming a speaker is searched again without the name; with no speaker-neutral query (switched off)
    the own texts are compared with the name-less query's vector, not the named one (whose speaker prefix lifts
    every message of that speaker)."""
    from context_engine.retrieval.query_transform import without_speakers

    band = {"none_below_evidence": 0.0, "own_text_check_below": 1.0, "speaker_neutral_similarity": False}
    engine = hash_engine(retrieval={"match_quality": band})
    _conversation(engine)
    pipeline = engine.search_pipeline
    seen = []
    real = pipeline._own_text_cosines

    def spy(checked, query_vector, neutral):
        seen.append(query_vector)
        return real(checked, query_vector, neutral)

    monkeypatch.setattr(pipeline, "_own_text_cosines", spy)
    query = "What is the name of Sam's cat?"
    r = engine.search_memory(query, ALICE, include_debug=True, trace_level="detailed")
    assert [e for e in r.thinking_trace["events"] if e.get("transform") == "speaker_names"]  # searched again
    nameless = without_speakers(query, {"Sam"})
    assert nameless and seen
    embedder = pipeline._embedder
    assert seen[0] == pytest.approx(embedder.embed_query(nameless))
    assert seen[0] != pytest.approx(embedder.embed_query(query))


KIM = RequestContext(account_id="default", role="user", user_space="kim")
KIM_MESSAGES = [
    {"role": "user", "speaker": "Kim", "content": "I work as a nurse at St Mary's hospital in Leeds."},
    {"role": "user", "speaker": "Kim", "content": "I have two cats, Miso and Tofu."},
    {"role": "user", "speaker": "Kim", "content": "My phone number is 07700 900123."},
]


@pytest.mark.parametrize(
    ("query", "about"),
    [
        ("What does Kim do?", True),
        ("Tell me about Kim", True),
        ("What do you know about the user?", True),
        ("What car does Kim drive?", False),
        ("What is Kim's job?", False),
    ],
)
def test_a_query_about_a_speaker_alone_is_flagged(query, about):
    """Failed before (an attack pass): nothing but the person asked is ``about_speaker``; a question about
    something of theirs is not."""
    hits = [hit("ctx://user/kim/memories/sessions/c/000001.md", 0.1, abstract="Kim: I have two cats.")]
    features = RATER.features(query, hits)
    assert features.speaker_named and features.about_speaker is about
    assert (RATER.label(features) == "weak") if about else (RATER.label(features) == "none")


def test_a_question_about_a_speaker_alone_is_weak_not_none(tmp_path, default_embedder):
    """Failed before (an attack pass, the default model): "What does Kim do?" over Kim's three messages was ``none``
    ("do not answer from the hits") though the first hit says she is a nurse: put in the first person the question
    is "What does I do?", whose cosine to anything is near 0. A question that asks only about a speaker is now
    ``weak``; one about something of theirs the messages never say stays ``none``."""
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    with ContextEngineService(load_settings(tmp_path), embedder=default_embedder) as engine:
        engine.add_messages(KIM_MESSAGES, "intro", KIM)
        labels = {q: engine.search_memory(q, KIM, top_k=3) for q in ("What does Kim do?", "Tell me about Kim")}
        car = engine.search_memory("What car does Kim drive?", KIM, top_k=3)
    assert {q: r.match_quality for q, r in labels.items()} == {"What does Kim do?": "weak", "Tell me about Kim": "weak"}
    assert labels["What does Kim do?"].hits[0].abstract.startswith("Kim: I work as a nurse")
    assert car.match_quality == "none" and car.hits
