"""Which words of a text are content (issue 25): the rule that tells an acknowledgement ("Noted, thanks!") or a
question back ("How long have you been there?") from a message that states something.

It lives with the keyword tokenizer because it is a rule about BM25 tokens: the conversation indexer
(:mod:`context_engine.ingest.conversation`) uses it to decide what a message is indexed with, the BM25 index
(:mod:`context_engine.storage.keyword.bm25_index`) to leave content-free messages out of its statistics, and the
first-stage retriever (:mod:`context_engine.retrieval.speakers`) to demote them.

Content words are numbers and the BM25 tokens of :class:`~context_engine.storage.keyword.tokenize.KeywordTokenizer`
(stopwords dropped, stemmed), so "thanks"/"thank" and "sharing"/"share" are one word.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable

# The speaker rule moved to schema/conversation.py (a search splits no string in storage); still importable from
# here for retrieval/match_quality.py's import, until that file names the new home.
from context_engine.schema.conversation import SESSION_SEGMENT, message_speaker
from context_engine.storage.keyword.tokenize import KeywordTokenizer

__all__ = [
    "FIRST_PERSON",
    "FUNCTION_WORDS",
    "FUNCTION_WORDS_ZH",
    "NUMBER",
    "PHATIC_WORDS",
    "QUESTION_BACK_MAX_NEW",
    "SESSION_SEGMENT",
    "asks_something",
    "carries_content",
    "content_tokens",
    "is_question",
    "states_content",
    "message_speaker",
]

#: Words that acknowledge, thank, greet or react without stating anything (English; stemmed before use).
PHATIC_WORDS: frozenset[str] = frozenset(
    """
    thanks thank thx ty got gotcha noted note good great know knowing sharing share shared sound sounds cool wow awesome
    nice ok okay sure glad hear hearing love lovely happy appreciate appreciated understood understand perfect
    absolutely definitely interesting amazing fantastic congrats congratulations welcome right yeah yep yes hey hi
    hello bye goodbye remember remembered keep mind let letting tell telling told info information update updated hope
    fun exciting excited totally indeed alright brilliant true agree agreed cheers wonderful incredible impressive
    enjoy enjoyed really much lot anything else help helpful glad pleasure wish luck best care soon talk chat later
    oh ah aw haha lol hmm well thing things stuff way ll ve re sounds like great will make makes sense
    """.split()
)

#: Chinese function words the stopword list keeps (pronouns, question words, particles, auxiliaries): never content.
FUNCTION_WORDS_ZH: frozenset[str] = frozenset(
    """
    我 你 您 他 她 它 我们 你们 他们 她们 咱们 自己 这 那 这个 那个
    这些 那些 这里 那里 这儿 那儿 这样 那样 什么 怎么 怎么样 怎样 哪
    哪里 哪儿 哪个 谁 为什么 为啥 多少 几 吗 呢 吧 会 我会 能 要 想
    还 很 太 真 又 再 才 刚 刚刚 已经 一直 一下 一些 有 没有 事 些
    最近 现在
    """.split()
)

#: Function words the BM25 stopword list keeps (pronouns, auxiliaries, question words): never content.
FUNCTION_WORDS: frozenset[str] = frozenset(
    """
    i me my mine myself you your yours yourself we us our ours he him his she her hers they them their theirs it its
    this that these those there here what which who whom whose when where why how am is are was were be been being
    have has had having do does did doing can could would should shall may might must will wo ca n't not
    so too very just also then now all any some more most about
    """.split()
)

#: A speaker speaking of themselves: English first-person words (apostrophes straight or curly; lower case or a
#: capital first letter, so "US" and "ME" are no pronouns, nor "I-95"), Chinese 我 / 我们.
FIRST_PERSON = re.compile(
    r"(?<![\w'’-])(?:I(?:['’](?:m|ve|d|ll))?|[Mm](?:e|y|ine|yself)|[Ww]e(?:['’](?:re|ve|d|ll))?|[Uu]s|[Oo]urs?"
    r"|[Oo]urselves)(?![\w'’-])|我"
)

#: A question back ("What happened then?") counts as carrying no new content up to this many new content words.
QUESTION_BACK_MAX_NEW = 2

_TOKENIZER = KeywordTokenizer(stem=True, stopwords=True, split_identifiers=False)
_PHATIC_LOCK = threading.Lock()
_PHATIC_STEMS: frozenset[str] | None = None
NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
# A Chinese question typed without its mark: it ends with 吗 or 如何, or 怎么样 not after 不 ("不怎么样" judges); with
# 呢 only when short ("你呢", "那他呢") or asking with a question word ("你去哪儿呢"), not "还没决定呢"
_ZH_QUESTION_END = re.compile(r"(?:吗|如何|(?<!不)怎么样)[~～!！]*$")
_ZH_QUESTION_WORD = re.compile(r"谁|什么|哪|怎么|几|多少|为什么|为啥|是不是|有没有")
_ZH_CLAUSE_END = re.compile(r"[。！!？?；;，,、\s]")
# A sentence ends at . ! ? followed by white space, or at a full-width 。！？ (Chinese puts no space after it).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*")


def _phatic() -> frozenset[str]:
    global _PHATIC_STEMS
    with _PHATIC_LOCK:
        if _PHATIC_STEMS is None:
            words = PHATIC_WORDS | FUNCTION_WORDS | FUNCTION_WORDS_ZH
            _PHATIC_STEMS = frozenset(t for w in words for t in _TOKENIZER(w))
        return _PHATIC_STEMS


def _content(text: str) -> set[str]:
    """BM25 tokens plus every number (the tokenizer drops one-character tokens: "3 tickets" vs "2 tickets")."""
    return set(_TOKENIZER(text)) | set(NUMBER.findall(text))


def is_question(text: str | None) -> bool:
    """``text`` ends with a question mark (its last sentence asks something), or, typed without the mark, with a
    Chinese question particle or question word: 吗, 如何, 怎么样 not after 不 ("你喜欢那里吗", "小猫适应得怎么样"; a
    tilde or an exclamation after it allowed; "没什么", "味道不怎么样" state), or 呢 in a short sentence or one with a
    question word ("你呢", "你打算去哪儿呢"; "还没决定呢" states)."""
    if not text:
        return False
    end = text.rstrip()
    if end.endswith(("?", "？")) or _ZH_QUESTION_END.search(end) is not None:
        return True
    end = end.rstrip("~～")
    if not end.endswith("呢"):
        return False
    clause = _ZH_CLAUSE_END.split(end[-40:])[-1]
    return len(clause) <= 4 or _ZH_QUESTION_WORD.search(clause) is not None


def asks_something(text: str) -> bool:
    """Whether any sentence of ``text`` is a question (:func:`is_question`; sentences end with ``.``, ``!`` or
    ``?``, ASCII or full-width)."""
    return any(is_question(s) for s in _SENTENCE_END.split(text.strip()) if s.strip())


def content_tokens(text: str, names: Iterable[str] = (), *, phatic: bool = True) -> set[str]:
    """The content words of ``text``: BM25 tokens and numbers, minus function words, the tokens of ``names`` and,
    with ``phatic``, the phatic words (:data:`PHATIC_WORDS`: "love", "enjoy", "make" are content in a question)."""
    known = {t for name in names for t in _TOKENIZER(name)}
    return _content(text) - known - (_phatic() if phatic else _function())


def shares_content(a: str, b: str, names: Iterable[str] = ()) -> bool:
    """Whether texts ``a`` and ``b`` have a content word in common (:func:`content_tokens`, ``names`` left out):
    "Oops, typo: the locker code is 4417." and "My locker code at the gym is 4471." do."""
    return not content_tokens(a, names).isdisjoint(content_tokens(b, names))


@functools.cache
def _function() -> frozenset[str]:
    """The stems of the function words (English and Chinese)."""
    return frozenset(t for w in FUNCTION_WORDS | FUNCTION_WORDS_ZH for t in _TOKENIZER(w))


def carries_content(text: str, previous: str | None, names: Iterable[str] = ()) -> bool:
    """Whether a message says something the previous message and politeness do not (module docstring).

    Args:
        text: the message's text.
        previous: the text of the message before it in the session (``None`` for the first).
        names: speakers' names (and roles) of the conversation: a vocative "Caroline!" is not content.

    Returns:
        ``False`` for an acknowledgement (no new content word) or a question back (at most
        :data:`QUESTION_BACK_MAX_NEW` new content words); ``True`` otherwise. A message with no Latin or CJK word
        at all ("👍") carries none.
    """
    tokens = _content(text)
    known = _content(previous) if previous else set()
    for name in names:
        known.update(_TOKENIZER(name))
    new = tokens - known - _phatic()
    if not new:
        return False
    return not (is_question(text) and len(new) <= QUESTION_BACK_MAX_NEW)


def states_content(text: str, names: Iterable[str] = (), *, first_person_questions: bool = False) -> bool:
    """Whether a message, read alone, *states* something. A message without a question: any content word
    (:func:`carries_content` with no previous message). A message with a question (a sentence ending with ``?``):
    its questions do not count, a statement (a sentence ending otherwise than with ``!``) states something with one
    content word, an exclamation only with more than :data:`QUESTION_BACK_MAX_NEW`; phatic and function words and
    ``names`` are never content.

    A question asks, it holds no fact, and the exclamation beside it is usually a reaction: "How lucky! Did you get a
    photo?" and "What a milestone! Where are you thinking of holding it?" state nothing, however many words their
    questions repeat from the turn before, while "I moved to Berlin. You?" and "Yes! I adopted Biscuit. Want to see
    a photo?" state a fact. Used where the previous message is not at hand (a search reading a stored message),
    which is when :func:`carries_content` cannot subtract what a question back repeats.

    ``first_person_questions``: a question that speaks of its speaker (a first-person word, :data:`FIRST_PERSON`)
    with more than :data:`QUESTION_BACK_MAX_NEW` content words states them: "Dev and I have our 10th wedding
    anniversary on 14 October, any ideas?", "I'm lactose intolerant, can you suggest a recipe?" (a request that
    tells a fact), not "Hey, got a minute?" nor "Did I tell you about the trip?".
    """
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s.strip()]
    if not any(is_question(s) for s in sentences):
        return carries_content(text, None, names)
    known = set(_phatic())
    for name in names:
        known.update(_TOKENIZER(name))
    exclaimed: set[str] = set()
    for sentence in sentences:
        if is_question(sentence):
            if (
                first_person_questions
                and FIRST_PERSON.search(sentence) is not None
                and len(_content(sentence) - known) > QUESTION_BACK_MAX_NEW
            ):
                return True
            continue
        words = _content(sentence) - known
        if not sentence.rstrip().endswith(("!", "！")):
            if words:
                return True
        else:
            exclaimed |= words
    return len(exclaimed) > QUESTION_BACK_MAX_NEW
