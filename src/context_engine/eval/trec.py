"""TREC run and qrels files (DESIGN §11). Ids are always ``str``, never coerced to numbers.

* run: ``qid Q0 doc_id rank score tag`` per line; ranks start at 1, lines ordered by query id, then rank.
* qrels: ``qid 0 doc_id grade`` per line.

A run in memory is ``{query_id: [(doc_id, score), ...]}``, best first (higher score is better).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from context_engine.errors import ContextEngineError, ErrorCode

__all__ = ["Run", "rank_order", "read_qrels", "read_run", "write_qrels", "write_run"]

Run = dict[str, list[tuple[str, float]]]


def rank_order(results: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Results in rank order: score descending, ties by doc id ascending, the first occurrence of a doc kept."""
    seen: set[str] = set()
    out: list[tuple[str, float]] = []
    for doc_id, score in sorted(results, key=lambda r: (-r[1], r[0])):
        if doc_id not in seen:
            seen.add(doc_id)
            out.append((doc_id, float(score)))
    return out


def _check_id(value: str, what: str) -> None:
    if not value or any(c.isspace() for c in value):
        raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{what} {value!r} is empty or contains whitespace")


def write_run(run: Mapping[str, Sequence[tuple[str, float]]], path: Path, tag: str = "context-engine") -> None:
    """Write ``run`` in TREC form (each query's results put in :func:`rank_order`).

    Raises:
        ContextEngineError: ``WRT-4221`` when an id or the tag is empty or contains whitespace.
    """
    _check_id(tag, "run tag")
    lines: list[str] = []
    for qid in sorted(run):
        _check_id(qid, "query id")
        for rank, (doc_id, score) in enumerate(rank_order(run[qid]), start=1):
            _check_id(doc_id, "doc id")
            lines.append(f"{qid} Q0 {doc_id} {rank} {score:.6f} {tag}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")


def read_run(path: Path) -> Run:
    """Read a TREC run; results per query in :func:`rank_order`.

    Raises:
        ContextEngineError: ``WRT-4221`` for a line without six fields or with a non-numeric score.
    """
    run: Run = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}:{n}: a TREC run line has 6 fields")
        try:
            score = float(parts[4])
        except ValueError as err:
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}:{n}: score is not a number") from err
        run.setdefault(parts[0], []).append((parts[2], score))
    return {q: rank_order(r) for q, r in run.items()}


def write_qrels(qrels: Mapping[str, Mapping[str, int]], path: Path) -> None:
    """Write qrels in TREC form, ordered by query id then doc id."""
    lines = []
    for qid in sorted(qrels):
        _check_id(qid, "query id")
        for doc_id in sorted(qrels[qid]):
            _check_id(doc_id, "doc id")
            lines.append(f"{qid} 0 {doc_id} {int(qrels[qid][doc_id])}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Read TREC qrels (``qid iter doc_id grade``).

    Raises:
        ContextEngineError: ``WRT-4221`` for a malformed line.
    """
    qrels: dict[str, dict[str, int]] = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4:
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}:{n}: a TREC qrels line has 4 fields")
        try:
            qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
        except ValueError as err:
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}:{n}: grade is not an integer") from err
    return qrels
