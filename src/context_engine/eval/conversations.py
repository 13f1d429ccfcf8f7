"""Conversation datasets (DESIGN §11; issue 11 item 5): LoCoMo-style turns and questions, evidence turns as qrels.

A conversation folder holds two JSON-lines files:

* ``turns.jsonl``: one turn a line, ``{conv_id, dia_id, session, session_date_time, speaker, text}`` plus an optional
  ``role`` (``user``, the default, ``assistant``, ``system`` or ``tool``), in the order spoken. ``speaker`` may be
  empty or absent (an anonymous user, an assistant): the turn is then shown as ``<role>: text``, as the engine does.
  ``session`` (``session_1`` ...) names the session a turn belongs to; ``session_date_time`` is the session's
  start in LoCoMo's form (``"1:56 pm on 8 May, 2023"``) or ISO 8601; it is parsed here into a naive
  :class:`~datetime.datetime` (the data carries no time zone).
* ``qa.jsonl``: one question a line, ``{conv_id, qa_id, question, category, category_name, evidence: [dia_id]}``.
  ``evidence`` names the turns of the same conversation that hold the answer: those are the question's qrels
  (grade 1 each). A question with ``category_name == "unanswerable"`` or an empty ``evidence`` list is a *no-answer*
  question (:attr:`ConversationDataset.no_answer`): not judged for recall, asked to see whether the engine says it
  found nothing.

Ids are strings. A turn's document id is ``<conv_id>/<dia_id>`` (:func:`turn_doc_id`), so the flattened
:class:`~context_engine.eval.datasets.EvalDataset` of every conversation has unique ids. Each question searches only
its own conversation; :meth:`ConversationDataset.scoped` gives the document-level view of one conversation (its turns
and its questions) for retrievers that index one conversation at a time.

Evidence naming no turn of the conversation is dropped and counted (:attr:`ConversationDataset.unknown_evidence`); a
question whose evidence names no known turn at all is not a judged query and is counted in
:attr:`ConversationDataset.unjudged_questions`.

Perturbation (``perturb="acks"``, applied at load time, never written anywhere): after **every** turn of the dataset
(user and assistant turns alike) an assistant acknowledgement is inserted: ``role="assistant"``, an empty speaker, the
same session and time, ``dia_id`` ``<dia_id>#ack``, text one of :data:`ACK_TEXTS` chosen by the SHA-256 of the turn's
document id (so the choice does not depend on the selection). Such a turn is never evidence. The split gets ``+acks``
and both hashes change (with the list of texts too), so neither baselines nor cached homes are mixed up.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.eval.datasets import Document, EvalDataset, _Hasher, _jsonl

__all__ = [
    "ACK_TEXTS",
    "PERTURBATIONS",
    "UNANSWERABLE",
    "ConversationDataset",
    "Question",
    "Turn",
    "ack_text",
    "insert_acks",
    "is_conversation_folder",
    "load_conversations",
    "parse_session_time",
    "turn_doc_id",
]

#: Formats of ``session_date_time`` tried in order (LoCoMo's, with and without the comma), then ISO 8601.
_TIME_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %B %Y", "%I:%M %p on %d %b, %Y")
_REQUIRED_TURN = ("conv_id", "dia_id", "session", "text")
_REQUIRED_QA = ("conv_id", "qa_id", "question", "evidence")
_ROLES = ("user", "assistant", "system", "tool")
UNANSWERABLE = "unanswerable"
"""The ``category_name`` of a question whose answer is not in the conversation (a no-answer question)."""
PERTURBATIONS = ("acks",)
"""Load-time perturbations of a conversation set (see the module docstring)."""
ACK_TEXTS: tuple[str, ...] = (
    "Got it.",
    "Noted, thanks!",
    "Okay, I'll remember that.",
    "Thanks for sharing that.",
    "Understood!",
    "Good to know.",
    "Sure thing.",
    "Makes sense, thanks for telling me.",
    "All right, noted.",
    "Thanks for the update!",
)
"""The acknowledgements the ``acks`` perturbation inserts (written by us)."""
ACK_SUFFIX = "#ack"


def turn_doc_id(conv_id: str, dia_id: str) -> str:
    """The document id of a turn: ``<conv_id>/<dia_id>`` (``conv-26/D1:3``)."""
    return f"{conv_id}/{dia_id}"


def parse_session_time(value: str | None) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` (LoCoMo; naive) or ISO 8601 text as a :class:`datetime`; ``None``/``""`` ->
    ``None``.

    Raises:
        ValueError: the text matches none of the formats.
    """
    if value is None or not str(value).strip():
        return None
    text = " ".join(str(value).split())
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    return datetime.fromisoformat(text)


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of a conversation.

    Attributes:
        conv_id, dia_id: the conversation and the turn's id inside it (``D1:3``).
        session: the session id (``session_1``), used as the engine's ``session_id``.
        session_date_time: the session time as written in the file.
        timestamp: that time parsed (naive, no time zone), ``None`` when the file has none.
        speaker, text: who said what (``speaker`` may be ``""``).
        role: ``user`` (the default), ``assistant``, ``system`` or ``tool``.
    """

    conv_id: str
    dia_id: str
    session: str
    session_date_time: str
    timestamp: datetime | None
    speaker: str
    text: str
    role: str = "user"

    @property
    def doc_id(self) -> str:
        """:func:`turn_doc_id` of this turn."""
        return turn_doc_id(self.conv_id, self.dia_id)

    def content(self) -> str:
        """``speaker: text`` (``role: text`` without a speaker, as the engine shows it): what the document-level
        baselines index for this turn (the turn alone)."""
        return f"{self.speaker or self.role}: {self.text}"


@dataclass(frozen=True, slots=True)
class Question:
    """One question with the turns (``dia_id``) that hold its answer; ``category_name`` keys the per-category table."""

    qa_id: str
    conv_id: str
    question: str
    category: str
    category_name: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class ConversationDataset:
    """Conversations, their questions, and the flattened document-level view.

    Attributes:
        turns: ``{conv_id: [Turn, ...]}`` in file order (conversations in order of first appearance).
        questions: the judged questions (at least one known evidence turn), in file order.
        no_answer: the no-answer questions (category ``unanswerable`` or no evidence; ``evidence`` ``()``), in file
            order: not in ``dataset``, asked only to read the engine's ``match_quality``.
        dataset: the flattened :class:`EvalDataset`: corpus = every turn (``Document(id, "", "speaker: text")``),
            queries = the judged questions by ``qa_id``, qrels = ``{qa_id: {turn_doc_id: 1}}``, tags =
            ``[category_name, "conv:<conv_id>"]``; its ``hash`` covers both files (and the selection).
        unknown_evidence: evidence ids that name no turn of their conversation (dropped).
        unjudged_questions: questions whose evidence names no known turn (left out; no-answer questions are not
            counted here).
        perturbation: the load-time perturbation applied (``"acks"``) or ``None``.
    """

    turns: dict[str, list[Turn]]
    questions: list[Question]
    dataset: EvalDataset
    unknown_evidence: int = 0
    unjudged_questions: int = 0
    no_answer: list[Question] = field(default_factory=list)
    perturbation: str | None = None
    _conv_of: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def conversations(self) -> list[str]:
        """Conversation ids in order."""
        return list(self.turns)

    def conversation_of(self, qa_id: str) -> str:
        """The conversation a question (judged or no-answer) belongs to. Raises ``KeyError`` for an unknown one."""
        return self._conv_of[qa_id]

    @cached_property
    def _by_doc(self) -> dict[str, Turn]:
        return {t.doc_id: t for ts in self.turns.values() for t in ts}

    def turn(self, doc_id: str) -> Turn | None:
        """The turn with this document id (``<conv_id>/<dia_id>``), ``None`` when there is none."""
        return self._by_doc.get(doc_id)

    def has_assistant_turns(self) -> bool:
        """Whether any turn is not a user turn (an assistant, system or tool message)."""
        return any(t.role != "user" for ts in self.turns.values() for t in ts)

    def has_anonymous_turns(self) -> bool:
        """Whether any turn has no speaker (shown as ``role: text``)."""
        return any(not t.speaker for ts in self.turns.values() for t in ts)

    def sessions(self, conv_id: str) -> list[tuple[str, list[Turn]]]:
        """``[(session_id, turns)]`` of one conversation, sessions in order of first appearance, turns in file order."""
        out: dict[str, list[Turn]] = {}
        for t in self.turns[conv_id]:
            out.setdefault(t.session, []).append(t)
        return list(out.items())

    def categories(self) -> dict[str, int]:
        """Judged questions per ``category_name``, by name."""
        counts: dict[str, int] = {}
        for q in self.questions:
            counts[q.category_name] = counts.get(q.category_name, 0) + 1
        return dict(sorted(counts.items()))

    def scoped(self, conv_id: str) -> EvalDataset:
        """The document-level view of one conversation: its turns and its questions only.

        ``name`` is ``<name>-<conv_id>`` and ``corpus_hash`` the SHA-256 of that conversation's turns, so a vector
        cache keyed by them never mixes conversations.
        """
        ds = self.dataset
        corpus = {t.doc_id: ds.corpus[t.doc_id] for t in self.turns[conv_id]}
        canon = json.dumps([[d, doc.text] for d, doc in corpus.items()], ensure_ascii=False).encode("utf-8")
        qids = [q.qa_id for q in self.questions if q.conv_id == conv_id]
        return EvalDataset(
            name=f"{ds.name}-{_safe(conv_id)}",
            split=ds.split,
            corpus=corpus,
            queries={q: ds.queries[q] for q in qids},
            qrels={q: ds.qrels[q] for q in qids},
            hash=hashlib.sha256((ds.hash + "\0" + conv_id).encode()).hexdigest(),
            corpus_hash=hashlib.sha256(canon).hexdigest(),
            source=ds.source,
            tags={q: ds.tags[q] for q in qids},
        )


def is_conversation_folder(path: str | Path) -> bool:
    """Whether ``path`` is a folder holding ``turns.jsonl`` and ``qa.jsonl``."""
    p = Path(path).expanduser()
    return (p / "turns.jsonl").is_file() and (p / "qa.jsonl").is_file()


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "-", text).strip("-") or "x"


def _missing(row: dict, keys: Iterable[str]) -> list[str]:
    return [k for k in keys if row.get(k) is None]


def load_conversations(
    path: str | Path,
    *,
    conversations: Sequence[str] | None = None,
    limit_queries: int | None = None,
    perturb: str | None = None,
) -> ConversationDataset:
    """Load a conversation folder (see the module docstring).

    Args:
        path: the folder with ``turns.jsonl`` and ``qa.jsonl``.
        conversations: keep only these conversation ids (their turns and questions); the split becomes
            ``turns:<ids>`` and the hash changes, so baselines of the whole set are not compared with a subset.
        limit_queries: keep the first N judged questions (file order), and the first N no-answer questions; the
            split gets ``~q<N>``.
        perturb: ``"acks"``: insert an assistant acknowledgement after every turn (module docstring); the split
            gets ``+acks`` and both hashes change.

    Returns:
        The dataset; ``dataset.name`` is the folder name, ``dataset.split`` is ``turns`` (plus the selection).

    Raises:
        ContextEngineError: ``WRT-4041`` a file is missing or a selected conversation does not exist; ``WRT-4221``
            a line is not valid JSON, lacks a required field, repeats a turn id, has an unknown role or a session
            time that does not parse; ``WRT-4002`` an unknown perturbation.
    """
    if perturb is not None and perturb not in PERTURBATIONS:
        raise ContextEngineError(
            ErrorCode.REQUEST_INVALID, f"unknown perturbation {perturb!r}; use one of {', '.join(PERTURBATIONS)}"
        )
    root = Path(path).expanduser()
    turns_path, qa_path = root / "turns.jsonl", root / "qa.jsonl"
    for p in (turns_path, qa_path):
        if not p.is_file():
            raise ContextEngineError(ErrorCode.PATH_NOT_FOUND, f"conversation dataset file missing: {p}")
    h = _Hasher(root)
    turn_rows = _jsonl(h.add(turns_path, corpus=True), turns_path)
    qa_rows = _jsonl(h.add(qa_path), qa_path)
    keep = set(conversations) if conversations else None

    turns = _read_turns(turn_rows, turns_path, keep)
    if keep is not None and (absent := sorted(keep - set(turns))):
        raise ContextEngineError(ErrorCode.PATH_NOT_FOUND, f"no conversation(s) {absent} in {turns_path}")
    if perturb == "acks":
        turns = insert_acks(turns)
    seen = {t.doc_id for ts in turns.values() for t in ts}
    questions, no_answer, unknown, unjudged = _read_questions(qa_rows, qa_path, turns, seen)

    split = "turns"
    digest = h.all.hexdigest()
    corpus_hash = h.corpus.hexdigest()
    if keep is not None:
        split += ":" + ",".join(sorted(keep))
        digest = hashlib.sha256((digest + "\0" + "\0".join(sorted(keep))).encode()).hexdigest()
        corpus_hash = hashlib.sha256(digest.encode()).hexdigest()
    if perturb is not None:
        tag = _perturbation_tag(perturb)
        split += f"+{perturb}"
        digest = hashlib.sha256((digest + "\0" + tag).encode()).hexdigest()
        corpus_hash = hashlib.sha256((corpus_hash + "\0" + tag).encode()).hexdigest()
    if limit_queries:
        questions = questions[:limit_queries]
        no_answer = no_answer[:limit_queries]
        split += f"~q{limit_queries}"
        digest = hashlib.sha256((digest + f"\0q{limit_queries}").encode()).hexdigest()
    corpus = {t.doc_id: Document(t.doc_id, "", t.content()) for ts in turns.values() for t in ts}
    dataset = EvalDataset(
        name=root.name,
        split=split,
        corpus=corpus,
        queries={q.qa_id: q.question for q in questions},
        qrels={q.qa_id: {turn_doc_id(q.conv_id, e): 1 for e in q.evidence} for q in questions},
        hash=digest,
        corpus_hash=corpus_hash,
        source=str(root),
        tags={q.qa_id: [q.category_name, f"conv:{q.conv_id}"] for q in questions},
    )
    return ConversationDataset(
        turns=turns,
        questions=questions,
        dataset=dataset,
        unknown_evidence=unknown,
        unjudged_questions=unjudged,
        no_answer=no_answer,
        perturbation=perturb,
        _conv_of={q.qa_id: q.conv_id for q in [*questions, *no_answer]},
    )


def _read_turns(rows: list[dict], path: Path, keep: set[str] | None) -> dict[str, list[Turn]]:
    """``turns.jsonl`` rows as ``{conv_id: [Turn, ...]}`` (file order; conversations outside ``keep`` skipped)."""
    turns: dict[str, list[Turn]] = {}
    seen: set[str] = set()
    times: dict[str, datetime | None] = {}
    for n, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or _missing(row, _REQUIRED_TURN):
            what = _missing(row, _REQUIRED_TURN) if isinstance(row, dict) else "an object"
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}: turn {n} lacks {what}")
        conv = str(row["conv_id"])
        if keep is not None and conv not in keep:
            continue
        raw_time = str(row.get("session_date_time") or "")
        if raw_time not in times:
            try:
                times[raw_time] = parse_session_time(raw_time)
            except ValueError as err:
                raise ContextEngineError(
                    ErrorCode.CONTENT_INVALID, f"{path}: turn {n}: session time {raw_time!r} does not parse"
                ) from err
        role = str(row.get("role") or "user")
        if role not in _ROLES:
            raise ContextEngineError(
                ErrorCode.CONTENT_INVALID, f"{path}: turn {n}: unknown role {role!r}; use one of {', '.join(_ROLES)}"
            )
        turn = Turn(
            conv_id=conv,
            dia_id=str(row["dia_id"]),
            session=str(row["session"]),
            session_date_time=raw_time,
            timestamp=times[raw_time],
            speaker=str(row.get("speaker") or ""),
            text=str(row["text"]),
            role=role,
        )
        if turn.doc_id in seen:
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}: turn {n} repeats {turn.doc_id!r}")
        seen.add(turn.doc_id)
        turns.setdefault(conv, []).append(turn)
    return turns


def _read_questions(
    rows: list[dict], path: Path, turns: dict[str, list[Turn]], seen: set[str]
) -> tuple[list[Question], list[Question], int, int]:
    """``qa.jsonl`` rows of the loaded conversations as ``(judged, no_answer, unknown evidence ids, unjudged)``."""
    questions: list[Question] = []
    no_answer: list[Question] = []
    unknown = unjudged = 0
    qids: set[str] = set()
    for n, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or _missing(row, _REQUIRED_QA) or not isinstance(row["evidence"], list):
            raise ContextEngineError(
                ErrorCode.CONTENT_INVALID, f"{path}: question {n} lacks conv_id/qa_id/question/evidence (a list)"
            )
        conv = str(row["conv_id"])
        if conv not in turns:
            continue
        qa_id = str(row["qa_id"])
        if qa_id in qids:
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}: question {n} repeats qa_id {qa_id!r}")
        qids.add(qa_id)
        category = str(row.get("category", ""))
        name = str(row.get("category_name") or category)
        evidence = [str(e) for e in row["evidence"]]
        if name == UNANSWERABLE or not evidence:
            no_answer.append(Question(qa_id, conv, str(row["question"]), category, name, ()))
            continue
        known = tuple(dict.fromkeys(e for e in evidence if turn_doc_id(conv, e) in seen))
        unknown += len(set(evidence)) - len(known)
        if not known:
            unjudged += 1
            continue
        questions.append(Question(qa_id, conv, str(row["question"]), category, name, known))
    return questions, no_answer, unknown, unjudged


def _perturbation_tag(perturb: str) -> str:
    """What a perturbation adds to the hashes: its name and the SHA-256 (12 hex) of the texts it inserts."""
    texts = json.dumps(ACK_TEXTS if perturb == "acks" else [], ensure_ascii=False)
    return f"perturb:{perturb}:{hashlib.sha256(texts.encode('utf-8')).hexdigest()[:12]}"


def ack_text(doc_id: str) -> str:
    """The acknowledgement inserted after the turn ``doc_id``: one of :data:`ACK_TEXTS`, by its SHA-256."""
    digest = hashlib.sha256(doc_id.encode("utf-8")).digest()
    return ACK_TEXTS[int.from_bytes(digest[:8], "big") % len(ACK_TEXTS)]


def insert_acks(turns: dict[str, list[Turn]]) -> dict[str, list[Turn]]:
    """``turns`` with an assistant acknowledgement after every turn (``<dia_id>#ack``, empty speaker, same session
    and time, text :func:`ack_text`); a new dict, the input is not changed."""
    out: dict[str, list[Turn]] = {}
    for conv, ts in turns.items():
        rows = out.setdefault(conv, [])
        for t in ts:
            ack = Turn(
                conv_id=t.conv_id,
                dia_id=t.dia_id + ACK_SUFFIX,
                session=t.session,
                session_date_time=t.session_date_time,
                timestamp=t.timestamp,
                speaker="",
                text=ack_text(t.doc_id),
                role="assistant",
            )
            rows += [t, ack]
    return out
