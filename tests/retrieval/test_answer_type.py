"""The answer-type rule of search_memory's merge (retrieval/answer_type.py, issue 25)."""

from __future__ import annotations

import pytest

from context_engine.retrieval.answer_type import expected_answer_type, has_answer_type, prefer_answer_type
from context_engine.schema.hits import NodeHit


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("When did Nala have surgery?", "number"),
        ("How many people are in the book club?", "number"),
        ("how often does she swim?", "number"),
        ("What time is the standup?", "number"),
        ("Which weekday does the user have off?", "day"),
        ("What date is Zoe's birthday party?", "day"),
        ("Who is Kofi's vet?", "name"),
        ("What is the name of Sam's cat?", "name"),
        ("What is Sam's partner's name?", "name"),
        ("Which company did Hannah join?", "name"),
        ("What brand of running shoes did they buy?", "name"),
        # the type is read from the opening words only: "when" and "who" inside a question ask for no type
        ("What did Sam start drinking when caffeine was ruining their nights?", None),
        ("What did Sam do at the wedding of the sister who married in Galway?", None),
        ("Where does Sam live?", None),
        ("What does the user do for a living?", "occupation"),
        ("What is the user's profession?", "occupation"),
        ("What is Sam's job title now?", "occupation"),
        ("what line of work is Priya in?", "occupation"),
        ("What does Kwame work as?", "occupation"),
        ("What part-time job does Lena have now?", "occupation"),
        # "do" without "for a living" is any activity; "career" asks for plans, not a job held
        ("What does Melanie do to destress?", None),
        ("What career path has Caroline decided to pursue?", None),
        ("萨姆什么时候搬家的？", None),
        # the preposition the answer takes may open the question
        ("On which day does the book club meet now?", "day"),
        ("On which days does Becky walk Kofi?", "day"),
        ("For how long has Nate had his turtles?", "number"),
        ("In which month's game did John score a career high?", "number"),
        ("At which airport is Priya's spouse employed?", "name"),
        ("With whom did Sam go to Lisbon?", "name"),
        ("From which company did Hannah resign?", "name"),
        ("In what ways is Caroline taking part?", None),
        # "What does X do?" alone asks for a job; with anything after "do" it asks for an activity
        ("What does Kim do?", "occupation"),
        ("What does the user do these days?", "occupation"),
        ("What does Jon tell Gina he won't do?", None),
    ],
)
def test_the_expected_answer_type_comes_from_the_opening_words(question, expected):
    assert expected_answer_type(question) == expected


def test_a_number_is_a_digit_a_number_word_or_a_time_word():
    assert has_answer_type("number", "He's 24 kilos already.", "How heavy?")
    assert has_answer_type("number", "I swim twice a week.", "How often?")
    assert has_answer_type("number", "Nala had a dental operation on Monday.", "When?")
    assert has_answer_type("number", "I do school pickup on Tuesdays.", "When?")
    assert not has_answer_type("number", "Our old cat Nala is not impressed with him.", "When?")
    assert not has_answer_type("number", "That is the one I liked.", "When?")  # "one" is mostly a pronoun


def test_a_day_is_a_weekday_the_weekend_a_relative_day_or_a_date():
    q = "On which day does the book club meet now?"
    assert has_answer_type("day", "Lena: And we meet on the last Tuesday of the month now instead.", q)
    assert has_answer_type("day", "I work from home except Tuesdays and Thursdays.", q)
    assert has_answer_type("day", "Kofi's booked in to be neutered on 15 January.", q)
    assert has_answer_type("day", "Oops, I mean the 3rd of May.", q)
    assert has_answer_type("day", "The party is on May 3rd, or was it 04/05/2024?", q)
    assert has_answer_type("day", "We usually go at the weekend.", q)
    # a number or a time of day is no day: a "which day" question is not answered by them
    assert not has_answer_type("day", "assistant: A pub can make for a livelier book club evening.", q)
    assert not has_answer_type("day", "Switched Kofi to two meals a day, the vet said it's time.", q)
    assert not has_answer_type("day", "I have 3 cats.", q)


def test_a_name_is_a_capitalised_word_inside_a_sentence_the_question_does_not_name():
    q = "Who is Kofi's vet?"
    assert has_answer_type("name", "Kwame: His vet is Dr Okafor at Riverside Vets.", q)
    # the speaker prefix, a sentence's first word, "I" and the names the question already holds are no answer
    assert not has_answer_type("name", "Kwame: Switched Kofi to two meals a day, the vet said it's time.", q)
    assert not has_answer_type("name", "I think Kofi's vet is great. Really.", q)
    assert has_answer_type("name", "I just started at Northwind as a data engineer.", "What company does Sam work for?")


def test_an_occupation_is_one_of_the_listed_nouns_as_a_whole_word():
    q = "What does the user do for a living?"
    assert has_answer_type("occupation", "Being a paramedic doesn't help, the night shifts wreck my rhythm.", q)
    assert has_answer_type("occupation", "I'm going back to work part-time in April, as a pharmacist at Boots.", q)
    assert has_answer_type("occupation", "Both my parents were Teachers.", q)  # any case, plural
    assert not has_answer_type("occupation", "Four on, four off.", q)
    assert not has_answer_type("occupation", "The cookery course was great fun.", q)  # "cook" inside a word
    assert not has_answer_type("occupation", "I drive to work at eight.", q)  # "driver" is listed, "drive" is not


def _hit(name: str, score: float, abstract: str, *, context_type: str = "memory", is_dir: bool = False) -> NodeHit:
    return NodeHit(
        uri=f"ctx://user/ann/memories/{name}",
        owner_space="user:ann",
        context_type=context_type,
        score=score,
        abstract=abstract,
        is_dir=is_dir,
    )


def test_only_memories_holding_the_expected_type_are_boosted():
    name = _hit("a.md", 0.40, "His vet is Dr Okafor at Riverside Vets.")
    plain = _hit("b.md", 0.45, "Switched Kofi to two meals a day, the vet said it's time.")
    skill = _hit("c.md", 0.30, "Call Dr Okafor first.", context_type="skill")
    folder = _hit("d", 0.20, "Directory: Riverside visits", is_dir=True)
    assert prefer_answer_type("Who is Kofi's vet?", [name, plain, skill, folder], 0.08) == "name"
    assert (name.score, plain.score, skill.score, folder.score) == (pytest.approx(0.48), 0.45, 0.30, 0.20)


def test_no_expected_type_or_no_boost_changes_nothing():
    hit = _hit("a.md", 0.40, "His vet is Dr Okafor at Riverside Vets.")
    assert prefer_answer_type("Where is the vet?", [hit], 0.08) is None
    assert prefer_answer_type("Who is Kofi's vet?", [hit], 0.0) is None
    assert prefer_answer_type("When did it happen?", [hit], 0.08) is None  # no hit holds a time
    assert hit.score == 0.40
