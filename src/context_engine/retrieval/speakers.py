"""Speaker resolution for conversation memories (issue 25, "Speaker names are resolved").

A stored message's L0 is ``"<speaker>: <text>"`` (``ingest/memory.py``; the role when no speaker was given), under
``.../memories/sessions/<session>/``. A question that names a speaker ("When did Caroline go to the support group?",
"What company does Sam work for?", "What does the user drink?") is about that speaker's own turns: in LoCoMo 82% of
the evidence turns of a question naming one speaker are that speaker's (990 of 1,209), while the other speaker's
turns mention the name as a vocative ("Wow, Caroline!") and the turn before or after carries the same words as
context. Neither BM25 nor the embedding separates them, since the name is in almost every turn's indexed text.

:func:`named_speakers` finds the speakers a query names among the candidates' speakers (whole words, case-folded;
``the user`` names the speaker ``user``); :class:`~context_engine.retrieval.l0_retriever.L0Retriever` then adds
``retrieval.seed.speaker_boost`` to the fused score of those speakers' turns.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

from context_engine.schema.conversation import SESSION_SEGMENT, message_speaker
from context_engine.storage.keyword.content_words import asks_something, states_content

__all__ = ["ASSISTANT", "SESSION_SEGMENT", "message_has_content", "message_speaker", "named_speakers"]

ASSISTANT = "assistant"
"""The speaker of an assistant's message stored without a name (the role stands for it, ``ingest/memory.py``)."""


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def named_speakers(query: str, speakers: Iterable[str]) -> set[str]:
    """The speakers of ``speakers`` that ``query`` names as a whole word or phrase (case-folded, NFKC).

    Returns:
        The names as given in ``speakers`` (their original case); empty when the query names none.
    """
    q = _fold(query)
    out: set[str] = set()
    for name in set(speakers):
        folded = _fold(name).strip()
        if folded and re.search(rf"(?<!\w){re.escape(folded)}(?!\w)", q):
            out.add(name)
    return out


def message_has_content(abstract: str, speaker: str, names: Iterable[str]) -> bool:
    """Whether a stored message's own text (its L0 without the ``speaker: `` prefix) says something by itself
    (:func:`~context_engine.storage.keyword.content_words.states_content`: what it states, its questions aside):
    "assistant: Noted!", "assistant: How long have you been there?" and "assistant: How lucky! Did you get a photo of
    the bittern?" do not. ``names`` (the speakers) are not content.

    An assistant's message that asks the user something states nothing about the user either, whatever it says
    beside its question: "That sounds like demanding work. How long have you been doing it?" reacts to the user's
    turn and asks for more, and its words ("work") let it outrank the turn that holds the fact ("What does Tomasz do
    for work?"); the user's answer, not the question, is the memory. The assistant's statements without a question
    ("Rooibos is caffeine-free.") keep their content. Only the unnamed assistant (:data:`ASSISTANT`) is recognised:
    a stored message does not carry its role, and a named assistant reads like any speaker.

    Memoised: a conversation's candidates recur across its queries, and tokenising them is the cost (~20 us each)."""
    return _has_content(abstract, speaker, frozenset(names))


@functools.lru_cache(maxsize=65_536)
def _has_content(abstract: str, speaker: str, names: frozenset[str]) -> bool:
    text = abstract[len(speaker) + 2 :] if abstract.startswith(f"{speaker}: ") else abstract
    if speaker == ASSISTANT and asks_something(text):
        return False
    return states_content(text, names)
