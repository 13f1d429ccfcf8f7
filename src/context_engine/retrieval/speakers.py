"""Speaker resolution for conversation memories (issue 25, "Speaker names are resolved").

A stored message's L0 is ``"<speaker>: <text>"`` (``ingest/memory.py``; the role when no speaker was given), under
``.../memories/sessions/<session>/``. A question that names a speaker ("When did Caroline go to the support group?",
"What company does Sam work for?", "What does the user drink?") is about that speaker's own turns: in LoCoMo 82% of
the evidence turns of a question naming one speaker are that speaker's (990 of 1,209), while the other speaker's
turns mention the name as a vocative ("Wow, Caroline!") and the turn before or after carries the same words as
context. Neither BM25 nor the embedding separates them, since the name is in almost every turn's indexed text.

:func:`named_speakers` finds the speakers a query names among the candidates' speakers (:func:`references`: whole
words; ``the user`` names the speaker ``user``); :class:`~context_engine.retrieval.l0_retriever.L0Retriever` then
adds ``retrieval.seed.speaker_boost`` to the fused score of those speakers' turns.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

from context_engine.schema.conversation import SESSION_SEGMENT, message_speaker
from context_engine.storage.keyword.content_words import asks_something, states_content

__all__ = [
    "ASSISTANT",
    "ROLE_ALIASES",
    "ROLE_SPEAKERS",
    "SESSION_SEGMENT",
    "message_has_content",
    "message_speaker",
    "named_speakers",
    "is_cjk_name",
    "references",
    "speaker_of_reference",
    "starts_sentence",
]

ASSISTANT = "assistant"
"""The speaker of an assistant's message stored without a name (the role stands for it, ``ingest/memory.py``)."""

ROLE_SPEAKERS = frozenset({"user", "assistant", "system", "tool"})
"""Speakers that are roles (``schema.memory.MessageRole``): a message stored without a speaker name."""


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


_WORD = re.compile(r"[^\W\d_]+")
_SENTENCE_END = frozenset(".!?;:…。！？；：\n")
_LEAD_IN = " \t\r\"'“”‘’«»()[]{}*•·-–—>#0123456789"  # list numbers too: "1) Where ..."
_ROLE_DETERMINERS = ("the", "my", "your", "our")
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_NAME = re.compile(rf"[{_CJK}·]+")
_LATIN_WORD = rf"[^\W{_CJK}]"  # a word character that is not CJK

ROLE_ALIASES: dict[str, str] = {"用户": "user", "使用者": "user", "助手": "assistant", "助理": "assistant"}
"""The Chinese words for the roles a question refers to (an agent asks "用户的猫叫什么名字？")."""

# what may follow a role's Chinese word in a compound that does not name the speaker: 用户名 (user name), 用户数
# (user count), 用户组 (user group), 用户量, 用户群, 用户体验 (user experience), 用户界面 (user interface)
_ALIAS_COMPOUNDS = "名|数|组|量|群|体验|界面"


def starts_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` of ``text`` is the first of a sentence: only lead-in characters (spaces, quotes,
    brackets, bullets, list numbers) since a sentence end or the start of the text."""
    before = text[:start].rstrip(_LEAD_IN)
    return not before or before[-1] in _SENTENCE_END


def _writes_capitals(text: str) -> bool:
    """Whether ``text`` capitalises a word inside a sentence (a name, "Priya"; not "I", not an acronym, "API", not
    a sentence's first word): its writer then capitalises names, and a lower-case word is no name."""
    for m in _WORD.finditer(text):
        word = m.group(0)
        if len(word) > 1 and word[0].isupper() and not word.isupper() and not starts_sentence(text, m.start()):
            return True
    return False


def references(query: str, speakers: Iterable[str]) -> list[re.Match[str]]:
    """The references in ``query`` (NFKC-normalised: the matches' positions are in that text) to the speakers of
    ``speakers``, in order: a speaker's name as a whole word or phrase (longer names first, "Dr Okafor" before
    "Okafor"), with an optional determiner before it (group 1: the, my, your, our) and an optional possessive ``'s``
    after it (group 3); the name as written is group 2. A name ending in ``s`` may take a bare apostrophe ("James'");
    a quote after any other name is no possessive ("'Sam'").

    A role (:data:`ROLE_SPEAKERS`) is referred to with a determiner ("the user", "my assistant") or as a possessive
    ("user's job"); "What user name ..." does not name the user. A capitalised name, in a query that capitalises a
    word inside a sentence (not an acronym), only with a capital first letter ("What does Will do?" names the speaker
    Will, "Where will Priya move?" does not); in a query that does not ("when did caroline go ...?"), or a name stored
    in lower case (a handle, "dj_kim"), in any case.

    Chinese (:func:`is_cjk_name`): written without spaces, so a name of CJK characters is found wherever it occurs
    ("林晓在哪家公司上班？"), its possessive ``的`` as group 3 ("林晓的猫"), no determiner; a role by its Chinese
    word (:data:`ROLE_ALIASES`: "用户的猫叫什么？" names the speaker ``user``), not inside a compound such as
    用户名 (user name). Group 2 is then the text as written: :func:`speaker_of_reference` maps it to the speaker."""
    stored = [unicodedata.normalize("NFKC", s).strip() for s in speakers]
    # each name as stored and case-folded: the pattern ignores case, but folding may change letters ("Strauß" ->
    # "strauss", "İpek" -> "i̇pek"), and a query writes the name as stored
    forms = {form for s in stored for form in (s, _fold(s))} - {""}
    cjk = sorted({f for f in forms if is_cjk_name(f)}, key=len, reverse=True)
    names = sorted(forms - set(cjk), key=len, reverse=True)
    roles = {_fold(s) for s in stored} & ROLE_SPEAKERS
    aliases = sorted((a for a, role in ROLE_ALIASES.items() if role in roles), key=len, reverse=True)
    text = unicodedata.normalize("NFKC", query)
    out: list[re.Match[str]] = []
    if names:
        capitalised = {_fold(s) for s in stored if s[:1].isupper()}
        cased = _writes_capitals(text)
        # not inside a word, nor after a word's apostrophe ("O'Neil" does not name Neil); a CJK character beside
        # the name is no word it is inside ("Sam的猫")
        pattern = re.compile(
            rf"(?<!{_LATIN_WORD})(?<!\w['’])((?:{'|'.join(_ROLE_DETERMINERS)})\s+)?"
            rf"({'|'.join(re.escape(n) for n in names)})(['’]s(?!\w)|(?<=s)['’](?!\w))?(?!{_LATIN_WORD})",
            re.IGNORECASE,
        )
        for m in pattern.finditer(text):
            if _fold(m.group(2)) in ROLE_SPEAKERS:
                if m.group(1) is not None or m.group(3) is not None:
                    out.append(m)
            elif not cased or m.group(2)[0].isupper() or _fold(m.group(2)) not in capitalised:
                out.append(m)
    if cjk or aliases:
        # group 1 never matches (no determiner in Chinese): the groups mean what they mean above
        alternatives = [re.escape(n) for n in cjk] + [rf"{re.escape(a)}(?!{_ALIAS_COMPOUNDS})" for a in aliases]
        pattern = re.compile(rf"((?!))?({'|'.join(alternatives)})(的)?")
        out.extend(pattern.finditer(text))
        out.sort(key=lambda m: m.start())
        kept: list[re.Match[str]] = []
        for m in out:  # a Chinese name inside a longer Latin match, or the reverse: the first wins
            if not kept or m.start() >= kept[-1].end():
                kept.append(m)
        out = kept
    return out


def is_cjk_name(name: str) -> bool:
    """Whether ``name`` is written in CJK characters only (Chinese, Japanese kana, Korean): such a language puts no
    space between words, so the name has no word boundary to match (:func:`references`)."""
    return bool(name) and _CJK_NAME.fullmatch(name) is not None


def speaker_of_reference(written: str) -> str:
    """The case-folded speaker a reference's group 2 stands for: a role for its Chinese word (:data:`ROLE_ALIASES`),
    else the name itself, folded."""
    return ROLE_ALIASES.get(written, _fold(written))


def named_speakers(query: str, speakers: Iterable[str]) -> set[str]:
    """The speakers of ``speakers`` that ``query`` refers to (:func:`references`).

    Returns:
        The names as given in ``speakers`` (their original case); empty when the query names none.
    """
    by_fold: dict[str, set[str]] = {}
    for name in speakers:
        by_fold.setdefault(_fold(name).strip(), set()).add(name)
    names = [n for group in by_fold.values() for n in group]
    return {name for m in references(query, names) for name in by_fold.get(speaker_of_reference(m.group(2)), ())}


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
