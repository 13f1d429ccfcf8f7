"""The reply to a question turn: a seed that asks something brings the message that answers it (issue 25).

In a conversation a question and its answer form an *adjacency pair* (Schegloff & Sacks, *Opening up Closings*,
Semiotica 1973): the answer is the next turn by another speaker. When a question of the conversation matches the
query, it is usually the answer that the caller wants, and the answer often shares few words with the query: for
"What inspired Caroline's painting for the art show?" (LoCoMo) the turn "Wow, Caroline, that painting is awesome! ...
What inspired it?" is the second seed, and the answer "Thanks, Melanie! I painted this after I visited a LGBTQ
center ..." is not among the first ten hits. The answer is indexed with the question as its context
(``ingest/conversation.py``), but its own words dilute that match.

:func:`reply_window` lists the messages after an asking seed, :func:`first_reply` picks its reply among those found
at level 0: the first by another speaker that states something (:func:`~context_engine.retrieval.speakers.
message_has_content`), so an acknowledgement ("assistant: Noted!") between a question and its answer is passed over.
The hierarchical expansion (``retrieval/hierarchical_searcher.py``) adds that reply as an expansion candidate whose
vector score is at least ``retrieval.hierarchy.reply_factor`` (0.7) times the seed's: it ranks below the question,
unless its own match is better. On locomo_dev R@10 0.7645 -> 0.7735 with no category lower (adversarial 0.850 ->
0.878, open-domain 0.434 -> 0.445, single-hop 0.833 -> 0.837), P@1 unchanged; 0.8 gives 0.7732 with open-domain at
0.400, 0.9 0.7717, 1.0 0.7710 (docs/memories.md). Carrying the score the other way, from a seed to the message it
answers, lost at the first ranks (R@3 0.6253 -> 0.6155 at 0.8) for little recall (R@10 0.7776): not kept. A message
asks something when one of its sentences is a question
(:func:`~context_engine.storage.keyword.content_words.asks_something`).

**A question about the one who answered** (:func:`answers_for_named`): when the query names the reply's speaker and
not the asker's ("Which library did the assistant suggest for extracting tables?", "What inspired Caroline's
sculpture?" over Melanie's "What inspired it?"), the reply, not the question, says what is asked: it ranks just above
its question (``retrieval.hierarchy.named_reply_first``; vector score the question's plus :data:`NAMED_REPLY_LEAD`).
The question had the better match because the asker's turn is indexed with the reply as its context, or shares the
query's words. locomo_dev P@1 0.4814 -> 0.5005, R@3 0.6226 -> 0.6363, RR@10 0.5944 -> 0.6083, R@10 0.7735 -> 0.7736
(26 first hits won, 7 lost); agent_dev equal; a held-out probe's "what did the assistant recommend" questions 7 -> 11
first hits of 14. Placed just below the question instead (lead -0.01): P@1 0.4804.

**What the assistant did for a request** (:func:`prefer_reports`): an assistant's message that reports an action it
took ("I've booked the 06:40 to Bristol, coach C, seat 42", "Done: your HelloFresh plan is cancelled";
:func:`~context_engine.schema.conversation.reports_action`) is the record of the user's request before it ("I need to
get to Bristol on the 28th, early train please."): the request says what was wanted, the report what was done, with
the specifics a later question asks for. The request shares the question's words and its speaker is the one the
question names, so it ranked first (a held-out probe: 11 of 12 such misses at rank 2). For any question but one
about the asking, the report ranks just above its request when it scores at most ``report_margin`` below it.

**An assistant's echo of what the user said** (:func:`prefer_sources`): "Noted, the worker config lives at
/etc/orbit/worker.yaml." after "The worker reads its settings from /etc/orbit/worker.yaml on the box, not from env
vars." restates the user's statement in fewer words, so it matched the question better and ranked first (a held-out
probe: 4 of 29 first-hit misses). The user's message is the source; the echo adds nothing to it. An assistant's
message is an echo of the user's statement just before it (the previous message of its session, stored with the role
``user``, not a question) when it shares a content word with it and at most half as many of its own content words
are new (:func:`echoes`; names and politeness are no content): "Got it, Dev is an A&E nurse and Kiran is the
paramedic." echoes "Correction: he's a nurse in A&E, not a paramedic. ... his brother Kiran is one."; "Cocker
spaniels are affectionate but need a lot of exercise." adds to "We're thinking of getting a dog, probably a cocker
spaniel." and "Lima is the capital of Peru." answers a question: neither is an echo. The source ranks just above
its echo when it scores at most ``echo_margin`` below it; a report of an action (:func:`prefer_reports`) is no echo.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence

from context_engine.retrieval.answer_type import expected_answer_type, has_answer_type
from context_engine.retrieval.speakers import ASSISTANT, message_has_content, message_speaker
from context_engine.schema.conversation import message_position, reports_action
from context_engine.schema.hits import NodeHit
from context_engine.storage.keyword.content_words import asks_something, content_tokens
from context_engine.storage.vector.scoring import L0Match

__all__ = [
    "NAMED_REPLY_LEAD",
    "REPORT_WINDOW",
    "answers_for_named",
    "echoes",
    "first_reply",
    "lift",
    "prefer_reports",
    "prefer_sources",
    "reply_window",
    "unlift_orphans",
]

#: An assistant's report of an action carries out the user's message at most this many messages before it (a tool
#: call and its result may come in between).
REPORT_WINDOW = 4

#: What a reply to a question by another speaker than the one the query names gets above the question's vector score
#: (:func:`answers_for_named`): enough to rank first of the pair, too little to pass a hit the question did not pass.
NAMED_REPLY_LEAD = 0.001

# a stored message: ".../memories/sessions/<conversation_id>/<seq>.md" (ingest/memory.py), seq zero-padded
_MESSAGE = re.compile(r"^(ctx://user/[^/]+/memories/sessions/[^/]+/)(\d+)\.md$")


def reply_window(uri: str, abstract: str, window: int) -> list[str]:
    """The URIs of the ``window`` messages after the message ``uri`` (L0 ``abstract``, ``"<speaker>: <text>"``), in
    order, when it is a conversation message that asks something; else ``[]``."""
    m = _MESSAGE.match(uri)
    speaker = message_speaker(uri, abstract) if m else None
    if m is None or speaker is None or not asks_something(abstract[len(speaker) + 2 :]):
        return []
    prefix, seq = m.group(1), m.group(2)
    return [f"{prefix}{int(seq) + i:0{len(seq)}d}.md" for i in range(1, window + 1)]


def first_reply(uri: str, abstract: str, following: list[str], found: Mapping[str, L0Match]) -> L0Match | None:
    """The reply to the asking message ``uri``: the first of ``following`` (:func:`reply_window`) present in
    ``found`` (level-0 matches by URI) whose speaker is another and that states something; ``None`` when none is
    (an acknowledgement, a message of the same speaker, or a gap in ``found`` is passed over; the choice is made
    before hydration, so a reply found pending is dropped there, not replaced by the next message)."""
    asker = message_speaker(uri, abstract)
    for candidate in following:
        m = found.get(candidate)
        if m is None:
            continue
        speaker = message_speaker(m.uri, m.text)
        if speaker is not None and speaker != asker and message_has_content(m.text, speaker, ()):
            return m
    return None


# A query about the asking itself ("What did Priya ask the assistant about ...?", "Who asked Caroline ...?"): the
# question, not its reply, is what it looks for. 请问 ("may I ask") is politeness, not the topic.
_ASKING = re.compile(r"(?<![\w'’])(?:ask|asks|asked|asking|inquired|enquired)(?![\w'’])|(?<!请)问", re.IGNORECASE)


def answers_for_named(uri: str, abstract: str, reply: L0Match, named: frozenset[str], query: str = "") -> bool:
    """Whether the ``reply`` to the asking message ``uri`` (L0 ``abstract``) is by a speaker the query names
    (``named``: :attr:`~context_engine.retrieval.run.FirstRound.speakers`, the speakers whose turns got the speaker
    boost, the user's role included for "the user" and the user's greeted name) while the asker is not: then the
    reply says what the query asks about that speaker, and ranks above the question (module docstring). Never for a
    ``query`` about the asking ("What did Priya ask ...?", "Who asked Caroline ...?", 问)."""
    if not named or _ASKING.search(query):
        return False
    return message_speaker(reply.uri, reply.text) in named and message_speaker(uri, abstract) not in named


def lift(hit: NodeHit, least: float, asker: str) -> bool:
    """Raise ``hit``'s vector score to ``least`` (the reply to ``asker`` ranks with it), keeping its own score and
    saying so in ``match_reason``; ``False`` (nothing changed) when its own score is at least ``least``."""
    if least <= hit.vector_score:
        return False
    hit.own_vector_score = hit.vector_score
    hit.vector_score = round(least, 6)
    hit.reply_to = asker
    hit.match_reason = f"{hit.match_reason}; reply_to:{asker}" if hit.match_reason else f"reply_to:{asker}"
    return True


def unlift_orphans(groups: Sequence[Sequence[NodeHit]]) -> int:
    """Give back their own vector score to the lifted replies (:func:`lift`) whose asking message is in none of
    ``groups`` (the request's hits after the recheck: a filter dropped the question, so its answer cannot borrow its
    rank). Returns how many were restored; their final scores must be computed again."""
    kept = {h.uri for hits in groups for h in hits}
    restored = 0
    for hits in groups:
        for h in hits:
            if h.reply_to is not None and h.reply_to not in kept and h.own_vector_score is not None:
                h.match_reason = h.match_reason.removesuffix(f"; reply_to:{h.reply_to}").removeprefix(
                    f"reply_to:{h.reply_to}"
                )
                h.vector_score, h.own_vector_score, h.reply_to = h.own_vector_score, None, None
                restored += 1
    return restored


def _request_of(
    report: NodeHit, ranked: Sequence[NodeHit], role: Mapping[str, str], margin: float, reports: set[str]
) -> NodeHit | None:
    """The candidate of ``ranked`` that stands for the user's request the assistant's ``report`` carries out, when
    the report may pass it: of the messages at most :data:`REPORT_WINDOW` before the report in its session stored
    with the role ``user`` (a tool's result or a system prompt in between is passed over), after the last candidate
    report of another action (``reports``: the URIs of the candidate reports), the best scoring that scores at most
    ``margin`` above the report. A request may take
    more than one message ("Can you book a table for four at Olive & Ash this Friday?", the assistant's "7:00 or
    7:30?", "7:30 by the window, please."), and the report passes each of them that it can."""
    at = message_position(report.uri)
    if at is None:
        return None
    before: list[tuple[int, NodeHit]] = []
    for h in ranked:
        p = message_position(h.uri)
        if p is not None and p[0] == at[0] and 0 < at[1] - p[1] <= REPORT_WINDOW:
            before.append((p[1], h))
    # the user's messages after the previous report among the candidates belong to this request, not the earlier one
    start = max((seq for seq, h in before if h.uri in reports), default=-1)
    passable = [
        h
        for seq, h in before
        if seq > start and role.get(h.uri) == "user" and report.score <= h.score <= report.score + margin
    ]
    return max(passable, key=lambda h: h.score, default=None)


def prefer_reports(
    query: str,
    hits: Sequence[NodeHit],
    margin: float,
    roles: Callable[[list[str]], Mapping[str, str]] | None,
) -> int:
    """Order each assistant's report of an action among the memory ``hits`` just above the user's request it carries
    out (module docstring): its score becomes the request's plus 0.0001 (capped at 1) when it scores at most
    ``margin`` below it. Never for a query about the asking ("What did Nadia ask the assistant to book?"). Scores
    change in place.

    Args:
        query: the caller's query.
        hits: the candidates, scores set.
        margin: the largest score gap (final score, 0..1) a report makes up; 0 switches the rule off.
        roles: URIs -> the role each message was stored with (one metadata read, only when a report is among the
            candidates); ``None`` switches the rule off.

    Returns:
        How many scores changed.
    """
    if margin <= 0 or roles is None or _ASKING.search(query):
        return 0
    ranked = [h for h in hits if h.context_type == "memory" and not h.is_dir]
    reports = []
    for h in ranked:
        speaker = message_speaker(h.uri, h.abstract)
        if speaker == ASSISTANT and reports_action(h.abstract[len(speaker) + 2 :]):
            reports.append(h)
    if not reports:
        return 0
    role = roles([h.uri for h in ranked if message_position(h.uri) is not None])
    moved = 0
    uris = {h.uri for h in reports}
    names = tuple(sorted({s for h in ranked if (s := message_speaker(h.uri, h.abstract))}))
    for report in reports:
        request = _request_of(report, ranked, role, margin, uris)
        if request is not None and not _request_says_more(query, request, report, names):
            report.score = round(min(1.0, request.score + 1e-4), 6)
            moved += 1
    return moved


def _own_text(hit: NodeHit) -> str:
    speaker = message_speaker(hit.uri, hit.abstract)
    return hit.abstract[len(speaker) + 2 :] if speaker and hit.abstract.startswith(f"{speaker}: ") else hit.abstract


def _request_says_more(query: str, request: NodeHit, report: NodeHit, names: tuple[str, ...]) -> bool:
    """Whether the ``request`` holds more of what ``query`` asks than the ``report`` does: the question's content
    words in the request strictly include those in the report, and the report does not hold the answer type the
    question asks for (:mod:`~context_engine.retrieval.answer_type`). "What food does Leyla love?" is answered by
    "Book a table at Harbour Lights for Leyla's birthday, she loves seafood", not by "Your table is booked for 7:45";
    "Which seat does Nadia have on the Bristol train?" by the report that names the seat, whatever words the request
    shares with it, "Where is Lena staying in Oslo?" by "I've reserved two nights at the Hotel Bondeheimen" (a
    name for "where" and "which") rather than "And somewhere to stay for two nights", and a question about what was
    done ("What present was ordered for Lena's nephew?") by the report."""
    if _ASKS_WHAT_WAS_DONE.search(query):
        return False  # "Which meal-kit service did Lena cancel?", "What present was ordered ...?": the report's
    asked = content_tokens(query, names)
    in_request = asked & content_tokens(_own_text(request), names)
    in_report = asked & content_tokens(_own_text(report), names)
    if not in_report < in_request:
        return False
    # "Where ...?" and "Which ...?" ask for a place or a thing by its name, which a report gives ("the Hotel
    # Bondeheimen", "SAS flight SK1462")
    kind = expected_answer_type(query) or ("name" if _WHERE_WHICH.match(query) else None)
    return kind is None or not has_answer_type(kind, _own_text(report), query)


_WHERE_WHICH = re.compile(r"^\W*(?:where|which)\b", re.IGNORECASE)
# a question about the outcome of an action: what was booked, ordered, cancelled ...
_ASKS_WHAT_WAS_DONE = re.compile(
    r"(?<![\w'’])(?:book|booked|booking|reserved?|reservation|order|ordered|cancel|cancell?ed|schedul(?:e|ed)"
    r"|reschedul(?:e|ed)|renew|renewed|pay|paid|transfer(?:red)?|buy|bought|send|sent|arranged?)(?![\w'’])",
    re.IGNORECASE,
)


def echoes(reply: str, source: str, names: Sequence[str] = ()) -> bool:
    """Whether an assistant's ``reply`` (its text) restates the user's ``source`` message (its text) just before it
    (module docstring): ``source`` asks nothing, the two share a content word, and at most half as many of the
    reply's content words are new as are shared (:func:`~context_engine.storage.keyword.content_words.
    content_tokens`, ``names`` left out); a report of an action (:func:`~context_engine.schema.conversation.
    reports_action`) is no echo.

    Memoised: a conversation's candidate pairs recur across its queries, and tokenising them is the cost (0.1 to
    0.3 ms a pair; a search meets a few pairs at most, as only an echo that outscores its source is tested)."""
    return _echoes(reply, source, tuple(names))


@functools.lru_cache(maxsize=16_384)
def _echoes(reply: str, source: str, names: tuple[str, ...]) -> bool:
    if asks_something(source) or reports_action(reply):
        return False
    own = content_tokens(reply, names)
    shared = own & content_tokens(source, names)
    return bool(shared) and 2 * len(own - shared) <= len(shared)


def prefer_sources(
    hits: Sequence[NodeHit],
    margin: float,
    roles: Callable[[list[str]], Mapping[str, str]] | None,
) -> int:
    """Order the user's statement among the memory ``hits`` just above the assistant's echo of it (module
    docstring): its score becomes the echo's plus 0.0001 (capped at 1) when it scores at most ``margin`` below it.
    Scores change in place.

    Args:
        hits: the candidates, scores set.
        margin: the largest score gap (final score, 0..1) a source makes up; 0 switches the rule off.
        roles: URIs -> the role each message was stored with (one metadata read, only when an assistant's message
            and the message before it are both candidates); ``None`` switches the rule off.

    Returns:
        How many scores changed.
    """
    if margin <= 0 or roles is None:
        return 0
    by_position: dict[tuple[str, int], NodeHit] = {}
    speakers: dict[str, str | None] = {}
    for h in hits:
        position = message_position(h.uri) if h.context_type == "memory" and not h.is_dir else None
        if position is not None:
            by_position[position] = h
            speakers[h.uri] = message_speaker(h.uri, h.abstract)
    pairs = [
        (h, source)
        for (session, seq), h in by_position.items()
        if speakers[h.uri] == ASSISTANT
        and (source := by_position.get((session, seq - 1))) is not None
        and speakers[source.uri] not in (None, ASSISTANT)
        and source.score < h.score
    ]
    if not pairs:
        return 0
    role = roles([source.uri for _, source in pairs])
    names = sorted({s for s in speakers.values() if s})
    moved = 0
    for echo, source in pairs:
        speaker = speakers[source.uri] or ""
        if (
            role.get(source.uri) == "user"
            and echo.score - margin <= source.score
            and echoes(echo.abstract[len(ASSISTANT) + 2 :], source.abstract[len(speaker) + 2 :], names)
        ):
            source.score = round(min(1.0, echo.score + 1e-4), 6)
            moved += 1
    return moved
