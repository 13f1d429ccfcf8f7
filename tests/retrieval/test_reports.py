"""The assistant's report of what it did for a request (issue 25, the "requests" shape): recognised by its opening
words, indexed with the request it carries out (the request not with it) and ranked just above that request
(schema/conversation.py ``reports_action``, ingest/conversation.py, retrieval/replies.py ``prefer_reports``)."""

from __future__ import annotations

import pytest

from context_engine.ingest.conversation import Line, index_contexts
from context_engine.retrieval.replies import prefer_reports
from context_engine.schema.conversation import reports_action
from context_engine.schema.hits import NodeHit
from tests.retrieval.messages import message_hit, roles_of


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I've booked the 06:40 from Paddington, coach C, seat 42.", True),
        ("Booked: SAS flight SK1462 at 07:15, seat 14A.", True),
        ("Done: your HelloFresh plan is cancelled.", True),
        ("Done. I've set your reminder for 7:30 pm every Monday.", True),
        ("I found Riverside Physio and booked you with Amira Haddad.", True),
        ("I renewed all three of your library books.", True),
        # advice, questions and acknowledgements report nothing done
        ("Rooibos is a nice caffeine-free alternative to coffee.", False),
        ("Would you like me to book a table?", False),
        ("Noted!", False),
        ("I think the Jazz is a reliable car.", False),
        # an assistant that talks, not acts (a held-out probe's traps)
        ("I've found that people often wake early when stressed.", False),
        ("I set out three options below.", False),
        ("I made a rough comparison of the two mortgages.", False),
        ("Sure! I put together a one-week experiment.", False),
        ("All set. See you all in Keswick!", False),
        ("All set — PureGym membership cancelled; access ends on 31 March.", True),
        ("I chose the off-peak plan at Gymbox.", True),
        ("I set the heating to 20°C on weekdays.", True),
        # what was done as the subject of the sentence
        # a reminder's request holds the facts ("remind me that my passport expires in November")
        ("Reminder set for 1 September to renew your passport.", False),
        ("Your table for four at Olive & Ash is booked for 7:30, ref OA-5521.", True),
        ("Confirmed: the plumber comes Tuesday 8-10am.", True),
        ("Your flight has been rescheduled to 9:40.", True),
        ("The plumber has been booked for Tuesday.", True),
        ("Flights to Lisbon are booked up quickly in summer.", False),
        ("Rooms at that hotel are booked solid in August.", False),
        ("Sure! The recital is scheduled for 3pm, from what you told me.", False),
        ("Your parcel was sent yesterday by the shop, they said.", False),
        # what someone else did (a probe written to break the forms), and a name after "added"
        ("Your sister's flight has been cancelled, she's rebooked for Friday.", False),
        ("The Old Granary has been booked for the 8th by another party.", False),
        ("Your booking at Harbour Lights has been cancelled by the restaurant.", False),
        ("I've added Brigid to the workshop dinner.", True),
        ("Your table at Harbour Lights is booked for 7:45 on Saturday the 23rd, by the window.", True),
    ],
)
def test_a_report_of_an_action_is_recognised_by_its_opening_words(text, expected):
    assert reports_action(text) is expected


def _line(role: str, text: str) -> Line:
    return Line(role, "Lena" if role == "user" else role, text)


def test_the_report_is_indexed_with_the_request_and_the_request_not_with_the_report():
    batch = [
        _line("user", "Can you book me a flight to Oslo for the workshop next Thursday?"),
        _line("assistant", "Booked: SAS flight SK1462 from Heathrow at 07:15, seat 14A."),
        _line("user", "I switched to rooibos, coffee was wrecking my sleep."),
        _line("assistant", "Rooibos is a nice caffeine-free alternative to coffee."),
    ]
    contexts = index_contexts([], batch, context_messages=1, max_chars=200)
    assert contexts[1] == "Lena: Can you book me a flight to Oslo for the workshop next Thursday?"
    assert "SK1462" not in contexts[0]
    # a reply that reports nothing done still reads with the statement it answers, and borrows nothing
    assert contexts[2] == "assistant: Rooibos is a nice caffeine-free alternative to coffee." and contexts[3] == ""


def test_a_report_after_a_tool_call_reads_with_the_request_before_them():
    batch = [
        _line("user", "Find me a vegan table for three on Friday."),
        Line("assistant", "assistant", 'book_table({"party_size": 3})', tool_call=True),
        _line("tool", '{"status": "confirmed", "confirmation": "KC-88213"}'),
        _line("assistant", "Booked! Confirmation KC-88213 for three at 7pm on Friday."),
    ]
    contexts = index_contexts([], batch, context_messages=1, max_chars=200)
    assert contexts[3] == "Lena: Find me a vegan table for three on Friday."


def _hit(seq: int, score: float, abstract: str) -> NodeHit:
    return message_hit("lena", seq, score, abstract)


_roles = roles_of


def test_a_report_ranks_just_above_the_request_it_carries_out():
    request = _hit(1, 0.37, "Lena: Could you find me a physio near work? My knee is playing up again.")
    report = _hit(2, 0.29, "assistant: I found Riverside Physio on Carter Lane and booked you with Amira Haddad.")
    other = _hit(5, 0.10, "assistant: I've set a reminder for Friday.")
    assert prefer_reports("Which physio is Lena seeing?", [request, report, other], 0.15, _roles(1)) == 1
    assert report.score == pytest.approx(0.3701) and request.score == 0.37 and other.score == 0.10


def test_a_report_far_below_its_request_a_question_about_the_asking_and_a_tool_result_are_left_alone():
    request = _hit(1, 0.50, "Lena: Could you find me a physio near work?")
    report = _hit(2, 0.29, "assistant: I found Riverside Physio and booked you.")
    assert prefer_reports("Which physio is Lena seeing?", [request, report], 0.15, _roles(1)) == 0  # 0.21 below
    near = _hit(2, 0.45, "assistant: I found Riverside Physio and booked you.")
    assert prefer_reports("What did Lena ask the assistant to find?", [request, near], 0.15, _roles(1)) == 0
    assert prefer_reports("Which physio is Lena seeing?", [request, near], 0.0, _roles(1)) == 0  # switched off
    assert prefer_reports("Which physio is Lena seeing?", [request, near], 0.15, None) == 0
    # the message before the report is a tool's result, not the user's request
    tool = _hit(1, 0.50, 'book_table: {"status": "confirmed"}')
    assert prefer_reports("Which table was booked?", [tool, near], 0.15, _roles()) == 0
    assert near.score == 0.45


def test_a_request_in_several_messages_is_passed_where_it_matched_best():
    # "Can you book a table ...?" / "7:00 or 7:30?" / "7:30 by the window, please." / tool / "Your table ... is booked"
    asked = _hit(1, 0.40, "Lena: Can you book a table for four at Olive & Ash this Friday? Ideally around 7.")
    chose = _hit(3, 0.20, "Lena: 7:30 by the window, please.")
    report = _hit(5, 0.30, "assistant: Your table for four at Olive & Ash is booked for 7:30, ref OA-5521.")
    assert prefer_reports("What time is Lena's table?", [asked, chose, report], 0.15, _roles(1, 3)) == 1
    assert report.score == pytest.approx(0.4001)


def test_a_report_passes_only_the_request_messages_it_can_and_not_the_previous_requests():
    flight = _hit(1, 0.50, "Lena: Can you book me a flight to Oslo for the workshop next Thursday?")
    booked = _hit(2, 0.20, "assistant: Booked: SAS flight SK1462 from Heathrow at 07:15, seat 14A.")
    stay = _hit(3, 0.35, "Lena: Thanks! And somewhere to stay for two nights.")
    hotel = _hit(4, 0.30, "assistant: I've reserved two nights at the Hotel Bondeheimen, reference BH-5520.")
    # the flight request is the previous report's; the hotel report passes the request it can pass
    assert prefer_reports("Where is Lena staying in Oslo?", [flight, booked, stay, hotel], 0.15, _roles(1, 3)) == 1
    assert hotel.score == pytest.approx(0.3501) and booked.score == 0.20
    # without the flight report among the candidates, the flight request is still too far above the hotel report
    hotel.score = 0.30
    assert prefer_reports("Where is Lena staying in Oslo?", [flight, stay, hotel], 0.15, _roles(1, 3)) == 1
    assert hotel.score == pytest.approx(0.3501)


def test_a_report_is_not_lifted_above_a_request_that_says_more_of_what_is_asked():
    asked = _hit(1, 0.40, "Lena: Book a table at Harbour Lights for Leyla's birthday, she loves seafood.")
    report = _hit(2, 0.30, "assistant: Your table at Harbour Lights is booked for 7:45, ref HL-3307.")
    assert prefer_reports("What food does Leyla love?", [asked, report], 0.15, _roles(1)) == 0
    assert report.score == 0.30
    # the report holds what the question asks for: a time for "what time"
    assert prefer_reports("What time is the Harbour Lights table?", [asked, report], 0.15, _roles(1)) == 1
