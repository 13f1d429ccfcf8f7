"""A question that names a date is answered by the memories of that date (issue 25, retrieval/dates.py): their
fused first-round score gets ``retrieval.seed.date_boost``, and the best of them join the first round. The default
model, a real home, message times as ``add_messages`` stores them."""

from __future__ import annotations

import pytest

from context_engine.schema.context import RequestContext
from context_engine.settings import load_settings

MIA = RequestContext(account_id="default", role="user", user_space="mia", agent_space="helper")
ADMIN = RequestContext(account_id="default", role="admin", agent_space="helper")

# written for this test: the same kind of outing with the user's sister on three days, each told on its day, and one
# told the day after ("yesterday")
SESSIONS = (
    ("2024-09-10T18:00:00+00:00", "I went to a pottery class with my sister tonight, we made two mugs."),
    ("2024-09-22T18:00:00+00:00", "Today I went bouldering with my sister at the climbing hall, my arms hurt."),
    ("2024-10-05T18:00:00+00:00", "My sister and I did a Thai cooking class this evening, great green curry."),
    ("2024-10-20T09:00:00+00:00", "Yesterday my sister and I ran the city half marathon together, 2 hours 5."),
    # stored as 2 November 22:30 UTC: the local date is the 3rd
    ("2024-11-03T07:30:00+09:00", "This morning my sister and I had sushi for breakfast at the Tsukiji market."),
)


@pytest.fixture(scope="module")
def homes(tmp_path_factory, default_embedder):
    from context_engine.service import ContextEngineService

    engines = {}
    for boost in (0.1, 0.0):
        settings = load_settings(tmp_path_factory.mktemp("home"), retrieval={"seed": {"date_boost": boost}})
        e = ContextEngineService(settings, embedder=default_embedder)
        for i, (when, text) in enumerate(SESSIONS):
            turns = [
                {"role": "user", "content": text, "timestamp": when},
                {"role": "assistant", "content": "Sounds like a lovely time together!", "timestamp": when},
            ]
            e.add_messages(turns, conversation_id=f"s{i}", ctx=MIA)
        engines[boost] = e
    yield engines
    for e in engines.values():
        e.close()


def _first(engine, question: str, ctx: RequestContext = MIA, **kw):
    r = engine.search_memory(question, ctx, top_k=5, include_debug=True, trace_level="detailed", **kw)
    return r.hits[0].abstract, r.thinking_trace["events"]


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("What did the user do with her sister on 10 September 2024?", "pottery class"),
        ("What did the user do with her sister on 22 September 2024?", "bouldering"),
        ("What did the user do with her sister on October 5, 2024?", "Thai cooking class"),
        ("What did the user do with her sister on Oct 5th?", "Thai cooking class"),  # no year: any year
        ("What did the user do with her sister on 19 October 2024?", "half marathon"),  # told the day after
        ("用户2024年9月22日和姐姐做了什么？", "bouldering"),
        ("What did the user do with her sister on 3 November 2024?", "Tsukiji market"),  # a local date east of UTC
    ],
)
def test_the_memory_of_the_named_date_comes_first(homes, question, answer):
    first, events = _first(homes[0.1], question)
    assert answer in first
    dated = [e for e in events if e["event"] == "dated"]
    assert dated and dated[0]["selected"] >= 2  # the user's turn and the assistant's reply of that day


def test_without_the_boost_the_date_decides_nothing(homes):
    """The same question with four dates: one first hit each with the rule, a single one without it."""
    dates = ("10 September 2024", "22 September 2024", "October 5, 2024", "19 October 2024")
    question = "What did the user do with her sister on {}?"
    with_rule = {_first(homes[0.1], question.format(d))[0] for d in dates}
    without = {_first(homes[0.0], question.format(d))[0] for d in dates}
    assert len(with_rule) == 4 and len(without) < 4
    assert not [e for e in _first(homes[0.0], question.format(dates[0]))[1] if e["event"] == "dated"]


def test_a_question_naming_no_date_or_a_date_outside_the_store_is_ranked_as_before(homes):
    for question in ("What did the user do with her sister?", "What did the user do with her sister on 1 May 2021?"):
        assert _first(homes[0.1], question)[0] == _first(homes[0.0], question)[0]
    _, events = _first(homes[0.1], "What did the user do with her sister on 1 May 2021?")
    assert [e["selected"] for e in events if e["event"] == "dated"] == [0]


def test_the_date_works_within_the_memory_filters_and_for_an_admin(homes):
    from datetime import UTC, datetime

    # a time range that excludes the named date: nothing outside it is returned, the boost changes no filter
    window = {"start": datetime(2024, 10, 1, tzinfo=UTC), "end": datetime(2024, 11, 1, tzinfo=UTC)}
    first, _ = _first(homes[0.1], "What did the user do with her sister on 22 September 2024?", time_range=window)
    assert "bouldering" not in first
    first, events = _first(homes[0.1], "What did the user do with her sister on 22 September 2024?", ADMIN)
    assert "bouldering" in first and [e for e in events if e["event"] == "dated"]


def test_no_date_is_read_where_the_boost_cannot_apply(tmp_path, default_embedder):
    """Rank fusion has no absolute scores to add the boost to: the metadata query is not run."""
    from context_engine.service import ContextEngineService

    settings = load_settings(tmp_path, keyword={"fusion": "rrf"})
    with ContextEngineService(settings, embedder=default_embedder) as e:
        when, text = SESSIONS[1]
        e.add_messages([{"role": "user", "content": text, "timestamp": when}], conversation_id="s1", ctx=MIA)
        _, events = _first(e, "What did the user do with her sister on 22 September 2024?")
    assert not [ev for ev in events if ev["event"] == "dated"]


@pytest.mark.parametrize(
    ("question", "label"),
    [
        ("What did the user talk about on 22 September 2024?", "weak"),  # the day is the whole question
        ("What happened on 2024-10-05?", "weak"),
        ("用户2024年9月22日做了什么？", "weak"),
        ("What car did the user buy on 22 September 2024?", "none"),  # a topic no memory of the day has
        ("What did the user do on 1 May 2021?", "none"),  # no memory of that day
    ],
)
def test_a_question_about_a_day_is_matched_by_a_memory_of_that_day(homes, question, label):
    r = homes[0.1].search_memory(question, MIA, top_k=5, include_debug=True, trace_level="detailed")
    assert r.match_quality == label
    events = [e for e in r.thinking_trace["events"] if e["event"] == "match_quality_dated"]
    assert bool(events) is (label == "weak")
    assert homes[0.0].search_memory(question, MIA, top_k=5).match_quality == "none"  # without the date rule
