"""Where conversation messages live and how their L0 names the speaker (issue 25): pure rules on a URI and a text.

``add_messages`` stores a message under ``ctx://user/<space>/memories/sessions/<conversation_id>/`` with the L0
``"<speaker>: <text>"`` (``ingest/memory.py``; the role when no speaker was given). The BM25 index, the first-stage
retriever and the match-quality rating read the speaker back with :func:`message_speaker`; it sits here, with the
data, so a search does not go down to the storage layer to split a string.
"""

from __future__ import annotations

__all__ = ["SESSION_SEGMENT", "message_speaker"]

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
