"""Role-aware indexing of conversation messages (issue 25 item 1): which messages carry content, and what each
message of a batch is indexed with (``ingest/conversation.py``)."""

from __future__ import annotations

import pytest

from context_engine.ingest.conversation import Line, carries_content, index_contexts

NAMES = ("Caroline", "Melanie", "user", "assistant")


@pytest.mark.parametrize(
    ("text", "previous"),
    [
        ("Got it, thanks for sharing.", "I work at Northwind as a data engineer."),
        ("Noted!", "My sister's name is Ana."),
        ("Thanks for letting me know, I'll remember that.", "I am allergic to peanuts."),
        ("How long have you been there?", "I work at Northwind."),
        ("Wow, that's cool, Caroline! What happened at the support group?", "I went to a support group yesterday."),
        ("👍", "I adopted a cat."),
    ],
)
def test_acknowledgements_and_questions_back_carry_no_content(text, previous):
    assert carries_content(text, previous, NAMES) is False


@pytest.mark.parametrize(
    ("text", "previous"),
    [
        ("Rooibos is a nice caffeine-free alternative to coffee.", "I switched to rooibos."),
        ("I love hiking", "Noted!"),
        ("I bought 3 tickets for the concert.", "I bought 2 tickets for the concert."),
        ("I just started at Northwind as a data engineer.", None),
        ("Which port does the staging database listen on?", "We moved staging to a new host."),
    ],
)
def test_statements_and_new_questions_carry_content(text, previous):
    assert carries_content(text, previous, NAMES) is True


def _line(role: str, text: str, speaker: str = "") -> Line:
    return Line(role, speaker or role, text)


def test_user_turns_take_the_previous_message_and_an_informative_reply_assistant_turns_take_nothing():
    batch = [
        _line("user", "I switched to rooibos, coffee was wrecking my sleep.", "Sam"),
        _line("assistant", "Rooibos is a nice caffeine-free alternative to coffee."),
        _line("user", "I also started at Northwind last week.", "Sam"),
        _line("assistant", "Got it, thanks for sharing."),
    ]
    contexts = index_contexts([], batch, context_messages=1, max_chars=300)
    assert contexts[0] == "assistant: Rooibos is a nice caffeine-free alternative to coffee."
    assert contexts[1] == ""  # an assistant turn never borrows the user's words
    # an assistant's statement is not what the next user turn answers, nor is the user's own earlier turn
    assert contexts[2] == ""
    assert contexts[3] == ""


def test_the_reply_that_carries_content_is_found_past_the_assistants_acknowledgements():
    # an acknowledgement first, then the informative reply: the reply is still what the user's turn is found by
    batch = [
        _line("user", "I switched to rooibos, coffee was wrecking my sleep.", "Sam"),
        _line("assistant", "Noted!"),
        _line("assistant", "Rooibos is a nice caffeine-free alternative to coffee."),
        _line("user", "I also started at Northwind last week.", "Sam"),
        _line("assistant", "Got it."),
        _line("user", "It is a data engineering role.", "Sam"),
        _line("assistant", "Data engineering pays well in London."),
    ]
    contexts = index_contexts([], batch, context_messages=1, max_chars=300)
    assert contexts[0] == "assistant: Rooibos is a nice caffeine-free alternative to coffee."
    # the next user message ends the search: its reply is not the earlier turn's
    assert contexts[3] == ""
    assert contexts[5] == "assistant: Data engineering pays well in London."


def test_an_acknowledgement_between_people_is_indexed_alone_and_an_answer_keeps_its_question():
    tail = [_line("user", "I went to a support group yesterday, it was powerful.", "Caroline")]
    batch = [
        _line("user", "Wow, that's cool, Caroline! What happened at the support group?", "Melanie"),
        _line("user", "Yes.", "Caroline"),
    ]
    contexts = index_contexts(tail, batch, context_messages=1, max_chars=300)
    assert contexts == ["", "Melanie: Wow, that's cool, Caroline! What happened at the support group?"]


def test_a_short_chinese_answer_keeps_the_question_it_answers():
    # 是/的/对 are stopwords: "是的。" has no content word, yet it answers the question before it (ANSWER_WORDS);
    # a question typed without its mark ("...吗") is one too
    batch = [
        _line("assistant", "你现在是药剂师吗"),
        _line("user", "是的。", "林晓"),
        _line("assistant", "你有宠物吗？"),
        _line("user", "没有。", "林晓"),
    ]
    contexts = index_contexts([], batch, context_messages=1, max_chars=300)
    assert contexts[1].startswith("assistant: 你现在是药剂师吗")
    assert contexts[3].startswith("assistant: 你有宠物吗？")


def test_context_is_cut_and_can_be_switched_off():
    batch = [_line("user", "A" * 50, "Ann"), _line("user", "I bought two tickets for the concert.", "Bob")]
    assert index_contexts([], batch, context_messages=1, max_chars=10)[1] == "Ann: " + "A" * 10
    assert index_contexts([], batch, context_messages=0, max_chars=10) == ["", ""]
    assert index_contexts([], batch, context_messages=1, max_chars=0) == ["", ""]


def test_an_acknowledgement_is_skipped_but_the_speakers_own_earlier_turn_is_no_context():
    people = [
        _line("user", "I went to a support group yesterday, it was powerful.", "Caroline"),
        _line("assistant", "Noted, thanks!"),
        _line("user", "I went to one in Boston last year, the speakers were great.", "Melanie"),
    ]
    assert index_contexts([], people, 1, 300)[2] == "Caroline: I went to a support group yesterday, it was powerful."
    agent = [
        _line("user", "My daughter Ana starts school in Porto next September.", "Sam"),
        _line("assistant", "Noted!"),
        _line("user", "I ride my bike to the office on Tuesdays.", "Sam"),
    ]
    assert index_contexts([], agent, 1, 300)[2] == ""


SYSTEM = "You are Compass, a personal assistant. Remember the user's preferences and partner's needs."


def test_system_and_tool_messages_are_indexed_alone_and_never_a_user_messages_context():
    # a system prompt repeated mid-conversation and a tool result: indexed with the user's turn before them they
    # carried its words ("partner Wiremu") and outranked it; before a user's turn they are not what it answers
    batch = [
        _line("system", SYSTEM),
        _line("user", "My partner Wiremu is gluten-intolerant, keep that in mind.", "Aroha"),
        _line("system", SYSTEM),
        _line("tool", '{"forecast": "light snow in Queenstown on Saturday"}', "get_weather"),
        _line("user", "We are heading to Coronet Peak this weekend.", "Aroha"),
    ]
    contexts = index_contexts([], batch, context_messages=2, max_chars=300)
    assert contexts[0] == contexts[2] == contexts[3] == ""
    assert contexts[1] == "" and contexts[4] == ""  # the walk back passes them and stops at Aroha's own turn


def test_another_speakers_user_message_and_the_assistants_question_are_still_context_past_a_tool_result():
    batch = [
        _line("user", "I went to a support group yesterday, it was powerful.", "Caroline"),
        _line("tool", '{"events": ["support group, Tuesday 7pm"]}', "calendar"),
        _line("system", SYSTEM),
        _line("user", "I went to one in Boston last year, the speakers were great.", "Melanie"),
        _line("assistant", "Did you find the group on your own?"),
        Line("assistant", "assistant", 'search_groups({"city": "Boston?"})', tool_call=True),
        _line("user", "Yes, through a friend.", "Melanie"),
    ]
    contexts = index_contexts([], batch, context_messages=1, max_chars=300)
    assert contexts[3].split("\n") == [
        "Caroline: I went to a support group yesterday, it was powerful.",
        "assistant: Did you find the group on your own?",  # its reply, past nothing here
    ]
    assert contexts[6] == "assistant: Did you find the group on your own?"  # the answer is read with the question


def test_the_reply_is_found_past_a_tool_call_and_its_result_and_not_past_the_next_user_message():
    call = Line("assistant", "assistant", 'restaurant_search({"area": "Queenstown", "diet": "vegan"})', tool_call=True)
    batch = [
        _line("user", "Find me a vegan restaurant in Queenstown for Friday.", "Aroha"),
        call,
        _line("tool", '{"results": [{"name": "Kiln & Clover", "rating": 4.6}]}', "restaurant_search"),
        _line("system", SYSTEM),
        _line("assistant", "Noted!"),
        _line("assistant", "Kiln & Clover is fully vegan and rated 4.6."),
        _line("user", "I've been vegan for six years.", "Aroha"),
        call,
        _line("tool", '{"results": []}', "restaurant_search"),
        _line("user", "Also, book it for three people.", "Aroha"),
    ]
    contexts = index_contexts([], batch, context_messages=1, max_chars=300)
    assert contexts[0] == "assistant: Kiln & Clover is fully vegan and rated 4.6."
    assert contexts[1] == contexts[2] == contexts[5] == ""
    # a tool call is not the reply, and the next user message ends the search
    assert contexts[6] == ""


def test_a_message_of_a_burst_goes_on_from_the_speakers_previous_one():
    # several messages in a row, as chat apps send them: each is read with the one before it ("She", "it")
    batch = [
        _line("assistant", "How is your family?"),
        _line("user", "Quick update on my mum.", "Noor"),
        _line("user", "She had a fall at home last week and broke her hip.", "Noor"),
        _line("user", "Ok.", "Noor"),
        _line("user", "The surgeons at Ninewells replaced it on Tuesday.", "Noor"),
        _line("assistant", "I'm so sorry. Wishing her a quick recovery, and let me know if I can help."),
    ]
    contexts = index_contexts([], batch, context_messages=2, max_chars=300)
    assert contexts[1] == "assistant: How is your family?"  # the burst's first message answers the question
    assert contexts[2] == "Noor: Quick update on my mum."  # only the speaker's previous message: no further back
    assert contexts[3] == ""  # content-free: indexed alone, and passed over by the next message
    assert contexts[4].split("\n") == [
        "Noor: She had a fall at home last week and broke her hip.",
        "assistant: I'm so sorry. Wishing her a quick recovery, and let me know if I can help.",  # its reply
    ]
    # the same messages across two batches: the tail holds the start of the burst
    later = index_contexts(batch[:3], batch[3:], context_messages=2, max_chars=300)
    assert later == contexts[3:]


def test_no_burst_past_another_message_a_system_prompt_or_a_tool_result():
    for between in (
        _line("assistant", "Noted!"),  # the other party spoke, however little
        _line("user", "Nice, tell me more!", "Hana"),  # another person, who asks: the message answers that
        _line("system", SYSTEM),
        _line("tool", '{"forecast": "light snow in Queenstown on Saturday"}', "get_weather"),
    ):
        batch = [
            _line("user", "My daughter Ana starts school in Porto next September.", "Sam"),
            between,
            _line("user", "I ride my bike to the office on Tuesdays.", "Sam"),
        ]
        context = index_contexts([], batch, context_messages=2, max_chars=300)[2]
        assert "Ana" not in context, (between, context)
    # another person's message between two of Sam's, then the walk goes no further than that person's
    people = [
        _line("user", "My daughter Ana starts school in Porto next September.", "Sam"),
        _line("user", "Which school?", "Hana"),
        _line("user", "The international one by the river.", "Sam"),
    ]
    assert index_contexts([], people, context_messages=2, max_chars=300)[2] == "Hana: Which school?"


def test_a_filler_in_a_burst_borrows_nothing_and_is_passed_over():
    # "嗯嗯" passes the content check, yet says nothing of its own: read with the fact it would carry the fact's words
    # on a two-character text; the message after it goes on from the fact
    wang = [
        _line("assistant", "你最近怎么样？"),
        _line("user", "我妈妈上周摔倒了，髋骨骨折。", "小王"),
        _line("user", "嗯嗯", "小王"),
        _line("user", "医生说周二在邓迪做了置换手术。", "小王"),
    ]
    expected = ["", "assistant: 你最近怎么样？", "", "小王: 我妈妈上周摔倒了，髋骨骨折。"]
    assert index_contexts([], wang, 1, 300) == expected
    noor = [
        _line("user", "My sister Hana lives in Dundee now.", "Noor"),
        _line("assistant", "Nice!"),
        _line("user", "She moved last spring.", "Noor"),
        _line("user", "Anyway", "Noor"),
    ]
    assert index_contexts([], noor, 1, 300)[3] == ""


def test_a_log_of_one_speakers_statements_alone_has_no_bursts():
    # no other party in the session: consecutive statements are separate facts, each indexed alone as before
    sam = [
        _line("user", "I moved to Porto in May.", "Sam"),
        _line("user", "My sister lives in Lisbon.", "Sam"),
        _line("user", "I work at a bakery now.", "Sam"),
    ]
    assert index_contexts([], sam, 1, 300) == ["", "", ""]
    # the other party in the stored tail is enough to tell a burst
    assert index_contexts([_line("assistant", "Tell me about your move.")], sam, 1, 300)[1:] == [
        "Sam: I moved to Porto in May.",
        "Sam: My sister lives in Lisbon.",
    ]
