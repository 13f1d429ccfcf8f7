"""Speaker resolution for conversation memories (issue 25, "Speaker names are resolved").

A stored message's L0 is ``"<speaker>: <text>"`` (``ingest/memory.py``; the role when no speaker was given), under
``.../memories/sessions/<session>/``. A question that names a speaker ("When did Caroline go to the support group?",
"What company does Sam work for?", "What does the user drink?") is about that speaker's own turns: in LoCoMo 82% of
the evidence turns of a question naming one speaker are that speaker's (990 of 1,209), while the other speaker's
turns mention the name as a vocative ("Wow, Caroline!") and the turn before or after carries the same words as
context. Neither BM25 nor the embedding separates them, since the name is in almost every turn's indexed text.

:func:`named_speakers` finds the speakers a query names among the candidates' speakers (:func:`references`: whole
words; ``the user`` names the speaker ``user``); :class:`~context_engine.retrieval.l0_retriever.L0Retriever` then
adds ``retrieval.seed.speaker_boost`` to the fused score of those speakers' turns. A query that names no speaker but
refers to the user (:func:`refers_to_user`: "Where does she work?", "the user" over a named user's turns) boosts
the turns stored with the role ``user``.
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
    "cjk_char",
    "cjk_pronoun_starts",
    "fold_name",
    "SESSION_SEGMENT",
    "addressed_name",
    "message_has_content",
    "message_speaker",
    "named_speakers",
    "is_cjk_name",
    "is_role",
    "references",
    "refers_to_user",
    "speaker_of_reference",
    "starts_sentence",
]

ASSISTANT = "assistant"
"""The speaker of an assistant's message stored without a name (the role stands for it, ``ingest/memory.py``)."""

ROLE_SPEAKERS = frozenset({"user", "assistant", "system", "tool"})
"""Speakers that are roles (``schema.memory.MessageRole``): a message stored without a speaker name."""


def is_role(speaker: str) -> bool:
    """Whether ``speaker`` is a role (:data:`ROLE_SPEAKERS`) or a role's Chinese word (:data:`ROLE_ALIASES`: an
    application may store its messages under "用户" and "助手")."""
    name = unicodedata.normalize("NFKC", speaker).strip()
    return name.casefold() in ROLE_SPEAKERS or name in ROLE_ALIASES


def fold_name(text: str) -> str:
    """NFKC, case-folded and without accents (:func:`_plain`, and the combining marks folding leaves: "İ" folds to
    "i" and a dot above): how names are compared ("Tomás" and "tomas" fold alike; letters without a decomposition,
    ø, ł, đ, æ, stay)."""
    folded = _plain(unicodedata.normalize("NFKC", text).casefold())
    return folded if folded.isascii() else "".join(c for c in folded if not unicodedata.combining(c))


_fold = fold_name


@functools.lru_cache(maxsize=4096)
def _base(c: str) -> str:
    """A Latin letter without its accents ("á" -> "a"); any other character as it is (a Hangul syllable, which
    decomposes into jamo, included)."""
    d = unicodedata.normalize("NFD", c)
    if len(d) > 1 and d[0].isascii() and all(unicodedata.combining(x) for x in d[1:]):
        return d[0]
    return c


def _plain(text: str) -> str:
    """``text`` without the accents of its Latin letters, one character for one, so that positions in it are
    positions in ``text``: people write "Tomas" for "Tomás" and "Ines" for "Inès"."""
    return text if text.isascii() else "".join(_base(c) for c in text)


_WORD = re.compile(r"[^\W\d_]+")
_SENTENCE_END = frozenset(".!?;:…。！？；：\n")
_LEAD_IN = " \t\r\"'“”‘’«»()[]{}*•·-–—>#0123456789"  # list numbers too: "1) Where ..."
_ROLE_DETERMINERS = ("the", "my", "your", "our")
# CJK characters (code point ranges): ideographs with their extensions and 々〆〇, kana, Hangul syllables
_CJK_RANGES = (
    (0x3005, 0x3007),
    (0x3040, 0x30FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0x20000, 0x3134F),
)
_CJK = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _CJK_RANGES)


@functools.cache
def cjk_char() -> re.Pattern[str]:
    """The pattern of one CJK character, compiled on first use: a class of this size takes ~4 ms to compile, which
    a one-shot CLI command that reads no Chinese should not pay."""
    return re.compile(f"[{_CJK}]")


@functools.cache
def _cjk_name() -> re.Pattern[str]:
    return re.compile(rf"[{_CJK}·・]+")


ROLE_ALIASES: dict[str, str] = {"用户": "user", "使用者": "user", "助手": "assistant", "助理": "assistant"}
"""The Chinese words for the roles a question refers to (an agent asks "用户的猫叫什么名字？")."""


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
    after it (group 3); the name as written, without the accents of its Latin letters, is group 2 (a name is found
    with or without them: "Tomas" names Tomás, and "Tomás" names Tomas; :func:`named_speakers` maps group 2 back). A
    name ending in ``s`` may take a bare apostrophe ("James'"); a quote after any other name is no possessive
    ("'Sam'").

    A role (:data:`ROLE_SPEAKERS`) is referred to with a determiner ("the user", "my assistant") or as a possessive
    ("user's job"); "What user name ..." does not name the user. A capitalised name, in a query that capitalises a
    word inside a sentence (not an acronym), only with a capital first letter ("What does Will do?" names the speaker
    Will, "Where will Priya move?" does not); in a query that does not ("when did caroline go ...?"), or a name stored
    in lower case (a handle, "dj_kim"), in any case.

    Chinese (:func:`is_cjk_name`): written without spaces, so a name of CJK characters is found wherever it occurs
    ("林晓在哪家公司上班？"), its possessive ``的`` as group 3 ("林晓的猫"), no determiner; a role by its Chinese
    word (:data:`ROLE_ALIASES`: "用户的猫叫什么？" names the speaker ``user``) where jieba cuts it as a word of its
    own (not 用户名 "user name", 用户体验, nor the plural 用户们). Group 2 is then the text as written:
    :func:`speaker_of_reference` maps it to the speaker. In a query holding CJK characters, a CJK character beside a
    Latin name is no word the name is inside ("Sam的猫"); a query without any is matched as it always was."""
    stored = [unicodedata.normalize("NFKC", s).strip() for s in speakers]
    # each name as stored (without accents) and case-folded: the pattern ignores case, but folding may change letters
    # ("Strauß" -> "strauss", "İpek" -> "i̇pek"), and a query writes the name as stored; names and query are matched
    # without accents ("Tomas" names Tomás, "Tomás" names Tomas), on a copy of the query of the same length
    forms = {form for s in stored for form in (_plain(s), _fold(s))} - {""}
    cjk = tuple(sorted({f for f in forms if is_cjk_name(f)}, key=lambda n: (-len(n), n)))
    names = tuple(sorted(forms - set(cjk), key=lambda n: (-len(n), n)))
    roles = {_fold(s) for s in stored} & ROLE_SPEAKERS
    aliases = tuple(sorted((a for a, role in ROLE_ALIASES.items() if role in roles), key=lambda n: (-len(n), n)))
    text = unicodedata.normalize("NFKC", query)
    has_cjk = _has_cjk(text)
    out: list[re.Match[str]] = []
    if names:
        capitalised = {_fold(s) for s in stored if s[:1].isupper()}
        cased = _writes_capitals(text)
        exact = {f.casefold() for f in stored}  # the names with their accents
        for m in _latin_pattern(names, has_cjk).finditer(_plain(text)):
            if has_cjk and not _latin_bounded(text, m):
                continue
            written = text[m.start(2) : m.end(2)]
            if written.casefold() not in exact and not written[:1].isupper():
                continue  # found only without its accents: a name then, not "¿qué tomas?" (you take) for Tomás
            if _fold(m.group(2)) in ROLE_SPEAKERS:
                if m.group(1) is not None or m.group(3) is not None:
                    out.append(m)
            elif not cased or m.group(2)[0].isupper() or _fold(m.group(2)) not in capitalised:
                out.append(m)
    if has_cjk and (cjk or aliases):
        found = list(_cjk_pattern(cjk + aliases).finditer(text))
        if aliases and any(m.group(2) in ROLE_ALIASES for m in found):
            words = _word_starts(text)
            found = [
                m
                for m in found
                if m.group(2) not in ROLE_ALIASES
                or (words.get(m.start()) == m.group(2) and text[m.end() : m.end() + 1] != "们")  # 用户们: users
            ]
        out.extend(found)
        out.sort(key=lambda m: m.start())
        kept: list[re.Match[str]] = []
        for m in out:  # a Chinese name inside a longer Latin match, or the reverse: the first wins
            if not kept or m.start() >= kept[-1].end():
                kept.append(m)
        out = kept
    return out


@functools.lru_cache(maxsize=1024)
def _latin_pattern(names: tuple[str, ...], cjk_text: bool) -> re.Pattern[str]:
    """The pattern of :func:`references` for Latin (non-CJK) names; in a text holding CJK characters without the
    outer word boundaries, which :func:`_latin_bounded` checks (a CJK character class costs milliseconds to
    compile)."""
    alternatives = "|".join(re.escape(n) for n in names)
    # not inside a word, nor after a word's apostrophe ("O'Neil" does not name Neil)
    left, right = ("", "") if cjk_text else (r"(?<!\w)", r"(?!\w)")
    return re.compile(
        rf"{left}(?<!\w['’])((?:{'|'.join(_ROLE_DETERMINERS)})\s+)?({alternatives})"
        rf"(['’]s(?!\w)|(?<=s)['’](?!\w))?{right}",
        re.IGNORECASE,
    )


@functools.lru_cache(maxsize=1024)
def _cjk_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """The pattern of :func:`references` for CJK names and role words: anywhere, with the possessive 的. Group 1
    never matches (no determiner in Chinese), so the groups mean what they mean for Latin names."""
    return re.compile(rf"((?!))?({'|'.join(re.escape(n) for n in names)})(的)?")


def _latin_bounded(text: str, m: re.Match[str]) -> bool:
    """Whether the match has no Latin word character right before or after it (a CJK character is none)."""
    before = text[m.start() - 1] if m.start() else ""
    after = text[m.end()] if m.end() < len(text) else ""
    return not (_latin_word_char(before) or _latin_word_char(after))


def _latin_word_char(c: str) -> bool:
    return bool(c) and (c.isalnum() or c == "_") and not _is_cjk(c)


def _is_cjk(c: str) -> bool:
    o = ord(c)
    return any(lo <= o <= hi for lo, hi in _CJK_RANGES)


def _has_cjk(text: str) -> bool:
    return cjk_char().search(text) is not None


def _word_starts(text: str) -> dict[int, str]:
    """Where each word of jieba's cut starts in ``text``, and the word."""
    from context_engine.storage.keyword.tokenize import jieba_tokenizer

    return {start: word for word, start, _ in jieba_tokenizer().tokenize(text)}


def is_cjk_name(name: str) -> bool:
    """Whether ``name`` is written in CJK characters only (Chinese, Japanese kana, Korean): such a language puts no
    space between words, so the name has no word boundary to match (:func:`references`)."""
    return bool(name) and _cjk_name().fullmatch(name) is not None


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
    out: set[str] = set()
    for m in references(query, names):
        written = m.group(2)
        # a role's Chinese word names the role, and a speaker stored under that very word ("用户") too
        for key in {speaker_of_reference(written), _fold(written)}:
            out.update(by_fold.get(key, ()))
    return out


# Third-person personal pronouns (English): in a question to an agent's memory that names no stored speaker, they stand
# for the user ("Where does she work now?", "What is his dog called?", "Which craft did they try?").
_PRONOUN = re.compile(
    r"(?<![\w'’])(?:he|she|him|her|his|hers|himself|herself|they|them|their|theirs|themselves)(?![\w'’])",
    re.IGNORECASE,
)


# The assistant addressed or named: a pronoun beside it is not read as the user ("What did you tell her?").
_ASSISTANT = re.compile(r"(?<![\w'’])(?:you|your|yours|yourself)(?![\w'’])|你|您", re.IGNORECASE)

# The same in Chinese, as words of their own in jieba's cut (not 他们/她们, plural; not 其他, "other").
_CJK_PRONOUNS = frozenset({"他", "她"})


def refers_to_user(query: str) -> bool:
    """Whether ``query`` refers to the user the memories belong to without naming a speaker: by the role ("the
    user", "user's", "用户的", :func:`references`) or by a third-person personal pronoun ("Where does she work?",
    "她的丈夫从事什么职业？").

    An agent asks about its user in the third person, and names them rarely: the user's own turns (role ``user``),
    not the assistant's echoes and advice, hold the answer. The caller applies this only when the query names no
    speaker of the candidates (a named speaker says whose turns more precisely: "What did Caroline tell her
    mother?"). A pronoun beside the assistant ("you", "the assistant", 你) is not read as the user: "What did you
    recommend to her?" asks for the assistant's turn; "the user" is, whatever else the query says."""
    text = unicodedata.normalize("NFKC", query)
    if references(text, ("user",)):
        return True
    if _ASSISTANT.search(text) or references(text, ("assistant",)):
        return False  # "What did you recommend to her?": the pronoun is someone the assistant spoke to or of
    return _PRONOUN.search(text) is not None or bool(cjk_pronoun_starts(text))


# An assistant's greeting or thanks at the start of its message, then the user's name: "Hi Priya, congratulations!",
# "Good morning, Priya.", "Thanks, Priya!", "Welcome back Dr. Okafor". The name: a title, then one or two words
# (apostrophes and hyphens inside: O'Brien, Anne-Marie), then punctuation, a dash, a line break or the end; never a
# word a greeting is followed by ("Hi there", "Hi again", "Thanks, I ..."). "Dear ..." opens letters the assistant
# drafts for others, so it is no greeting here.
_NAME_WORD = r"[^\W\d_]+(?:['’-][^\W\d_]+)*"
_GREETING = re.compile(
    r"^[\W_]*(?:hi|hey|hello|hiya|morning|evening|good (?:morning|afternoon|evening|night)|welcome(?: back)?|"
    r"thanks|thank you|congrats|congratulations|well done|nice one|sorry)(?: again)?,?[ \t]+"
    r"(?:(?P<title>dr|mr|mrs|ms|miss|mx|prof|professor)\.?[ \t]+)?"
    rf"(?P<name>{_NAME_WORD}(?:[ \t]+{_NAME_WORD})?)[*_]*[ \t]*(?:[,!.?;:\n\r—–-]|$)",
    re.IGNORECASE,
)
_NOT_NAMES = frozenset(
    """there again all everyone everybody folks guys friend friends buddy team you so for i mate sure okay ok yes no
    well right great good nice cool world""".split()
)


def addressed_name(text: str) -> str | None:
    """The name an assistant's message addresses the user by at its start ("Hi Priya, congratulations!" ->
    ``"Priya"``; "Thanks, Priya!", "Good morning Priya.", "Hi Anne-Marie!", "Welcome back, Dr. Okafor!" ->
    ``"Okafor"``: a title is not part of it), or ``None``.

    Agents greet their user by name while the user's own turns, stored under the role ``user``, never say it: so
    "Where does Priya work?" names no speaker, and only the assistant's greetings hold the name. Each word of the
    name is capitalised and the name is followed by punctuation, a dash, a line break or the end; a word greetings
    are followed by ("Hi there", "Hi again", "Thanks, I will", "Thanks, Sure!") is none, and "Dear ..." (a letter
    the assistant drafts for someone else) is no greeting. English greetings only. The caller still drops a name
    the user's own turns say ("my landlord Greg"): a draft may open with "Hi Greg,"."""
    m = _GREETING.match(unicodedata.normalize("NFKC", text))
    if m is None:
        return None
    name = m.group("name")
    words = name.split()
    if not all(w[:1].isupper() for w in words) or _fold(words[0]) in _NOT_NAMES:
        return None
    return " ".join(words)


def cjk_pronoun_starts(text: str) -> list[int]:
    """Where the Chinese third-person pronouns 他 and 她 stand in ``text`` as words of their own (jieba's cut: not
    他们, 她们, 其他), in order."""
    if not any(c in text for c in _CJK_PRONOUNS):
        return []
    return sorted(at for at, word in _word_starts(text).items() if word in _CJK_PRONOUNS)


def message_has_content(abstract: str, speaker: str, names: Iterable[str], *, as_evidence: bool = False) -> bool:
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

    ``as_evidence``: judged as a possible answer (``match_quality``, where a message that states nothing is no
    evidence at all), so only what surely states nothing is left out: a question about oneself states what it tells
    ("Dev and I have our 10th wedding anniversary on 14 October, any ideas?",
    ``states_content(first_person_questions=True)``), and the assistant's statements count beside its question ("Done:
    I booked a table for two at Kiln & Clover, 7pm Friday. Want me to add it to your calendar?"). The ranking leaves
    it off (such messages rank below the statements; measured, eval/README.md).

    Memoised: a conversation's candidates recur across its queries, and tokenising them is the cost (~20 us each)."""
    return _has_content(abstract, speaker, frozenset(names), as_evidence)


@functools.lru_cache(maxsize=65_536)
def _has_content(abstract: str, speaker: str, names: frozenset[str], as_evidence: bool = False) -> bool:
    text = abstract[len(speaker) + 2 :] if abstract.startswith(f"{speaker}: ") else abstract
    if speaker == ASSISTANT and not as_evidence and asks_something(text):
        return False
    return states_content(text, names, first_person_questions=as_evidence)
