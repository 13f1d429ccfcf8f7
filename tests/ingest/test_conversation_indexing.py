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
