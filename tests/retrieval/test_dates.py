"""Calendar dates a question names (retrieval/dates.py, issue 25)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from context_engine.retrieval.dates import REPORTED_WITHIN_DAYS, DateAnchor, asks_only_the_date, date_anchors


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What painting did Melanie show on October 13, 2023?", [("October 13, 2023", 10, 13, 2023, None)]),
        ("What did Gina find on 1 February, 2023?", [("1 February, 2023", 2, 1, 2023, None)]),
        ("What did the user do on 22 September 2024?", [("22 September 2024", 9, 22, 2024, None)]),
        ("What did Mel paint in July 2023?", [("July 2023", 7, None, 2023, None)]),
        ("What did the user do in mid-October 2024?", [("mid-October 2024", 10, None, 2024, "mid")]),
        ("When did Melanie go camping in June?", [("in June", 6, None, None, None)]),  # a month alone after "in"
        ("What did the user do during early May?", [("during early May", 5, None, None, "early")]),
        ("What happened in late Dec 2022?", [("late Dec 2022", 12, None, 2022, "late")]),
        ("What did Tim's teammates give him on Aug 15th?", [("Aug 15th", 8, 15, None, None)]),
        ("Where was I on the 3rd of March?", [("3rd of March", 3, 3, None, None)]),
        ("Apr. 5, 2024 and 2023-10-13", [("Apr. 5, 2024", 4, 5, 2024, None), ("2023-10-13", 10, 13, 2023, None)]),
        ("用户2024年9月22日做了什么？", [("2024年9月22日", 9, 22, 2024, None)]),
        ("他9月22日去了哪里？", [("9月22日", 9, 22, None, None)]),
        ("2023年7月发生了什么？", [("2023年7月", 7, None, 2023, None)]),
        ("what did i do on oct 13", [("oct 13", 10, 13, None, None)]),  # no capitals anywhere: lower case is read
        # no date: a modal verb, a month without day or year, lower-case month words in a cased query, relative days
        ("What may Caroline do next?", []),
        ("Did the user confide in Jan?", []),  # a month alone only by its full name
        ("What did the user plant in May's garden?", []),
        ("I have 3 march tickets", []),
        ("What did the user do last week?", []),
        ("How many of the 12 jobs ran at 10:30?", []),
        ("Which build 2023-13-01 failed?", []),  # no month 13: a build number
        ("What is ticket 2023-00-12 about?", []),
        ("What happened at 2024-09-21T23:30:00Z?", [("2024-09-21", 9, 21, 2024, None)]),  # an ISO time
    ],
)
def test_the_dates_a_question_names(query, expected):
    assert [(a.text, a.month, a.day, a.year, a.part) for a in date_anchors(query)] == expected


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def _local(first: datetime, after: datetime) -> tuple[datetime, datetime]:
    """The UTC window of local days ``[first, after)`` in any time zone (UTC+14 to UTC-12)."""
    return first - timedelta(hours=14), after + timedelta(hours=12)


def test_a_day_holds_the_days_it_is_told_in_and_a_month_its_days():
    assert REPORTED_WITHIN_DAYS == 1
    assert DateAnchor("22 September 2024", 9, 22, 2024).windows() == [_local(_utc(2024, 9, 22), _utc(2024, 9, 24))]
    assert DateAnchor("July 2023", 7, None, 2023).windows() == [_local(_utc(2023, 7, 1), _utc(2023, 8, 1))]
    assert DateAnchor("Dec 31, 2023", 12, 31, 2023).windows() == [_local(_utc(2023, 12, 31), _utc(2024, 1, 2))]
    early, mid, late = (DateAnchor("x", 2, None, 2024, part).windows() for part in ("early", "mid", "late"))
    assert early == [_local(_utc(2024, 2, 1), _utc(2024, 2, 11))]
    assert mid == [_local(_utc(2024, 2, 10), _utc(2024, 2, 22))]
    assert late == [_local(_utc(2024, 2, 20), _utc(2024, 3, 1))]  # to the month's end (29 days in 2024)


def test_a_date_without_a_year_is_every_year_asked_for():
    assert DateAnchor("Aug 15th", 8, 15).windows([2023, 2022, 2023]) == [
        _local(_utc(2022, 8, 15), _utc(2022, 8, 17)),
        _local(_utc(2023, 8, 15), _utc(2023, 8, 17)),
    ]
    assert DateAnchor("29 February", 2, 29).windows([2023, 2024]) == [_local(_utc(2024, 2, 29), _utc(2024, 3, 2))]
    assert DateAnchor("31 April", 4, 31).windows([2023]) == []  # no such day
    assert DateAnchor("Aug 15th", 8, 15).windows() == []  # no year given and none asked for


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did I talk about on September 22?", True),
        ("What did the user do on 22 September 2024?", True),
        ("What did Caroline do on 8 May 2023?", True),  # a speaker's name is no topic
        ("What did the user and the assistant discuss on 3 March 2024?", True),
        ("What did we discuss in our conversation on 3 March 2024?", True),
        ("What happened on 2024-09-22?", True),
        ("用户2024年9月22日做了什么？", True),
        ("9月22日我们讨论了什么？", True),
        ("What car did the user buy on 22 September 2024?", False),  # a topic besides the day
        ("What did the user do with Bob on 22 September 2024?", False),  # a name no speaker has
        ("What did the user do in Paris on 22 September 2024?", False),
        ("What did the user enjoy on 22 September 2024?", False),  # a phatic word is content in a question
        ("What did Mel and her kids paint in July 2023?", False),
        ("用户2024年9月22日买了什么车？", False),
        ("What did the user do?", False),  # no date
    ],
)
def test_a_question_that_asks_only_about_a_day(query, expected):
    assert asks_only_the_date(query, {"Caroline", "Melanie", "user", "assistant"}) is expected
