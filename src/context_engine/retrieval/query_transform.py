"""Rule-based query transformation with fallback (seed 001 §10, third item; issue 25 item 2).

Agents ask about their user in the third person ("What does the user drink instead of coffee?", "Where does she
work?") while the user's turns are in the first person ("I switched to rooibos"). :func:`first_person` rewrites the
third-person references of a question into the first person ("What does I drink instead of coffee?": grammar is not
needed by an embedding model); :class:`QueryTransformer` embeds the original and the rewritten query and uses their
normalised mean as the query vector (multi-query fusion at the vector level: one similarity scan, one extra query
embedding). BM25 is untouched (pronouns are stopwords). No model download, no LLM.

:func:`without_speakers` (``retrieval.query_transform.speaker_names``, on) gives the text of the second search run
for a question naming a speaker of the conversation messages found: the names taken out ("Where is Sam employed?"
-> "Where is employed?") and the user's role put in the first person ("Where does the user work?" -> "Where does I
work?"), since either word matches the ``"speaker: "`` prefix of every turn of that speaker and lets the shortest
win; the speaker boost still says whose turns are meant.

A transformation is applied only when its setting is on (``retrieval.query_transform``) and the rewrite differs from
the query; it is named in the trace (``planner`` stage, event ``query_transform``); any failure falls back to the
original query's vector.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

import numpy as np

from context_engine.observability.trace import TraceRecorder
from context_engine.retrieval.query_vectors import QueryVectors
from context_engine.retrieval.speakers import (
    cjk_char,
    cjk_pronoun_starts,
    is_cjk_name,
    is_role,
    references,
    speaker_of_reference,
)
from context_engine.storage.protocols import Embedder

__all__ = ["QueryTransformer", "first_person", "without_speakers"]

# Third-person references to the person the memories belong to, and their first-person forms (English).
_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(rf"(?<![\w'’]){pattern}(?![\w'’])", re.IGNORECASE), repl)
    for pattern, repl in (
        (r"the user['’]s", "my"),
        (r"user['’]s", "my"),
        (r"the user", "I"),
        (r"their", "my"),
        (r"his", "my"),
        (r"her", "my"),
        (r"they", "I"),
        (r"he", "I"),
        (r"she", "I"),
        (r"them", "me"),
        (r"him", "me"),
        (r"themselves|himself|herself", "myself"),
    )
)


def without_speakers(query: str, speakers: Iterable[str], user_names: Iterable[str] = ()) -> str | None:
    """``query`` with the names of ``speakers`` taken out (possessive forms included) and its references to the
    user's role put in the first person, or ``None`` when it refers to none of them or nothing but them is left.
    ``user_names`` (:attr:`~context_engine.retrieval.run.FirstRound.user_names`: the user's name as only the
    assistant's greetings say it) are references to the user's role: "Where does Priya work?" -> "Where does I
    work?".

    The name says whose turns to prefer, which ``retrieval.seed.speaker_boost`` does; left in the text, BM25 and the
    embedding match it in the ``"Sam: "`` prefix of every one of the speaker's turns, and the shortest turns win.
    Examples: ``("Where is Sam employed?", {"Sam"})`` -> ``"Where is employed?"``; ``("What is Sam's favourite
    band?", {"Sam"})`` -> ``"What is favourite band?"``.

    The user's role (a conversation stored without names, whose turns read ``"user: ..."``) is the same trap with a
    word agents do ask with: "Where does the user work?" matches ``user`` in the prefix of every one of the user's
    turns, and in a long conversation "user: Hi again" outranks "user: Community pharmacy, a small independent one in
    Leith". Such a reference becomes the first person the user's turns are written in: "the user" -> "I", "the
    user's" / "user's" -> "my", 用户 -> 我, 用户的 -> 我的 ("Where does I work?": an embedding model needs no
    grammar). Other roles ("the assistant") are kept: they say whose turns are meant.
    """
    names = [s for s in speakers if not is_role(s)]
    user = any(is_role(s) and speaker_of_reference(s) == "user" for s in speakers)
    text = unicodedata.normalize("NFKC", query)
    # "Where will Priya move?" keeps its "will" beside the speaker Will; the user's role by its canonical name, so
    # that "the user" and 用户 (a word of its own, not 用户名) are found whether the turns read "user:" or "用户:"
    roles = [m for m in references(text, ("user",)) if not _generic_or_compound(text, m)] if user else []
    if user_names:  # the user's name only the assistant's greetings say: the user, whatever the turns' labels
        roles = sorted([*roles, *references(text, tuple(user_names))], key=lambda m: m.start())
    found = sorted([*references(text, names), *roles], key=lambda m: m.start())
    if not found:
        return None
    parts, at = [], 0
    for m in found:
        if m.start() < at:
            continue  # a name inside a role's reference, or the reverse: the first one found stands
        if m in roles:
            # 我 for 用户, and for a Latin name written in a Chinese sentence ("Priya的猫")
            cjk = is_cjk_name(m.group(2)) or cjk_char().match(text, m.end()) is not None
            first = ("我的" if cjk else "my") if m.group(3) else ("我" if cjk else "I")
            parts += [text[at : m.start()], first, "" if cjk else " "]
        else:
            parts += [text[at : m.start()], m.group(1) or "", " "]
        at = m.end()
    out = "".join([*parts, text[at:]])
    out = re.sub(r"\s+", " ", out).strip()
    out = re.sub(r"\s+([?!.,;:])", r"\1", out)
    if not re.search(r"\w", out):
        return None
    return out


# Words after "user" that make it part of a compound noun ("the user name", "the user ID"), not the person.
_COMPOUND_HEADS = frozenset(
    """name names id ids interface interfaces ui account accounts agent agents group groups base experience manual
    guide guides story stories input inputs role roles session sessions profile profiles data settings permission
    permissions""".split()
)
# Words before "user" that make it any user, not the one the memories belong to ("a user's settings", "each user").
_GENERIC_BEFORE = frozenset("a an any each every another no which what whose per".split())


def _generic_or_compound(text: str, m: re.Match[str]) -> bool:
    """Whether the role reference ``m`` in ``text`` is not the user the memories belong to: a compound noun ("the
    user name", "the user-agent") or any user ("a user's settings", "each user's quota")."""
    follow = re.match(r"-|\s+(\w+)", text[m.end() :]) if m.group(3) is None else None  # not after "user's"
    if follow is not None and (follow.group(0) == "-" or (follow.group(1) or "").casefold() in _COMPOUND_HEADS):
        return True
    before = re.findall(r"\w+", text[: m.start()])
    return not m.group(1) and bool(before) and before[-1].casefold() in _GENERIC_BEFORE


def first_person(query: str) -> str | None:
    """``query`` with its third-person references to the user in the first person, or ``None`` when it has none.

    Examples: "What does the user drink instead of coffee?" -> "What does I drink instead of coffee?";
    "Where does she work now?" -> "Where does I work now?"; Chinese 他 and 她 as words of their own -> 我.
    """
    out = query
    for pattern, repl in _RULES:
        out = pattern.sub(repl, out)
    for at in reversed(cjk_pronoun_starts(out)):  # "她的丈夫从事什么职业？" -> "我的丈夫从事什么职业？"
        out = out[:at] + "我" + out[at + 1 :]
    return out if out != query else None


class QueryTransformer:
    """The query vector of a search_memory request, with the enabled transformations fused in (module docstring).

    Args:
        first_person: apply :func:`first_person` (``retrieval.query_transform.first_person``).
    """

    def __init__(self, *, first_person: bool) -> None:
        self._first_person = first_person

    def texts(self, text: str) -> list[str]:
        """The texts :meth:`vector` embeds for ``text``: ``text``, and its first-person rewrite when that is on and
        differs (for :meth:`QueryVectors.prefetch`)."""
        rewrite = first_person(text) if self._first_person else None
        return [text] if rewrite is None else [text, rewrite]

    def vector(self, embedder: Embedder | QueryVectors, text: str, trace: TraceRecorder | None = None) -> np.ndarray:
        """The unit query vector of ``text`` embedded by ``embedder`` (``(dim,)`` float32): the original's, or the
        normalised mean of the original's and the first-person rewrite's (a request's :class:`QueryVectors`
        embeds each text once, both in one batch after :meth:`texts` was prefetched).

        Raises:
            ContextEngineError: ``WRT-5031`` when the original query cannot be embedded (a failing rewrite falls
                back to the original, recorded in the trace).
        """
        original = np.asarray(embedder.embed_query(text), dtype=np.float32)
        rewrite = first_person(text) if self._first_person else None
        if rewrite is None:
            return original
        try:
            other = np.asarray(embedder.embed_query(rewrite), dtype=np.float32)
        except Exception as err:  # noqa: BLE001 - a transformation never fails a search: fall back to the original
            if trace is not None:
                trace.event("planner", "query_transform", transform="first_person", fallback=type(err).__name__)
            return original
        mean = original + other
        norm = float(np.linalg.norm(mean))
        if not np.isfinite(norm) or norm == 0.0:
            return original
        if trace is not None:
            trace.event("planner", "query_transform", transform="first_person", text=rewrite)
        return (mean / norm).astype(np.float32)
