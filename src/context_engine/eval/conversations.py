"""Conversation datasets (DESIGN §11; issue 11 item 5): LoCoMo-style turns and questions, evidence turns as qrels.

A conversation folder holds two JSON-lines files:

* ``turns.jsonl``: one turn a line, ``{conv_id, dia_id, session, session_date_time, speaker, text}``, in the order
  spoken. ``session`` (``session_1`` ...) names the session a turn belongs to; ``session_date_time`` is the session's
  start in LoCoMo's form (``"1:56 pm on 8 May, 2023"``) or ISO 8601; it is parsed here into a naive
  :class:`~datetime.datetime` (the data carries no time zone).
* ``qa.jsonl``: one question a line, ``{conv_id, qa_id, question, category, category_name, evidence: [dia_id]}``.
  ``evidence`` names the turns of the same conversation that hold the answer: those are the question's qrels
  (grade 1 each).

Ids are strings. A turn's document id is ``<conv_id>/<dia_id>`` (:func:`turn_doc_id`), so the flattened
:class:`~context_engine.eval.datasets.EvalDataset` of every conversation has unique ids. Each question searches only
its own conversation; :meth:`ConversationDataset.scoped` gives the document-level view of one conversation (its turns
and its questions) for retrievers that index one conversation at a time.

Evidence naming no turn of the conversation is dropped and counted (:attr:`ConversationDataset.unknown_evidence`); a
question left without evidence is not a judged query and is counted in
:attr:`ConversationDataset.unjudged_questions` (LoCoMo has a few with an empty evidence list).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.eval.datasets import Document, EvalDataset, _Hasher, _jsonl

__all__ = [
    "ConversationDataset",
    "Question",
    "Turn",
    "is_conversation_folder",
    "load_conversations",
    "parse_session_time",
    "turn_doc_id",
]

#: Formats of ``session_date_time`` tried in order (LoCoMo's, with and without the comma), then ISO 8601.
_TIME_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %B %Y", "%I:%M %p on %d %b, %Y")
_REQUIRED_TURN = ("conv_id", "dia_id", "session", "speaker", "text")
_REQUIRED_QA = ("conv_id", "qa_id", "question", "evidence")


def turn_doc_id(conv_id: str, dia_id: str) -> str:
    """The document id of a turn: ``<conv_id>/<dia_id>`` (``conv-26/D1:3``)."""
    return f"{conv_id}/{dia_id}"


def parse_session_time(value: str | None) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` (LoCoMo; naive) or ISO 8601 text as a :class:`datetime`; ``None``/``""`` -> ``None``.

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
        speaker, text: who said what.
    """

    conv_id: str
    dia_id: str
    session: str
    session_date_time: str
    timestamp: datetime | None
    speaker: str
    text: str

    @property
    def doc_id(self) -> str:
        """:func:`turn_doc_id` of this turn."""
        return turn_doc_id(self.conv_id, self.dia_id)

    def content(self) -> str:
        """``speaker: text``: what the document-level baselines index for this turn (the turn alone)."""
        return f"{self.speaker}: {self.text}" if self.speaker else self.text


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
        dataset: the flattened :class:`EvalDataset`: corpus = every turn (``Document(id, "", "speaker: text")``),
            queries = the judged questions by ``qa_id``, qrels = ``{qa_id: {turn_doc_id: 1}}``, tags =
            ``[category_name, "conv:<conv_id>"]``; its ``hash`` covers both files (and the selection).
        unknown_evidence: evidence ids that name no turn of their conversation (dropped).
        unjudged_questions: questions without any known evidence (left out).
    """

    turns: dict[str, list[Turn]]
    questions: list[Question]
    dataset: EvalDataset
    unknown_evidence: int = 0
    unjudged_questions: int = 0
    _conv_of: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def conversations(self) -> list[str]:
        """Conversation ids in order."""
        return list(self.turns)

    def conversation_of(self, qa_id: str) -> str:
        """The conversation a question belongs to. Raises ``KeyError`` for an unknown question."""
        return self._conv_of[qa_id]

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
) -> ConversationDataset:
    """Load a conversation folder (see the module docstring).

    Args:
        path: the folder with ``turns.jsonl`` and ``qa.jsonl``.
        conversations: keep only these conversation ids (their turns and questions); the split becomes
            ``turns:<ids>`` and the hash changes, so baselines of the whole set are not compared with a subset.
        limit_queries: keep the first N judged questions (file order); the split gets ``~q<N>``.

    Returns:
        The dataset; ``dataset.name`` is the folder name, ``dataset.split`` is ``turns`` (plus the selection).

    Raises:
        ContextEngineError: ``WRT-4041`` a file is missing or a selected conversation does not exist; ``WRT-4221``
            a line is not valid JSON, lacks a required field, repeats a turn id, or has a session time that does
            not parse.
    """
    root = Path(path).expanduser()
    turns_path, qa_path = root / "turns.jsonl", root / "qa.jsonl"
    for p in (turns_path, qa_path):
        if not p.is_file():
            raise ContextEngineError(ErrorCode.PATH_NOT_FOUND, f"conversation dataset file missing: {p}")
    h = _Hasher(root)
    turn_rows = _jsonl(h.add(turns_path, corpus=True), turns_path)
    qa_rows = _jsonl(h.add(qa_path), qa_path)
    keep = set(conversations) if conversations else None

    turns: dict[str, list[Turn]] = {}
    seen: set[str] = set()
    times: dict[str, datetime | None] = {}
    for n, row in enumerate(turn_rows, start=1):
        if not isinstance(row, dict) or _missing(row, _REQUIRED_TURN):
            what = _missing(row, _REQUIRED_TURN) if isinstance(row, dict) else "an object"
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{turns_path}: turn {n} lacks {what}")
        conv = str(row["conv_id"])
        if keep is not None and conv not in keep:
            continue
        raw_time = str(row.get("session_date_time") or "")
        if raw_time not in times:
            try:
                times[raw_time] = parse_session_time(raw_time)
            except ValueError as err:
                raise ContextEngineError(
                    ErrorCode.CONTENT_INVALID, f"{turns_path}: turn {n}: session time {raw_time!r} does not parse"
                ) from err
        turn = Turn(
            conv_id=conv,
            dia_id=str(row["dia_id"]),
            session=str(row["session"]),
            session_date_time=raw_time,
            timestamp=times[raw_time],
            speaker=str(row["speaker"]),
            text=str(row["text"]),
        )
        if turn.doc_id in seen:
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{turns_path}: turn {n} repeats {turn.doc_id!r}")
        seen.add(turn.doc_id)
        turns.setdefault(conv, []).append(turn)
    if keep is not None and (absent := sorted(keep - set(turns))):
        raise ContextEngineError(ErrorCode.PATH_NOT_FOUND, f"no conversation(s) {absent} in {turns_path}")

    questions: list[Question] = []
    unknown = unjudged = 0
    qids: set[str] = set()
    for n, row in enumerate(qa_rows, start=1):
        if not isinstance(row, dict) or _missing(row, _REQUIRED_QA) or not isinstance(row["evidence"], list):
            raise ContextEngineError(
                ErrorCode.CONTENT_INVALID, f"{qa_path}: question {n} lacks conv_id/qa_id/question/evidence (a list)"
            )
        conv = str(row["conv_id"])
        if conv not in turns:
            continue
        qa_id = str(row["qa_id"])
        if qa_id in qids:
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{qa_path}: question {n} repeats qa_id {qa_id!r}")
        qids.add(qa_id)
        evidence = [str(e) for e in row["evidence"]]
        known = tuple(dict.fromkeys(e for e in evidence if turn_doc_id(conv, e) in seen))
        unknown += len(set(evidence)) - len(known)
        if not known:
            unjudged += 1
            continue
        category = str(row.get("category", ""))
        questions.append(
            Question(qa_id, conv, str(row["question"]), category, str(row.get("category_name") or category), known)
        )

    split = "turns"
    digest = h.all.hexdigest()
    if keep is not None:
        split += ":" + ",".join(sorted(keep))
        digest = hashlib.sha256((digest + "\0" + "\0".join(sorted(keep))).encode()).hexdigest()
    if limit_queries:
        questions = questions[:limit_queries]
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
        corpus_hash=h.corpus.hexdigest() if keep is None else hashlib.sha256(digest.encode()).hexdigest(),
        source=str(root),
        tags={q.qa_id: [q.category_name, f"conv:{q.conv_id}"] for q in questions},
    )
    return ConversationDataset(
        turns=turns,
        questions=questions,
        dataset=dataset,
        unknown_evidence=unknown,
        unjudged_questions=unjudged,
        _conv_of={q.qa_id: q.conv_id for q in questions},
    )
