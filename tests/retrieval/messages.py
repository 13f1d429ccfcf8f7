"""Conversation-message hits for the ordering rules' unit tests (retrieval/replies.py): one session's messages by
sequence number, and the ``roles`` reader the rules call."""

from __future__ import annotations

from collections.abc import Callable

from context_engine.schema.hits import NodeHit


def message_hit(space: str, seq: int, score: float, abstract: str) -> NodeHit:
    """Message ``seq`` of session ``s1`` of user ``space``, scored ``score``, with L0 ``abstract``."""
    return NodeHit(
        uri=f"ctx://user/{space}/memories/sessions/s1/{seq:06d}.md",
        owner_space=f"user:{space}",
        context_type="memory",
        score=score,
        abstract=abstract,
    )


def roles_of(*users: int) -> Callable[[list[str]], dict[str, str]]:
    """A ``roles`` reader: the messages numbered ``users`` were stored with the role ``user``, the others
    ``assistant``."""

    def roles(uris: list[str]) -> dict[str, str]:
        return {u: "user" if int(u.rsplit("/", 1)[1][:6]) in users else "assistant" for u in uris}

    return roles
