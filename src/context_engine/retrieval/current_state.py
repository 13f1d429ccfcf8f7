"""Questions about the current state prefer the latest memory (issue 25, "updated" facts; seed 001 §10).

A user's facts change ("I live in Leeds" ... two months later "We moved to Lisbon"). A question that asks for the
state *now* ("Where does Sam live now?", "What does the user drink these days?", "Is she still vegetarian?") is
answered by the latest statement, and both statements match its words. :func:`asks_current_state` recognises such
a question by its wording (English and Chinese markers, :data:`CURRENT_MARKERS`); :func:`prefer_latest` then adds
up to ``boost`` to the final score of the candidate memories in proportion to how late they occurred among the
candidates (``occurred_at``, else ``updated_at``; the oldest gets 0, the newest ``boost``). Other questions are
unchanged: recency in general is the ``memory.recency_*`` setting, off by default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from context_engine.retrieval.speakers import is_role, speaker_of_reference
from context_engine.schema.conversation import message_speaker
from context_engine.schema.hits import NodeHit

__all__ = ["CURRENT_MARKERS", "SUPERSEDE_CANDIDATES", "asks_current_state", "prefer_latest", "supersede"]

#: The best memories :func:`supersede` compares pairwise.
SUPERSEDE_CANDIDATES = 5

#: Words and phrases that ask for the present state of something that may have changed.
CURRENT_MARKERS: tuple[str, ...] = (
    "now",
    "currently",
    "current",
    "these days",
    "nowadays",
    "at the moment",
    "at present",
    "anymore",
    "any more",
    "still",
    "latest",
    "most recent",
    "most recently",
    "end up",
    "ended up",
    "in the end",
    "today",
    "现在",
    "目前",
    "如今",
    "最近",
    "最新",
    "还在",
    "仍然",
    "依然",
    "至今",
    "当前",
    "眼下",
    "最终",
)
_PATTERN = re.compile(
    "|".join(rf"(?<!\w){re.escape(m)}(?!\w)" if m.isascii() else re.escape(m) for m in CURRENT_MARKERS),
    re.IGNORECASE,
)


def asks_current_state(query: str) -> bool:
    """Whether ``query`` asks for the present state (one of :data:`CURRENT_MARKERS`, whole words for English)."""
    return _PATTERN.search(query) is not None


def prefer_latest(query: str, hits: Sequence[NodeHit], boost: float) -> bool:
    """Add ``boost * (t - t_min) / (t_max - t_min)`` to the score of each memory hit of ``hits`` with a time, when
    ``query`` asks for the current state (module docstring). Scores are changed in place, capped at 1.

    Returns:
        Whether any score changed (the caller then re-sorts).
    """
    if boost <= 0.0 or not asks_current_state(query):
        return False
    timed = [(h, h.occurred_at or h.updated_at) for h in hits if h.context_type == "memory" and not h.is_dir]
    times = [t.timestamp() for _, t in timed if t is not None]
    if len(times) < 2 or max(times) == min(times):
        return False
    low, span = min(times), max(times) - min(times)
    for h, t in timed:
        if t is not None:
            h.score = round(min(1.0, h.score + boost * (t.timestamp() - low) / span), 6)
    return True


def _may_supersede(newer: str | None, older: str | None) -> bool:
    """Whether a statement by ``newer`` may supersede one by ``older`` (speakers of conversation messages, ``None``
    for a memory that is no message): the same speaker; a memory and a user's message (the user's label may be a
    name in one conversation and the role in another: "Marta", "user"); never the assistant's, a system's or a
    tool's message over another speaker's, nor one named person's over another's ("Melanie" over "Caroline")."""
    if newer == older:
        return True
    if newer is not None and is_role(newer) and speaker_of_reference(newer) != "user":
        return False  # an echo, a prompt or a tool's output states nothing of the user's
    if newer is None or older is None:
        return True
    return is_role(newer) or is_role(older)  # "user" and a user's name: the same person as far as is known


def supersede(
    hits: Sequence[NodeHit],
    embed: Callable[[list[str]], np.ndarray],
    *,
    same_topic: float,
    margin: float,
) -> int:
    """Order the later of two statements on the same topic first (module docstring): for the
    :data:`SUPERSEDE_CANDIDATES` best memory hits of ``hits`` with a time, whenever a newer hit ``b`` scores at most
    ``margin`` below an older hit ``a`` whose abstract's cosine similarity with ``b``'s is at least ``same_topic``,
    ``b.score`` becomes ``a.score + 0.0001`` (capped at 1); repeated until nothing moves. Scores change in place.
    A statement supersedes only its own speaker's (``schema.conversation.message_speaker``, :func:`_may_supersede`):
    an assistant's echo never supersedes the user's statement it repeats.

    Args:
        hits: the candidates, scores set.
        embed: texts -> ``(n, dim)`` vectors (the embedding model's ``embed_documents``).
        same_topic: raw cosine similarity from which two abstracts are on the same topic.
        margin: the largest score gap (final score, 0..1) the later statement may make up.

    Returns:
        How many scores changed (0 when ``embed`` failed: the rule is skipped, never the search).
    """
    ranked = sorted(
        (h for h in hits if h.context_type == "memory" and not h.is_dir and (h.occurred_at or h.updated_at)),
        key=lambda h: -h.score,
    )[:SUPERSEDE_CANDIDATES]
    if len(ranked) < 2:
        return 0
    try:
        vectors = np.asarray(embed([h.abstract for h in ranked]), dtype=np.float32)
    except Exception:  # noqa: BLE001 - an ordering rule never fails a search
        return 0
    vectors = vectors / (np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-9)
    similar = vectors @ vectors.T
    times = [(h.occurred_at or h.updated_at).timestamp() for h in ranked]  # type: ignore[union-attr]
    # a fact is superseded by its owner's later statement, not by another speaker's echo of it ("Switching from
    # coffee to matcha is a nice change" after "I switched from coffee to matcha")
    speakers = [message_speaker(h.uri, h.abstract) for h in ranked]
    moved: set[int] = set()
    for _ in range(len(ranked)):
        changed = False
        for i, older in enumerate(ranked):
            for j, newer in enumerate(ranked):
                if (
                    times[j] > times[i]
                    and _may_supersede(speakers[j], speakers[i])
                    and similar[i, j] >= same_topic
                    and older.score - margin <= newer.score <= older.score
                ):
                    newer.score = round(min(1.0, older.score + 1e-4), 6)
                    moved.add(j)
                    changed = True
        if not changed:
            break
    return len(moved)
