"""Where conversation messages live, how their L0 names the speaker and whether a message corrects an earlier one
(issue 25): pure rules on a URI and a text.

``add_messages`` stores a message under ``ctx://user/<space>/memories/sessions/<conversation_id>/`` with the L0
``"<speaker>: <text>"`` (``ingest/memory.py``; the role when no speaker was given). The BM25 index, the first-stage
retriever and the match-quality rating read the speaker back with :func:`message_speaker`; it sits here, with the
data, so a search does not go down to the storage layer to split a string.
"""

from __future__ import annotations

import functools
import re

__all__ = [
    "CORRECTION_WINDOW",
    "SESSION_SEGMENT",
    "corrects_earlier",
    "message_position",
    "message_speaker",
    "reports_action",
]

#: Conversation messages live under ``ctx://user/<space>/memories/sessions/<session>/`` (``ingest/memory.py``).
SESSION_SEGMENT = "/memories/sessions/"
_MAX_SPEAKER_CHARS = 128


def message_speaker(uri: str, abstract: str) -> str | None:
    """The speaker of a stored conversation message (the text before the first ``": "`` of its L0), ``None`` for
    any other node (a directory, a memory, a skill or resource)."""
    if SESSION_SEGMENT not in uri or uri.endswith("/"):
        return None
    speaker, sep, _ = abstract.partition(": ")
    return speaker if sep and 0 < len(speaker) <= _MAX_SPEAKER_CHARS else None


# ".../memories/sessions/<conversation_id>/<seq>.md" (ingest/memory.py), seq zero-padded
_MESSAGE_URI = re.compile(r"^(ctx://user/[^/]+/memories/sessions/[^/]+/)(\d+)\.md$")


def message_position(uri: str) -> tuple[str, int] | None:
    """``(session directory URI, sequence number)`` of a stored conversation message, ``None`` for any other node:
    the order of the messages of one session, which share the session's time (``occurred_at``)."""
    m = _MESSAGE_URI.match(uri)
    return (m.group(1), int(m.group(2))) if m else None


#: A correction corrects one of its speaker's messages at most this many messages before it in its session (the
#: replies and acknowledgements in between counted): "My classroom is room 14" / "Got it." / "Wait, no, it's room 41".
CORRECTION_WINDOW = 6

# What speakers say when they correct what they said before: "sorry, I meant", "Correction:", "typo.", "make that
# two", "it's 2015, not 2016", "I was wrong about the venue", "I misspoke", 说错了, 我是说. Each in the form a
# correction takes, not the everyday phrase that shares its words (a held-out probe's traps): "I meant to tell you",
# "No, I mean it", "my bad knee", "works in corrections", "a typo in my report", "I mixed up a batch of bolognese",
# "I was wrong to think", "it's a marathon, not a sprint" are no correction. Not a bare "actually" (emphasis: "I
# actually love it") nor "update" (a change, not a mistake: the current-state rule's).
_CORRECTION = re.compile(
    r"(?<![\w'’])(?:"
    r"correction\s*(?:[:,—–-]|from\b|to what\b)|typo\s*[:!.,—–-]|I meant(?! to\b| it\b| that\b| well\b)"
    r"|(?:sorry|oops|whoops|no|wait)[,.!]*\s+I mean(?! it\b| that\b)"
    r"|I was wrong(?! to\b| for\b)|I got (?:that|it|this|those|the \w+) (?:wrong|mixed up)"
    r"|my mistake(?! (?:was|is|of|in|with)\b)|my bad[,.!:;]|I misspoke|I misread"
    r"|I mixed (?:that|those|them|it|these) up|I mixed up the\b"
    r"|(?:scratch|strike) that(?=\s*(?:[,.;:!—–-]|$|about\b|bit\b|part\b|last\b))"
    r"|should(?: have|'ve|’ve) said|ignore what I (?:said|told you|wrote)|let me correct (?:myself|that)\b"
    r"|I had (?:that|it|this|those|the \w+) wrong"
    r"|(?:hang on|hold on|wait|sorry|oops|ugh|argh)[,.!—–-]*\s+"
    r"(?:that's|that’s|that was|that is) (?:wrong|not right|incorrect)\b(?! (?:to|of|for)\b)"
    r"|(?:it's|it’s|it is|it was|that's|that’s|that is|they're|they’re|he's|he’s|she's|she’s)\b[^.!?;]{1,60}?,\s*not"
    r"(?! just| only| because| to| that| for| about| as| so| even| always| all| every| a\b| an\b| the end))"
    r"(?![\w'’])"
    # "Did I say 55? 58.", "Did I say Tuesday? Wednesday": the question, then the value (not "Did I say thank you?
    # You've been brilliant.")
    r"|(?<![\w'’])did I (?:just )?say [^.!?]{1,40}\?\s*(?:no\b|\d|(?!(?:I|you|we|he|she|they|it|that|this|a|an|the)\b)"
    r"(?-i:[A-Z]))"
    r"|(?:^|[,.!?;:]\s*|\b(?:let's|let’s|so|or|no|wait),?\s+)make (?:that|it) "
    r"(?:\d|(?-i:[A-Z])|(?:one|two|three|four|five|six|seven|eight|nine|ten|twice|once|half|a quarter)\b)"
    r"|更正|纠正|说错了|搞错了|记错了|写错了|打错了|口误|我是说",
    re.IGNORECASE,
)


# "Wait, no, ..." / "No wait, ..." opening a sentence (after an interjection at most); inside one it takes back what
# that sentence just said ("lands on the 28th, no wait, the 29th"), which is no earlier message.
_WAIT_NO = re.compile(r"(?<![\w'’])(?:wait,? no\b(?! (?:way|longer|more)\b)|no,? wait\s*[,.!:;—–-])", re.IGNORECASE)
_SENTENCE_OPENING = re.compile(r"(?:^|[.!?;:]\s*)\W*(?:(?:oh|ah|um|er|hmm|ugh|argh|sorry|ok|okay|great)\W*)?$", re.I)


@functools.lru_cache(maxsize=65_536)
def corrects_earlier(text: str) -> bool:
    """Whether a message's text (without its ``speaker: `` prefix) says it corrects something said before: "Oops, I
    mean the 3rd of May", "Correction: he's a nurse, not a paramedic", "Let's make that two runs a week", "it's
    Ana with one n, not Anna", 我说错了 (:data:`_CORRECTION`). A correction is indexed with the message it corrects
    (``ingest/conversation.py``) and ranks above it (``retrieval/current_state.py`` :func:`prefer_corrections`).

    Memoised, as :func:`reports_action` is: a conversation's candidate messages recur across its queries, and the
    patterns cost about 50 us a message."""
    return _CORRECTION.search(text) is not None or any(
        _SENTENCE_OPENING.search(text[: m.start()]) for m in _WAIT_NO.finditer(text)
    )


# An assistant saying what it did for the user, at the start of its message: "I've booked ...", "Done: your plan is
# cancelled", "Booked! Confirmation KC-88213", "I found Riverside Physio and booked you ...": a transaction verb
# (booked, ordered, cancelled, a reminder set ...) within the first words of an "I ..." clause. Not an assistant
# that talks ("I've found that people often ...", "I set out three options below", "I made a rough comparison",
# "I put together a plan": a held-out probe's traps). Only read for the assistant's messages (a user's "I switched
# to rooibos" states a fact of their own).
_TRANSACTION = (
    r"(?:booked|reserved|ordered|scheduled|rescheduled|cancell?ed|renewed|registered|paid|transferred|bought|placed"
    r"|sent|emailed|paused|extended|upgraded|downgraded|invited|signed you|switched you|moved your|chose (?:the|a|an"
    r"|your)\b|added (?:it|the|a|an"
    r"|your|(?-i:[A-Z])[\w'’-]*)\b|shared (?:your|the)\b"
    r"|set (?:up )?(?:a|an|your|the) (?:reminder|alarm|timer|standing order"
    r"|direct debit|appointment|heating|thermostat)"
    r"|created (?:a|an|the|your) (?:reminder|event|standing order|direct debit|appointment|booking|account|calendar))"
)
_PARTICIPLE = (
    r"(?:booked|reserved|ordered|scheduled|rescheduled|cancell?ed|confirmed|renewed|paid|sent|paused|frozen|extended"
    r"|upgraded|downgraded|transferred|registered)"
)
_ACTION = re.compile(
    r"^\W*(?:(?:done|sorted|all set|ok(?:ay)?|great|sure)[:!.,—–-]\s*)?(?:I've|I’ve|I have|I)\s+(?:[\w'’&-]+\s+){0,8}?"
    + _TRANSACTION
    + r"\b|^\W*(?:booked|done|reserved|ordered|scheduled|rescheduled|cancell?ed|confirmed|paid|sent|renewed)\b"
    r"\s*[:!.,—–-]|^\W*all set\s*[:—–-]"
    # what was done as the subject: "Your table for four is booked for 7:30" ("your" for the user's, "has been" /
    # "is now" for a change made; not "The recital is scheduled for 3pm"). Not "Reminder set for 1 September": the
    # request of a reminder holds the facts ("remind me that my passport expires in November"; measured)
    # Not what someone else did: "Your sister's flight has been cancelled", "... has been cancelled by the
    # restaurant", "... has been booked for the 8th by another party" (but "booked for 7:45, by the window")
    r"|^\W*(?:(?:done|ok(?:ay)?|great|sure|right)[:!.,—–-]\s*)?(?!(?:your|the)\s+[\w-]+['’]s\b)(?:"
    r"your\s+(?:[\w'’&-]+\s+){0,7}?(?:is|are|has been|have been)\s+(?:now\s+)?"
    + _PARTICIPLE
    + r"|(?:the\s+)?(?:[\w'’&-]+\s+){0,7}?(?:has been|have been|is now|are now)\s+"
    + _PARTICIPLE
    + r")\b(?!\s+(?:up|solid|out|by)\b)(?![^.!?;]{0,80}\bby (?:another|someone|somebody|them)\b)",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=65_536)
def reports_action(text: str) -> bool:
    """Whether an assistant's message (its text) opens by reporting what it did for the user: "I've booked the 06:40
    to Bristol, coach C, seat 42", "Done: your HelloFresh plan is cancelled" (:data:`_ACTION`). Such a message is
    the memory of the request it carries out: it holds what a later question asks ("What seat does Nadia have?"),
    so it is indexed with that request and the request not with it (``ingest/conversation.py``)."""
    return _ACTION.search(text) is not None
