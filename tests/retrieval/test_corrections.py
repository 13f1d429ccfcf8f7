"""A message that corrects an earlier one (issue 25, the "corrections" shape): recognised by its words, indexed with
what it corrects and ranked above it for any question (schema/conversation.py, ingest/conversation.py,
retrieval/current_state.py)."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from context_engine.ingest.conversation import Line, index_contexts
from context_engine.retrieval.current_state import prefer_corrections
from context_engine.schema.conversation import corrects_earlier, message_position
from context_engine.schema.hits import NodeHit
from context_engine.storage.keyword.content_words import shares_content

S1 = "ctx://user/tomas/memories/sessions/s1/"
S2 = "ctx://user/tomas/memories/sessions/s2/"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Oops, I mean the 3rd of May, same time.", True),
        ("Sorry, I meant Thursday.", True),
        ("Correction from last time: Pavel flies in from Prague, not Brno.", True),
        ("Argh, typo. It's 07700 900 416.", True),
        ("Wait, no, they swapped us at half term. It's room 41 now.", True),
        ("Let's make that two runs a week, actually.", True),
        ("Sorry, make that 7pm.", True),
        ("I said 9:15 but I was wrong, it moved to 9:45.", True),
        ("My mistake earlier, Jana teaches physics, not maths.", True),
        ("Sorry, I should have said Mrs Okafor.", True),
        ("Just checked the logbook, it's a 2015 one, not 2016.", True),
        ("我说错了，是周四不是周二。", True),
        # emphasis, filler and contrast are no correction
        ("I actually love hiking.", False),
        ("I mean, it was fine.", False),
        ("let's make it happen!", False),
        ("I make that cake every week.", False),
        ("It's about the journey, not just winning.", False),
        ("I'm a nurse, not a doctor.", False),
        ("Update on the allergy: the tests are next week.", False),
        # the everyday phrases a held-out probe's traps used
        ("I meant to tell you, the plumber came.", False),
        ("No, I mean it, five-a-side is the only exercise I get.", False),
        ("My bad knee is playing up again.", False),
        ("My sister-in-law works in corrections.", False),
        ("I mixed up a huge batch of bolognese.", False),
        ("There was a typo in my claims report.", False),
        ("It's a marathon, not a sprint.", False),
        ("I was wrong to think he'd call.", False),
        ("I misspoke before, he lands on the 15th.", True),
        ("Ugh, I mixed up the companies. Hartley Gas.", True),
        ("My bad, it's 7.", True),
        # more ways to take something back
        ("Ugh, ignore what I said about the 17th. They moved us to Sunday the 18th.", True),
        ("And strike that about lemon drizzle, we're doing coffee and walnut.", True),
        ("Did I say 12:30? 1 o'clock.", True),
        ("Oh and I had that wrong earlier about Lars, my uncle Henrik is giving the speech.", True),
        ("Hang on, that's wrong about the numbers. It's 38 guests.", True),
        ("No wait, 12 spaces.", True),
        ("Let me correct myself: the flat is on the fourth floor.", True),
        ("Did I say I'd pick you up? I can't remember.", False),
        ("No, wait for me at the station.", False),
        ("Did I say thank you? You've been brilliant.", False),
        ("That's wrong of them, honestly.", False),
        ("I told him that's not right, but he did it anyway.", False),
        ("Strike three and you're out.", False),
        # a probe written to break the wordings
        ("Did I say 55? 58, to be safe.", True),
        ("Did I say Tuesday? Wednesday.", True),
        ("Did I say big? A huge understatement.", False),
        ("Anouk kept telling me to strike that pose.", False),
        ("No wait times at Larkfield either.", False),
        ("No wait list at the community centre.", False),
        ("I can't wait, no way I'm missing it.", False),
        ("It's a journey, not a race.", False),
        ("That's wrong, honestly: her boss called her back.", False),
        ("Oh, no wait, it's Friday.", True),
        # inside a sentence it takes back what that sentence said, not an earlier message
        ("Emi lands at Heathrow on the 28th of April, no wait, the 29th.", False),
    ],
)
def test_a_correction_is_recognised_by_its_words(text, expected):
    assert corrects_earlier(text) is expected


def test_message_position_orders_the_messages_of_a_session():
    assert message_position(S1 + "000012.md") == (S1, 12)
    assert message_position("ctx://user/tomas/memories/general/x.md") is None
    assert message_position(S1) is None


def test_shares_content_ignores_function_words_and_names():
    assert shares_content("Oops, typo: the locker code is 4417.", "My locker code at the gym is 4471.")
    assert not shares_content("so let's make that 14 km", "Jana teaches physics, not maths.")
    assert not shares_content("Tomas: fine", "Tomas: great", names=("Tomas",))


def _lines(*pairs: tuple[str, str]) -> list[Line]:
    return [Line(role, "Tomas" if role == "user" else "assistant", text) for role, text in pairs]


def test_a_correction_is_indexed_with_the_statement_it_corrects():
    batch = _lines(
        ("user", "My locker code at the gym is 4471."),
        ("assistant", "Noted."),
        ("user", "Oops, typo: the locker code is 4417."),
        ("assistant", "Updated to 4417."),
    )
    contexts = index_contexts([], batch, context_messages=1, max_chars=200)
    assert contexts[2].startswith("Tomas: My locker code at the gym is 4471.")
    # without the correction's words, the same message is read alone (the walk back stops at one's own turn)
    plain = _lines(
        ("user", "My locker code at the gym is 4471."),
        ("assistant", "Noted."),
        ("user", "The locker code is 4417 for the new gym."),
    )
    assert "4471" not in index_contexts([], plain, context_messages=1, max_chars=200)[2]


def test_a_correction_that_shares_nothing_with_the_last_statement_is_read_alone():
    batch = _lines(
        ("user", "My mistake earlier, Jana teaches physics, not maths."),
        ("assistant", "Physics, got it."),
        ("user", "I ride about 12 km to work, so let's make that 14 km, I measured it properly."),
    )
    contexts = index_contexts([], batch, context_messages=1, max_chars=200)
    assert "Jana" not in contexts[2]


def _hit(uri: str, score: float, abstract: str, when: datetime = datetime(2024, 9, 3)) -> NodeHit:
    return NodeHit(
        uri=uri, owner_space="user:tomas", context_type="memory", score=score, occurred_at=when, abstract=abstract
    )


def _no_model(texts: list[str]) -> np.ndarray:
    raise AssertionError("the same-session case needs no embedding")


def test_a_correction_ranks_just_above_what_it_corrects_in_the_same_session():
    said = _hit(S1 + "000007.md", 0.40, "Tomas: My locker code at the gym is 4471.")
    ack = _hit(S1 + "000008.md", 0.20, "assistant: Noted.")
    fixed = _hit(S1 + "000009.md", 0.30, "Tomas: Oops, typo: the locker code is 4417.")
    assert prefer_corrections([said, ack, fixed], _no_model, same_topic=0.5, margin=0.15) == 1
    assert fixed.score == pytest.approx(0.4001) and said.score == 0.40 and ack.score == 0.20


def test_a_correction_far_below_or_of_another_person_stays_where_it_is():
    said = _hit(S1 + "000007.md", 0.50, "Tomas: My locker code at the gym is 4471.")
    fixed = _hit(S1 + "000009.md", 0.30, "Tomas: Oops, typo: the locker code is 4417.")
    assert prefer_corrections([said, fixed], _no_model, same_topic=0.5, margin=0.15) == 0  # 0.20 below
    assert fixed.score == 0.30
    other = _hit(S1 + "000007.md", 0.40, "Jana: My locker code at the gym is 4471.")
    fixed = _hit(S1 + "000009.md", 0.30, "Tomas: Oops, typo: the locker code is 4417.")
    assert prefer_corrections([other, fixed], _no_model, same_topic=0.5, margin=0.15) == 0  # Jana's, not his
    earlier = _hit(S1 + "000011.md", 0.40, "Tomas: My locker code at the gym is 4471.")
    assert prefer_corrections([earlier, fixed], _no_model, same_topic=0.5, margin=0.15) == 0  # said after it
    assert prefer_corrections([said, fixed], _no_model, same_topic=0.5, margin=0.0) == 0  # switched off


def _embed_topics(texts: list[str]) -> np.ndarray:
    """A stand-in for the model (a unit test of the rule): the topic word of each text as a one-hot vector."""
    topics = ["standup", "brno", "garden"]
    return np.array([[1.0 if t in text.lower() else 0.0 for t in topics] for text in texts], dtype=np.float32)


def test_a_correction_in_a_later_session_corrects_the_statement_on_its_topic():
    said = _hit(S1 + "000011.md", 0.39, "Tomas: Our team standup is at 9:15 every morning.")
    garden = _hit(S1 + "000013.md", 0.35, "Tomas: The garden is a mess.")
    fixed = _hit(
        S2 + "000001.md",
        0.28,
        "Tomas: I said the standup was at 9:15 but I was wrong, it moved to 9:45.",
        datetime(2024, 11, 19),
    )
    assert prefer_corrections([said, garden, fixed], _embed_topics, same_topic=0.5, margin=0.15) == 1
    assert fixed.score == pytest.approx(0.3901) and garden.score == 0.35

    def broken(texts: list[str]) -> np.ndarray:
        raise RuntimeError("model gone")

    fixed.score = 0.28
    assert prefer_corrections([said, fixed], broken, same_topic=0.5, margin=0.15) == 0  # skipped, never raised
    assert prefer_corrections([said, fixed], None, same_topic=0.5, margin=0.15) == 0


def test_the_later_of_two_corrections_of_one_statement_ends_first():
    said = _hit(S1 + "000001.md", 0.30, "Tomas: My brother Pavel is coming over from Brno for the weekend of the 14th.")
    first = _hit(S1 + "000003.md", 0.25, "Tomas: Sorry, I mean the weekend of the 21st.")
    second = _hit(
        S2 + "000001.md",
        0.29,
        "Tomas: Correction from last time: Pavel flies in from Prague, not Brno.",
        datetime(2024, 10, 8),
    )
    assert prefer_corrections([said, first, second], _embed_topics, same_topic=0.5, margin=0.15) == 2
    assert second.score > first.score > said.score


def test_a_correction_is_lifted_only_for_a_question_about_what_it_says():
    """A correction changes one detail: a question about another detail of the statement it corrects is answered by
    that statement (a held-out probe's "bystander" questions)."""
    said = _hit(
        S1 + "000001.md", 0.40, "Tomas: My daughter Isla's piano recital is on Saturday the 23rd at Brookfield."
    )
    fixed = _hit(S1 + "000003.md", 0.30, "Tomas: Sorry, I got the date wrong, it's Sunday the 24th, not the 23rd.")
    kw = {"same_topic": 0.5, "margin": 0.15}
    assert prefer_corrections([said, fixed], _no_model, query="What instrument does Isla play?", **kw) == 0
    assert fixed.score == 0.30
    # a date asked (also after a preposition), the corrected word asked, or a number asked for: lifted
    for query in ("When is Isla's recital?", "On what day is Isla's recital?", "Which date is the recital now?"):
        fixed.score = 0.30
        assert prefer_corrections([said, fixed], _no_model, query=query, **kw) == 1, query
    code = _hit(S1 + "000007.md", 0.40, "Tomas: My locker code at the gym is 4471.")
    typo = _hit(S1 + "000009.md", 0.30, "Tomas: Argh, typo: the code is 4417.")
    assert prefer_corrections([code, typo], _no_model, query="What is Tomas's gym locker code?", **kw) == 1


def test_a_question_about_what_was_said_first_keeps_the_corrected_statement_first():
    said = _hit(S1 + "000007.md", 0.40, "Tomas: My locker code at the gym is 4471.")
    fixed = _hit(S1 + "000009.md", 0.30, "Tomas: Oops, typo: the locker code is 4417.")
    kw = {"same_topic": 0.5, "margin": 0.15}
    for query in ("Which locker code did Tomas first give?", "What locker code did Tomas give at first?"):
        assert prefer_corrections([said, fixed], _no_model, query=query, **kw) == 0, query
    assert fixed.score == 0.30
    assert prefer_corrections([said, fixed], _no_model, query="What is Tomas's locker code?", **kw) == 1
