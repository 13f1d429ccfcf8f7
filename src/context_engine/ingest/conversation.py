"""Role-aware indexing of conversation messages (issue 25): what each message is indexed with.

A message of a conversation is often unreadable alone ("Yes, I went there yesterday"), so ``add_messages`` indexes it
with neighbouring messages as *context* (embedding input and BM25 text, never shown; ``SourceDoc.context``). Context
must not let a message outrank the one that actually says a thing. The rules, for any conversation:

* **A message that carries no new content is indexed alone.** Acknowledgements ("Got it, thanks for sharing.",
  "Noted!") and questions back ("How long have you been there?") say nothing the conversation did not already say:
  their content words, minus those of the previous message, the speakers' names and a short list of phatic words
  (:data:`PHATIC_WORDS`), leave nothing (a question back may keep :data:`QUESTION_BACK_MAX_NEW` words). Indexed with
  the previous message they would carry the fact's words on a shorter text and win; indexed alone they match only
  what they say. They are stored and readable like every message.
  A message that answers a question ("Yes!") is read with that question and keeps its context.
* **An assistant message never borrows the user's words.** It is indexed with no context: what it adds is its own.
* **Every other message** is indexed with the ``memory.context_messages`` messages before it that carry content
  or ask something, from the other party (an acknowledgement in between is skipped; the walk back stops at the
  speaker's own previous message; an assistant's message is context only when it asks something) (what a reply answers
  is usually in the turn before it, the finding of issue 11) **and** with the assistant's reply that follows it in
  the same batch when that reply carries content: "I switched to rooibos" is found by "caffeine-free alternative to
  coffee" in the reply, and the user's turn, not the reply, owns the match.

Content words are numbers and the BM25 tokens of :class:`~context_engine.storage.keyword.tokenize.KeywordTokenizer` (stopwords
dropped, stemmed), so "thanks"/"thank" and "sharing"/"share" are one word.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from context_engine.storage.keyword.tokenize import KeywordTokenizer

__all__ = ["FUNCTION_WORDS", "PHATIC_WORDS", "QUESTION_BACK_MAX_NEW", "Line", "carries_content", "index_contexts"]

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

#: Function words the BM25 stopword list keeps (pronouns, auxiliaries, question words): never content.
FUNCTION_WORDS: frozenset[str] = frozenset(
    """
    i me my mine myself you your yours yourself we us our ours he him his she her hers they them their theirs it its
    this that these those there here what which who whom whose when where why how am is are was were be been being
    have has had having do does did doing can could would should shall may might must will wo ca n't not
    so too very just also then now all any some more most about
    """.split()
)

#: Words that answer a question on their own ("Yes.", "Never.").
ANSWER_WORDS: frozenset[str] = frozenset(
    "yes no yeah yep nope nah never always sometimes often maybe definitely certainly absolutely sure".split()
)

#: A question back ("What happened then?") counts as carrying no new content up to this many new content words.
QUESTION_BACK_MAX_NEW = 2

_TOKENIZER = KeywordTokenizer(stem=True, stopwords=True, split_identifiers=False)
_PHATIC_LOCK = threading.Lock()
_PHATIC_STEMS: frozenset[str] | None = None
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


@dataclass(frozen=True, slots=True)
class Line:
    """One message as the indexer sees it: ``role`` (``user``, ``assistant``, ``system``, ``tool``), the speaker
    shown in its L0 (the role when none was given), and its text (whitespace-collapsed)."""

    role: str
    speaker: str
    text: str

    def as_context(self, max_chars: int) -> str:
        """``speaker: text`` cut at ``max_chars`` characters of text: one line of another message's context."""
        return f"{self.speaker}: {self.text[:max_chars]}"


def _phatic() -> frozenset[str]:
    global _PHATIC_STEMS
    with _PHATIC_LOCK:
        if _PHATIC_STEMS is None:
            _PHATIC_STEMS = frozenset(t for w in PHATIC_WORDS | FUNCTION_WORDS for t in _TOKENIZER(w))
        return _PHATIC_STEMS


def _content(text: str) -> set[str]:
    """BM25 tokens plus every number (the tokenizer drops one-character tokens: "3 tickets" vs "2 tickets")."""
    return set(_TOKENIZER(text)) | set(_NUMBER.findall(text))


def _is_question(text: str | None) -> bool:
    """``text`` ends with a question mark (its last sentence asks something)."""
    return bool(text) and text.rstrip().endswith(("?", "？"))  # type: ignore[union-attr]


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
    return not (_is_question(text) and len(new) <= QUESTION_BACK_MAX_NEW)


def _informative(text: str, previous: str | None, names: Iterable[str]) -> bool:
    """:func:`carries_content`, or an answer to a question ("Yes.", "Twice, in May"), read with that question
    however short it is; a bare acknowledgement after a question ("Got it.") stays content-free."""
    if carries_content(text, previous, names):
        return True
    words = set(re.findall(r"\w+", text.casefold()))
    return _is_question(previous) and bool(words & ANSWER_WORDS or _NUMBER.search(text))


def _answered(history: Sequence[Line], informative: Sequence[bool], at: int, k: int) -> list[Line]:
    """Up to ``k`` messages before ``history[at]`` that it may answer, oldest first: walking back, an
    acknowledgement in between ("Noted!") is skipped, and the walk stops at the speaker's own previous message
    (what one answers is what the other party said, not one's own earlier, usually unrelated, statement); an
    assistant's message counts only when it asks something."""
    speaker = history[at].speaker
    found: list[Line] = []
    for i in range(at - 1, -1, -1):
        if len(found) == k:
            break
        m = history[i]
        asks = _is_question(m.text)
        # an assistant's statement is not what a later turn answers (its question is); nor is an acknowledgement
        if not asks and (m.role == "assistant" or not informative[i]):
            continue
        if m.speaker == speaker:
            break
        found.append(m)
    return found[::-1]


def index_contexts(tail: Sequence[Line], batch: Sequence[Line], context_messages: int, max_chars: int) -> list[str]:
    """The context each message of ``batch`` is indexed with (module docstring).

    Args:
        tail: the session's last stored messages, oldest first (a few more than ``context_messages``, so that an
            acknowledgement among them can be skipped).
        batch: the messages being added, in conversation order.
        context_messages: preceding messages taken as context (``memory.context_messages``; 0 switches context off).
        max_chars: characters of each context message (``memory.context_max_chars``; 0 switches context off).

    Returns:
        One context string per batch message (``""``: indexed alone), lines ``speaker: text`` joined by newlines.
    """
    if context_messages == 0 or max_chars == 0:
        return [""] * len(batch)
    names = {line.speaker for line in (*tail, *batch)} | {line.role for line in (*tail, *batch)}
    history = list(tail)
    history.extend(batch)
    informative = [
        _informative(line.text, history[i - 1].text if i else None, names) for i, line in enumerate(history)
    ]
    out: list[str] = []
    offset = len(tail)
    for j, line in enumerate(batch):
        at = offset + j
        if line.role == "assistant" or not informative[at]:
            out.append("")
            continue
        lines = [m.as_context(max_chars) for m in _answered(history, informative, at, context_messages)]
        if j + 1 < len(batch) and batch[j + 1].role == "assistant" and informative[at + 1]:
            lines.append(batch[j + 1].as_context(max_chars))
        out.append("\n".join(lines))
    return out
