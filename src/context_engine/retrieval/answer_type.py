"""A question's expected answer type prefers the memories that hold one (issue 25; the answer-type check of classic
question answering: a "when" question is answered by a time, a "who" question by a name).

Among memories that match a question about equally, the one that can answer it holds what the question asks for:
"When did Nala have surgery?" is answered by "Nala had a dental operation on Monday", not by "Our old cat Nala is
NOT impressed with him"; "Who is Kofi's vet?" by "His vet is Dr Okafor at Riverside Vets", not by "Switched Kofi to
two meals a day, the vet said it's time". :func:`expected_answer_type` reads the type from the question's opening
words (English):

* ``day``: "what / which day / date / weekday" (or their plurals) -- answered by a weekday ("Tuesdays"), the
  weekend, a day named relative to today ("tomorrow") or a date ("15 January", "May 3rd", "the 3rd", "04/05/2024");
  not by any number or time word ("a livelier book club evening" answers no "On which day ...");
* ``number``: "when", "how many / much / old / long / often / far / heavy / tall", "what / which time / year /
  month" (or their plurals) -- answered by a digit, a number word, a weekday, a month or a time word
  (:data:`NUMBER_WORDS`: "twice", "yesterday", "last week" by its "week");
* ``name``: "who / whom / whose", "what is the name ...", "what is X's name", "what / which brand, company, city,
  neighbourhood, book, airport, hotel, ..." -- answered by a capitalised word inside a sentence (a proper noun)
  that the question does not already name ("I" and a sentence's first word are not names);
* ``occupation``: "what does X do for a living / for work / professionally", "what is X's job / profession /
  occupation / line of work / trade", "what (part-time / new ...) job ...", "what does X work as", "what does X
  do?" with nothing after "do" but "now" or "these days" -- answered by
  an occupation noun (:data:`OCCUPATIONS`: "I'm an architect", "Being a paramedic doesn't help"). A person's
  occupation is a class of its own in question classification (Li & Roth, *Learning Question Classifiers*, COLING
  2002: HUM:title); the question rarely shares a word with the memory that answers it ("What is the user's
  profession?" against "I'm going back to work part-time in April, as a pharmacist at Boots").

The opening words may follow the preposition the answer takes: "On which day ...", "For how long ...", "With
whom ...", "At which airport ...". Other questions ("what", "where", "why", "how", Chinese) have no expected type and
are unchanged.
:func:`prefer_answer_type` adds ``retrieval.scoring.answer_type_boost`` (0.08) to the final score of each memory
hit whose abstract (the speaker prefix ``"Sam: "`` left out) holds the expected type: it orders near-ties, and is
too small to lift a memory that matches the question clearly worse. Measured in eval/README.md (locomo_dev and
agent_dev, per category).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from context_engine.schema.hits import NodeHit

__all__ = ["NUMBER_WORDS", "OCCUPATIONS", "AnswerType", "expected_answer_type", "has_answer_type", "prefer_answer_type"]

AnswerType = Literal["day", "number", "name", "occupation"]

# A question may open with the preposition its answer takes ("On which day ...", "For how long ...", "In what
# year ...", "At which airport ..."): the interrogative follows it.
_PREPOSITION = r"(?:(?:on|in|at|for|by|from|to|since|until|till|after|before|during|within|around|with) )?"
_DAY_QUESTION = re.compile(r"^\W*" + _PREPOSITION + r"(?:what|which) (?:day|date|weekday)s?\b", re.IGNORECASE)
_NUMBER_QUESTION = re.compile(
    r"^\W*" + _PREPOSITION + r"(?:when|how (?:many|much|old|long|often|far|heavy|tall|frequently)"
    r"|(?:what|which) (?:time|year|month)s?)\b",
    re.IGNORECASE,
)
_NAME_QUESTION = re.compile(
    r"^\W*" + _PREPOSITION + r"(?:who|whom|whose|what(?:'s| is| was) the name|what (?:is|was) [\w'’ ]+ name\b"
    r"|(?:what|which) (?:brand|company|make|model|city|town|country|neighbourhood|neighborhood|restaurant|shop"
    r"|bank|airline|school|team|band|book|film|movie|show|app|game|airport|hotel|hospital|university|college"
    r"|museum|station|church|street))\b",
    re.IGNORECASE,
)

_OCCUPATION_QUESTION = re.compile(
    r"^\W*(?:what (?:does|did|do) [\w'’ ]+ do (?:for (?:a )?(?:living|work|job)|professionally)"
    r"|what (?:is|was|are|were) [\w'’ ]*(?:job|profession|occupation|line of work|trade)\b"
    r"|what (?:[\w-]+ )?(?:job|profession|occupation|line of work|trade)\b"
    r"|what (?:does|did|do) [\w'’ ]+ work as\b"
    r"|what (?:does|do) [\w'’]+(?: [\w'’]+)? do(?: now| these days| nowadays)?\W*$)",
    re.IGNORECASE,
)

#: Occupations (nouns, singular; a plural "s" is allowed when matched), for the ``occupation`` answer type: the
#: common ones of conversation, written for this module.
OCCUPATIONS: tuple[str, ...] = tuple(
    """
    accountant actor actress administrator analyst apprentice architect artist assistant astronomer
    athlete attorney auditor baker banker barber barista bartender biologist bookkeeper broker builder
    butcher carer caretaker carpenter cashier chef chemist clerk coach consultant cook
    coordinator counsellor counselor courier curator dancer dentist designer detective developer
    dietitian dispatcher doctor driver economist editor electrician engineer entrepreneur executive
    farmer firefighter fisherman florist freelancer gardener geologist guard hairdresser historian
    housekeeper illustrator inspector instructor intern interpreter janitor journalist laborer labourer
    lawyer lecturer librarian lifeguard locksmith machinist manager mechanic midwife miner minister
    musician nanny nurse officer operator optician painter paralegal paramedic pastor pharmacist
    photographer physician physicist physiotherapist plumber police policeman policewoman politician
    postman priest producer professor programmer psychiatrist psychologist rabbi realtor receptionist
    reporter representative researcher sailor salesman saleswoman scientist sculptor secretary singer
    soldier solicitor specialist statistician supervisor surgeon surveyor teacher technician therapist
    trainer translator trucker tutor vet veterinarian vicar waiter waitress warden welder writer
    """.split()
)
_OCCUPATION = re.compile(r"\b(?:" + "|".join(OCCUPATIONS) + r")s?\b", re.IGNORECASE)

#: Words that state a number, a frequency, a date or a time (besides digits); those of :data:`_COUNTED` also in the
#: plural ("Tuesdays", "two weeks"). Not "one": in conversation it is mostly a pronoun ("the one I liked"; without it
#: locomo_dev P@1 0.4634 -> 0.4654, agent_dev unchanged).
NUMBER_WORDS: tuple[str, ...] = (
    *"two three four five six seven eight nine ten eleven twelve".split(),
    *"twenty thirty forty fifty hundred thousand".split(),
    *"once twice daily weekly monthly yesterday today tomorrow tonight noon midnight am pm".split(),
    *"january february march april may june july august september october november december".split(),
)
_COUNTED: tuple[str, ...] = (
    *"monday tuesday wednesday thursday friday saturday sunday weekend".split(),
    *"morning evening night week month year".split(),
)
_NUMBER = re.compile(
    r"\d|\b(?:" + "|".join(NUMBER_WORDS) + "|" + "|".join(w + "s?" for w in _COUNTED) + r")\b",
    re.IGNORECASE,
)
_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec"
# A day: a weekday (or its plural), the weekend, a day named relative to today, or a date (a day of the month beside
# a month's name, an ordinal, a numeric date).
_DAY = re.compile(
    r"\b(?:(?:mon|tues|wednes|thurs|fri|satur|sun)days?|weekends?|today|tomorrow|yesterday|tonight"
    r"|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:" + _MONTHS + r")[a-z]*"
    r"|(?:" + _MONTHS + r")[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?\b"
    r"|\d{1,2}(?:st|nd|rd|th)\b|\d{1,4}[/.-]\d{1,2}[/.-]\d{1,4})",
    re.IGNORECASE,
)
_SPEAKER_PREFIX = re.compile(r"^[^:\n]{1,40}:\s")
# A capitalised word that is not the first of its sentence.
_INNER_CAPITAL = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][\w'’-]+)")
_FIRST_PERSON = frozenset({"i", "i'm", "i've", "i'd", "i'll", "i’m", "i’ve", "i’d", "i’ll"})


def expected_answer_type(query: str) -> AnswerType | None:
    """The answer type a question's opening words ask for (module docstring), or ``None``."""
    if _DAY_QUESTION.search(query):
        return "day"
    if _NUMBER_QUESTION.search(query):
        return "number"
    if _NAME_QUESTION.search(query):
        return "name"
    if _OCCUPATION_QUESTION.search(query):
        return "occupation"
    return None


def _stem(word: str) -> str:
    word = word.casefold()
    for suffix in ("'s", "’s"):
        if word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def has_answer_type(kind: AnswerType, text: str, query: str) -> bool:
    """Whether ``text`` (a memory's abstract; a leading ``"Speaker: "`` is skipped) holds an answer of type ``kind``
    for ``query``: a number, date or time word (``number``), or a proper noun the query does not name (``name``)."""
    text = _SPEAKER_PREFIX.sub("", text, count=1)
    if kind == "day":
        return _DAY.search(text) is not None
    if kind == "number":
        return _NUMBER.search(text) is not None
    if kind == "occupation":
        return _OCCUPATION.search(text) is not None
    named = {_stem(w) for w in re.findall(r"[\w'’]+", query)}
    for match in _INNER_CAPITAL.finditer(text):
        word = match.group(1)
        if word.casefold() not in _FIRST_PERSON and _stem(word) not in named:
            return True
    return False


def prefer_answer_type(query: str, hits: Sequence[NodeHit], boost: float) -> AnswerType | None:
    """Add ``boost`` (capped at 1) to the score of each memory hit (no directory) of ``hits`` whose abstract holds
    the answer type ``query`` asks for (module docstring); scores change in place.

    Returns:
        The expected answer type when any score changed (the caller then re-sorts), else ``None``.
    """
    if boost <= 0.0:
        return None
    kind = expected_answer_type(query)
    if kind is None:
        return None
    changed = False
    for h in hits:
        if h.context_type == "memory" and not h.is_dir and has_answer_type(kind, h.abstract, query):
            h.score = round(min(1.0, h.score + boost), 6)
            changed = True
    return kind if changed else None
