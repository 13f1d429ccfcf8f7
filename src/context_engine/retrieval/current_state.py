"""Questions about the current state prefer the latest memory (issue 25, "updated" facts; seed 001 §10).

A user's facts change ("I live in Leeds" ... two months later "We moved to Lisbon"). A question that asks for the
state *now* ("Where does Sam live now?", "What does the user drink these days?", "Is she still vegetarian?") is
answered by the latest statement, and both statements match its words. :func:`asks_current_state` recognises such
a question by its wording (English and Chinese markers, :data:`CURRENT_MARKERS`); :func:`prefer_latest` then adds
up to ``boost`` to the final score of the candidate memories in proportion to how late they occurred among the
candidates (``occurred_at``, else ``updated_at``; the oldest gets 0, the newest ``boost``). Other questions are
unchanged: recency in general is the ``memory.recency_*`` setting, off by default.

A **correction** is different: what it corrects was never true, so it answers every question, not only one about
the present. :func:`prefer_corrections` orders a message that says it corrects something ("Oops, I mean the 3rd of
May", "Correction from last time: ...", :func:`~context_engine.schema.conversation.corrects_earlier`) just above
the statement it corrects, for any question: the speaker's own latest candidate message at most
:data:`~context_engine.schema.conversation.CORRECTION_WINDOW` messages before it in its session that shares a
content word with it (as the correction was indexed, ``ingest/conversation.py``), else an earlier statement of the
speaker on the same topic (abstract cosine at least ``same_topic``), from any session. Only
when the correction scores at most ``margin`` below it: a correction the question does not match stays where it
is. Messages of one session share its time; their sequence numbers order them (:func:`_when`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from context_engine.retrieval.answer_type import expected_answer_type, has_answer_type
from context_engine.retrieval.speakers import is_role, speaker_of_reference
from context_engine.schema.conversation import CORRECTION_WINDOW, corrects_earlier, message_position, message_speaker
from context_engine.schema.hits import NodeHit
from context_engine.storage.keyword.content_words import content_tokens, shares_content

__all__ = [
    "CORRECTION_CANDIDATES",
    "CURRENT_MARKERS",
    "SUPERSEDE_CANDIDATES",
    "asks_current_state",
    "asks_first_version",
    "prefer_corrections",
    "prefer_latest",
    "supersede",
]

#: The best memories :func:`supersede` compares pairwise.
SUPERSEDE_CANDIDATES = 5

#: The best memories among which :func:`prefer_corrections` looks for corrections and what they correct.
CORRECTION_CANDIDATES = 10

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
    query: str | None = None,
) -> int:
    """Order the later of two statements on the same topic first (module docstring): for the
    :data:`SUPERSEDE_CANDIDATES` best memory hits of ``hits`` with a time, whenever a newer hit ``b`` scores at most
    ``margin`` below an older hit ``a`` on the same topic, ``b.score`` becomes ``a.score + 0.0001`` (capped at 1);
    repeated until nothing moves. Scores change in place. Two statements are on the same topic when their abstracts'
    cosine similarity is at least ``same_topic``, or when both hold a content word of ``query`` (its current-state
    markers and the speakers' names left out): "Does the user still have credit card debt?" over "I've still got
    £2,300 on a credit card at 22.9% APR." and, three months later, "Paid the credit card off completely last
    Friday!" (cosine 0.45 with the default model: the rest of each says different things about the thing asked).
    A statement supersedes only its own speaker's (``schema.conversation.message_speaker``, :func:`_may_supersede`):
    an assistant's echo never supersedes the user's statement it repeats.

    Args:
        hits: the candidates, scores set.
        embed: texts -> ``(n, dim)`` vectors (the embedding model's ``embed_documents``).
        same_topic: raw cosine similarity from which two abstracts are on the same topic.
        margin: the largest score gap (final score, 0..1) the later statement may make up.
        query: the question; ``None``: the cosine alone tells the topic.

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
    asked = _asked_words(query, speakers) if query else set()
    held = [asked & content_tokens(h.abstract) for h in ranked] if asked else [set() for _ in ranked]
    moved: set[int] = set()
    for _ in range(len(ranked)):
        changed = False
        for i, older in enumerate(ranked):
            for j, newer in enumerate(ranked):
                if (
                    times[j] > times[i]
                    and _may_supersede(speakers[j], speakers[i])
                    and (similar[i, j] >= same_topic or not held[i].isdisjoint(held[j]))
                    and older.score - margin <= newer.score <= older.score
                ):
                    newer.score = round(min(1.0, older.score + 1e-4), 6)
                    moved.add(j)
                    changed = True
        if not changed:
            break
    return len(moved)


def _asked_words(query: str, speakers: Sequence[str | None]) -> set[str]:
    """The content words of ``query`` (``storage.keyword.content_words``) less its current-state markers and the
    names of ``speakers`` and the user's role: what the question asks about."""
    return content_tokens(_PATTERN.sub(" ", query), [*(s for s in speakers if s), "user"])


def _when(hit: NodeHit) -> tuple[float, int]:
    """When ``hit`` was said: its time (``occurred_at``, else ``updated_at``; 0 without one), then its sequence
    number in its session (messages of one session share the session's time)."""
    t = hit.occurred_at or hit.updated_at
    position = message_position(hit.uri)
    return (t.timestamp() if t is not None else 0.0, position[1] if position else 0)


def _same_person(a: str, b: str | None) -> bool:
    """Whether speakers ``a`` and ``b`` are one person: the same label, or the user's role and a name (the user's
    label may be a name in one conversation and the role in another)."""
    if b is None or a == b:
        return a == b
    user = [is_role(x) and speaker_of_reference(x) == "user" for x in (a, b)]
    return (user[0] and not is_role(b)) or (user[1] and not is_role(a))


def _corrected(
    correction: NodeHit,
    speaker: str,
    ranked: Sequence[NodeHit],
    speakers: Sequence[str | None],
    similar: Callable[[NodeHit, NodeHit], float],
    same_topic: float,
) -> NodeHit | None:
    """The candidate of ``ranked`` that ``correction`` corrects (module docstring), or ``None``."""
    position = message_position(correction.uri)
    when = _when(correction)
    earlier = [
        (h, sp)
        for h, sp in zip(ranked, speakers, strict=True)
        if h is not correction and _when(h) < when and _same_person(speaker, sp)
    ]
    if position is not None:
        text = correction.abstract[len(speaker) + 2 :]
        near = [
            h
            for h, sp in earlier
            if (p := message_position(h.uri)) is not None
            and p[0] == position[0]
            and 0 < position[1] - p[1] <= CORRECTION_WINDOW
            and shares_content(text, h.abstract[len(sp or "") + 2 :], (speaker,))
        ]
        if near:
            return max(near, key=lambda h: _when(h))
    same = [h for h, _ in earlier if similar(correction, h) >= same_topic]
    return max(same, key=lambda h: h.score) if same else None


def _about_the_question(text: str, speaker: str, query: str) -> bool:
    """Whether a correction's own ``text`` speaks to ``query``: it shares a content word with it ("Which room is
    Priya's classroom?" / "It's room 41 now"), or holds what the question's opening words ask for (a date for "when",
    a name for "who": :mod:`~context_engine.retrieval.answer_type`). A correction changes one detail; a question about
    another detail of the statement it corrects ("What instrument does Isla play?" over "I got the date wrong, it's
    Sunday the 24th") is answered by that statement."""
    if shares_content(text, query, (speaker,)):
        return True
    asked = _LEADING_PREPOSITION.sub("", query)  # "On what day does ...?" asks for a day as "What day ...?" does
    kind = "number" if _ASKS_FOR_A_NUMBER.search(asked) else expected_answer_type(asked)
    return kind is not None and has_answer_type(kind, text, asked)


_LEADING_PREPOSITION = re.compile(r"^\W*(?:on|at|in|by|for|from|until|till|to|with)\s+(?=(?:what|which|whom)\b)", re.I)
# a question for a number or a code: "What is Priya's mobile number?", "What is the user's gym locker code?"
_ASKS_FOR_A_NUMBER = re.compile(r"\b(?:number|code|phone|pin|postcode|zip code|extension|digits)\b", re.IGNORECASE)


# A question about what was said first, before a correction: "Which date did Marisol first give for her dentist
# appointment?", "What name did she originally give for the kennels?", "... give at first"
_FIRST_VERSION = re.compile(
    r"(?<![\w'’])(?:originally|initially|at first|first (?:said|say|gave|give|given|told|tell|stated|state|mentioned"
    r"|mention|named|name|wrote|write|put|quoted|quote))(?![\w'’])",
    re.IGNORECASE,
)


def asks_first_version(query: str) -> bool:
    """Whether ``query`` asks what was said before a correction ("first said", "originally", "at first"): then the
    corrected statement, not the correction, answers it, and :func:`prefer_corrections` leaves the order alone."""
    return _FIRST_VERSION.search(query) is not None


def prefer_corrections(
    hits: Sequence[NodeHit],
    embed: Callable[[list[str]], np.ndarray] | None,
    *,
    same_topic: float,
    margin: float,
    query: str = "",
) -> int:
    """Order each correction among the :data:`CORRECTION_CANDIDATES` best memory hits of ``hits`` just above the
    statement it corrects (module docstring): its score becomes the statement's plus 0.0001 (capped at 1) when it
    scores at most ``margin`` below it and speaks to ``query`` (:func:`_about_the_question`; an empty ``query``:
    always), unless ``query`` asks what was said first (:func:`asks_first_version`). Scores change in place; for any
    question.

    Args:
        hits: the candidates, scores set.
        embed: texts -> ``(n, dim)`` vectors (the model's ``embed_documents``) for the same-topic test of a
            statement in another session; ``None`` (or a failing model) leaves that case out.
        same_topic: raw cosine similarity from which two abstracts are on the same topic.
        margin: the largest score gap (final score, 0..1) a correction makes up.

    Returns:
        How many scores changed.
    """
    if query and asks_first_version(query):
        return 0
    ranked = sorted((h for h in hits if h.context_type == "memory" and not h.is_dir), key=lambda h: -h.score)[
        :CORRECTION_CANDIDATES
    ]
    speakers = [message_speaker(h.uri, h.abstract) for h in ranked]
    corrections = [
        (h, sp)
        for h, sp in zip(ranked, speakers, strict=True)
        if sp
        and corrects_earlier(h.abstract[len(sp) + 2 :])
        and (not query or _about_the_question(h.abstract[len(sp) + 2 :], sp, query))
    ]
    if not corrections or margin <= 0:
        return 0
    vectors: dict[str, np.ndarray] = {}  # embedded once, only when a statement of another session is compared
    failed = embed is None

    def similar(a: NodeHit, b: NodeHit) -> float:
        nonlocal failed
        if failed:
            return -1.0
        if not vectors:
            try:
                assert embed is not None
                found = np.asarray(embed([h.abstract for h in ranked]), dtype=np.float32)
            except Exception:  # noqa: BLE001 - an ordering rule never fails a search
                failed = True
                return -1.0
            found = found / (np.linalg.norm(found, axis=1, keepdims=True) + 1e-9)
            vectors.update((h.uri, v) for h, v in zip(ranked, found, strict=True))
        return float(vectors[a.uri] @ vectors[b.uri])

    moved = 0
    above: dict[int, float] = {}  # id(statement) -> the score of the latest correction placed above it
    for correction, speaker in sorted(corrections, key=lambda c: _when(c[0])):  # a later correction ends higher
        target = _corrected(correction, speaker, ranked, speakers, similar, same_topic)
        if target is None or not target.score - margin <= correction.score <= above.get(id(target), target.score):
            continue
        correction.score = above[id(target)] = round(min(1.0, above.get(id(target), target.score) + 1e-4), 6)
        moved += 1
    return moved
