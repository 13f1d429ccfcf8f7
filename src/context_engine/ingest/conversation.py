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
* **A message whose role is not ``user`` never borrows another message's words** but one: an assistant, system or
  tool message is indexed with no context: what it adds is its own. The exception is the assistant's report of what
  it did for the user ("I've booked the 06:40 to Bristol, coach C, seat 42", "Done: your plan is cancelled";
  :func:`~context_engine.schema.conversation.reports_action`): it is indexed with the user's request it carries
  out (past tool calls and results in between), and the request is not indexed with it: the report is the record
  of what was done, the request only of what was wanted, and a question about the booking asks in the request's
  words ("Which flight is Lena taking to Oslo?"). (A system prompt repeated mid-conversation or a tool
  result indexed with the user's turn before it carried the user's words on another text and outranked the user's
  statement: "What is the name of her partner?" found the system prompt indexed with "my partner Wiremu ...".)
* **A user's message** is indexed with the ``memory.context_messages`` messages before it that it may answer:
  another speaker's ``user`` message that carries content or asks something, or an assistant's question (an
  acknowledgement, an assistant's statement or tool call, a system or tool message in between is skipped; the walk
  back stops at the speaker's own previous message) (what a reply answers is usually in the turn before it, the
  finding of issue 11), or, in a burst (the speaker sent several messages in a row, as chat apps send them: no
  other message in between but the speaker's own content-free ones), the speaker's previous message, which it goes
  on from ("Quick update on my mum." / "She had a fall at home last week and broke her hip." / "The surgeons at
  Ninewells replaced it on Tuesday."; only in a dialogue, a session whose messages at hand have more than one
  speaker, and for a message with :data:`BURST_MIN_CONTENT_WORDS` content words of its own: not "嗯嗯"),
  **and** with the assistant's reply that follows it in the same batch when that reply carries content and is no
  report of an action (past the
  assistant's acknowledgements, its tool calls, tool results and system messages in between: "Noted!" then the
  reply, or a call, its result, then the reply; the next user message ends the search): "I switched to rooibos" is
  found by "caffeine-free alternative to coffee" in the reply, and the user's turn, not the reply, owns the match.
* **A correction is read with what it corrects.** A user's message that says it corrects something ("Oops, I mean
  the 3rd of May, same time.", "Wait, no, it's room 41 now."; :func:`~context_engine.schema.conversation.
  corrects_earlier`) is indexed with the speaker's own last message that carries content and shares a content
  word with it, up to :data:`~context_engine.schema.conversation.CORRECTION_WINDOW` messages back past the
  assistant's replies ("My dentist appointment is on the 2nd of May at 9 am." / "Noted."), before what it answers:
  alone it says only the new value, and the question asks with the old statement's words.

Whether a message carries content is judged against the conversational message before it (a user's or an
assistant's, not a tool call, a tool result or a system prompt: machine text the user never said). What counts as
content is :mod:`context_engine.storage.keyword.content_words` (BM25 tokens and numbers, minus phatic and function
words).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from context_engine.schema.conversation import CORRECTION_WINDOW, corrects_earlier, reports_action
from context_engine.storage.keyword.content_words import (
    FUNCTION_WORDS,
    NUMBER,
    PHATIC_WORDS,
    QUESTION_BACK_MAX_NEW,
    carries_content,
    content_tokens,
    is_question,
    shares_content,
)

__all__ = [
    "BURST_MIN_CONTENT_WORDS",
    "FUNCTION_WORDS",
    "PHATIC_WORDS",
    "QUESTION_BACK_MAX_NEW",
    "Line",
    "carries_content",
    "index_contexts",
]

#: Words that answer a question on their own ("Yes.", "Never."; Chinese "是的。", "对，" "没有。": a run of Chinese
#: characters between punctuation is one word here, and 是/的/对 are stopwords, so such an answer has no content word).
ANSWER_WORDS: frozenset[str] = frozenset(
    "yes no yeah yep nope nah never always sometimes often maybe definitely certainly absolutely sure".split()
    + "是 是的 是啊 对 对的 对啊 没错 不是 没有 有 有的 嗯 嗯嗯 不 没 会 不会".split()
    + "当然 一直 有时 有时候 经常 偶尔 从不 从来没有".split()
)


#: Content words (:func:`~context_engine.storage.keyword.content_words.content_tokens`) a message of a burst needs of
#: its own to be read with the speaker's previous message, or to be that message: "Cost 165 in the end." (3) has
#: them, "哈哈" or "Anyway" (1) not; a question ("Remember the cello?") always counts.
BURST_MIN_CONTENT_WORDS = 2


@dataclass(frozen=True, slots=True)
class Line:
    """One message as the indexer sees it: ``role`` (``user``, ``assistant``, ``system``, ``tool``), the speaker
    shown in its L0 (the role when none was given), its text (whitespace-collapsed), and ``tool_call``: an
    assistant's message that calls tools (``tool_calls`` in its metadata; schema/memory.py ``message_fields``)."""

    role: str
    speaker: str
    text: str
    tool_call: bool = False

    @property
    def conversational(self) -> bool:
        """Said by the user or the assistant to the other: not a system prompt, a tool result or a tool call."""
        return self.role in ("user", "assistant") and not self.tool_call

    def as_context(self, max_chars: int) -> str:
        """``speaker: text`` cut at ``max_chars`` characters of text: one line of another message's context."""
        return f"{self.speaker}: {self.text[:max_chars]}"


def _informative(text: str, previous: str | None, names: Iterable[str]) -> bool:
    """:func:`carries_content`, or an answer to a question ("Yes.", "Twice, in May"), read with that question
    however short it is; a bare acknowledgement after a question ("Got it.") stays content-free."""
    if carries_content(text, previous, names):
        return True
    words = set(re.findall(r"\w+", text.casefold()))
    return is_question(previous) and bool(words & ANSWER_WORDS or NUMBER.search(text))


def _answered(
    history: Sequence[Line],
    informative: Sequence[bool],
    at: int,
    k: int,
    substantive: Callable[[int], bool] | None,
) -> list[Line]:
    """Up to ``k`` messages before ``history[at]`` that it may answer, oldest first: walking back, an
    acknowledgement in between ("Noted!"), a system or tool message and an assistant's tool call are skipped, and
    the walk stops at the speaker's own previous message (what one answers is what the other party said, not one's
    own earlier, usually unrelated, statement); an assistant's message counts only when it asks something. In a
    burst (every message between is the speaker's own, and content-free: "Ok"), that own message is taken (the only
    one): the message goes on from it ("She had a fall at home last week" after "Quick update on my mum."). Only
    when ``substantive`` is given (a dialogue, :func:`index_contexts`) and says both messages have something of
    their own; an own filler (``substantive`` false: "嗯嗯") inside a burst is passed over."""
    speaker = history[at].speaker
    found: list[Line] = []
    burst = substantive is not None  # only the speaker's own messages so far: a burst, as chat apps send them
    for i in range(at - 1, -1, -1):
        if len(found) == k:
            break
        m = history[i]
        own = m.role == "user" and m.speaker == speaker
        if not m.conversational:  # nothing the user answers: a prompt, a tool's output, the call that asked for it
            burst = False
            continue
        asks = is_question(m.text)
        # an assistant's statement is not what a later turn answers (its question is); nor is an acknowledgement
        if not asks and (m.role != "user" or not informative[i]):
            burst = burst and own
            continue
        if m.speaker == speaker:
            if burst and own and substantive is not None and substantive(at):
                if not substantive(i):
                    continue  # the speaker's own filler inside a burst: passed over, as an acknowledgement is
                found.append(m)  # the message goes on from the speaker's own previous one
            break
        burst = False
        found.append(m)
    return found[::-1]


def _corrected(history: Sequence[Line], informative: Sequence[bool], at: int, names: Iterable[str]) -> Line | None:
    """The message a correction (``history[at]``, :func:`~context_engine.schema.conversation.corrects_earlier`)
    corrects: the speaker's own last message that carries content and shares a content word with it
    (:func:`~context_engine.storage.keyword.content_words.shares_content`: "locker code", "May"), at most
    :data:`~context_engine.schema.conversation.CORRECTION_WINDOW` messages back (the other party's replies in
    between passed over); ``None`` when there is none (a correction that says what it corrects of an older message,
    "I ride about 12 km to work, so let's make that 14 km", is read alone)."""
    line = history[at]
    for i in range(at - 1, max(-1, at - 1 - CORRECTION_WINDOW), -1):
        m = history[i]
        if (
            m.role == "user"
            and m.speaker == line.speaker
            and m.conversational
            and informative[i]
            and shares_content(line.text, m.text, names)
        ):
            return m
    return None


def _request(history: Sequence[Line], at: int) -> Line | None:
    """The user's message that the assistant's report ``history[at]`` carries out: walking back past the assistant's
    tool calls, tool results and system messages, the first user message; ``None`` when another conversational
    message of the assistant comes first (the report answers that, not a request)."""
    for i in range(at - 1, -1, -1):
        m = history[i]
        if m.role == "user":
            return m
        if m.conversational:
            return None
    return None


def _reply(batch: Sequence[Line], informative: Sequence[bool], offset: int, j: int) -> Line | None:
    """The assistant's reply to ``batch[j]`` that carries content: the next assistant message in the batch that is
    not a tool call, past the assistant's acknowledgements ("Noted!" then "Rooibos is caffeine-free ..."), its tool
    calls, tool results and system messages in between, before the next user message; ``None`` when there is
    none."""
    for k in range(j + 1, len(batch)):
        line = batch[k]
        if line.role == "user":
            return None
        if line.conversational and informative[offset + k]:
            return line
    return None


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
    informative = []
    previous: str | None = None  # the last conversational message's text: a tool's output is no one's words
    for line in history:
        informative.append(_informative(line.text, previous, names))
        if line.conversational:
            previous = line.text
    # A burst needs another party in the session (a log of one speaker's statements alone has no turns to tell a
    # burst by), and messages that say something of their own: a filler the content check lets through ("嗯嗯",
    # "Anyway") would carry the previous message's fact on a shorter text; it is passed over in the walk instead.
    dialogue = len({m.speaker for m in history if m.conversational}) > 1
    said: dict[int, bool] = {}  # tokenised only for the messages a burst reaches (the ingest's hot path)

    def substantive(i: int) -> bool:
        if i not in said:
            text = history[i].text
            said[i] = is_question(text) or len(content_tokens(text, names)) >= BURST_MIN_CONTENT_WORDS
        return said[i]

    out: list[str] = []
    offset = len(tail)
    for j, line in enumerate(batch):
        at = offset + j
        if line.role == "assistant" and line.conversational and reports_action(line.text):
            request = _request(history, at)
            out.append(request.as_context(max_chars) if request is not None else "")
            continue
        if line.role != "user" or not informative[at]:
            out.append("")
            continue
        answered = _answered(history, informative, at, context_messages, substantive if dialogue else None)
        if corrects_earlier(line.text):
            corrected = _corrected(history, informative, at, names)
            if corrected is not None and corrected not in answered:
                answered.insert(0, corrected)
        lines = [m.as_context(max_chars) for m in answered]
        reply = _reply(batch, informative, offset, j)
        if reply is not None and not (reply.role == "assistant" and reports_action(reply.text)):
            lines.append(reply.as_context(max_chars))
        out.append("\n".join(lines))
    return out
