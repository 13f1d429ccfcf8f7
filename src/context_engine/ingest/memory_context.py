"""What a memory is indexed with besides its L0 (issue 25; docs/memories.md): the context a message answers and,
for a memory longer than its L0, its whole text (at most :data:`INDEXED_TEXT_MAX_CHARS` characters). Used by the
memory writer (``ingest/memory.py``) when it writes and updates a memory."""

from __future__ import annotations

from context_engine.ingest.parse import collapse_whitespace
from context_engine.ingest.summarize import truncate_text

__all__ = ["INDEXED_TEXT_MAX_CHARS", "indexed_context", "own_text_removed"]


#: Characters of a memory's own text indexed with its L0 when the L0 is a cut of it (:func:`indexed_context`): the
#: embedding's time and memory grow with its input (a 100,000-character message took 4 s and 0.8 GB, a 1 MB text
#: about ten times more, enough for one request to exhaust a small server), so a longer text is indexed by its first
#: 16,384 characters, cut on a sentence or word boundary (:func:`~context_engine.ingest.summarize.truncate_text`). The
#: whole text stays the memory's content (L2), and a long memory that is not a message is also indexed by its chunks.
INDEXED_TEXT_MAX_CHARS = 16_384


def _own_line(speaker: str, text: str) -> str:
    body = collapse_whitespace(text[: 2 * INDEXED_TEXT_MAX_CHARS])  # whitespace runs can only shorten the prefix
    if len(body) > INDEXED_TEXT_MAX_CHARS:
        body = truncate_text(body, INDEXED_TEXT_MAX_CHARS)
    return f"{speaker}: {body}" if speaker else body


def indexed_context(context: str, speaker: str, text: str, abstract: str) -> str:
    """The context a memory is indexed with: ``context`` (what a message answers, ``ingest/conversation.py``) and,
    when the L0 ``abstract`` is a cut of ``text``, the whole text as one more line (``speaker: text`` for a message),
    at most :data:`INDEXED_TEXT_MAX_CHARS` characters of it.

    A memory is found by all it says, while its L0 stays within ``memory.l0_max_chars`` (DESIGN §1: 256) for
    display: the context is part of the embedding input and of the BM25 text of the level-0 record, never shown.
    On locomo_dev (turns up to ~700 characters) this is R@10 0.7444 -> 0.7503 at the 256-character L0.
    """
    if collapse_whitespace(text) in abstract:
        return context
    return "\n".join(x for x in (context, _own_line(speaker, text)) if x)


def own_text_removed(context: str, speaker: str, text: str) -> str:
    """``context`` without the whole-text line :func:`indexed_context` added for ``text`` (an update re-adds the
    new text's line); also the uncut line a release before :data:`INDEXED_TEXT_MAX_CHARS` stored."""
    lines = context.split("\n") if context else []
    if not lines:
        return context
    body = collapse_whitespace(text)
    owns = {_own_line(speaker, text), f"{speaker}: {body}" if speaker else body}
    return "\n".join(lines[:-1]) if lines[-1] in owns else context
